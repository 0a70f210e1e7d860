use std::time::Duration;

#[test]
fn channel_select_monitor_registry_smoke() {
    smarm::run(|| {
        let (tx, rx) = smarm::channel::<u32>();
        let h = smarm::spawn(move || {
            for i in 0..10 {
                tx.send(i).unwrap();
                smarm::yield_now();
            }
        })
        .unwrap();
        let m = smarm::monitor(h.pid());
        let got: Vec<u32> = (0..10).map(|_| rx.recv().unwrap()).collect();
        assert_eq!(got, (0..10).collect::<Vec<_>>());
        assert_eq!(rx.recv(), Err(smarm::RecvError::Disconnected));
        let down = m.rx.recv().unwrap();
        assert_eq!(down.reason, smarm::ExitReason::Normal);
        h.join().unwrap();
        let (_tx2, rx2) = smarm::channel::<u8>();
        assert_eq!(rx2.recv_timeout(Duration::from_millis(5)), Err(smarm::RecvTimeoutError::Timeout));
        let (tx3, rx3) = smarm::channel::<u8>();
        let s = smarm::spawn(move || {
            smarm::sleep(Duration::from_millis(5));
            tx3.send(7).unwrap();
        })
        .unwrap();
        assert_eq!(smarm::select_timeout(&[&rx2, &rx3], Duration::from_millis(1)), None);
        assert_eq!(smarm::select(&[&rx2, &rx3]), 1);
        assert_eq!(rx3.try_recv(), Ok(7));
        s.join().unwrap();
        let me = smarm::self_pid().unwrap();
        smarm::register("root", me).unwrap();
        assert_eq!(smarm::whereis("root"), Some(me));
        assert_eq!(smarm::name_of(me).as_deref(), Some("root"));
        assert_eq!(smarm::unregister("root"), Some(me));
        assert_eq!(smarm::whereis("root"), None);
    });
}
