use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use smarm::TryRecvError;

fn engine() -> smarm::Engine { smarm::Engine::builder().workers(4).build().unwrap() }

#[test]
fn mutex_stop_storm() {
    for round in 0..20 {
        engine().block_on(move || {
            let rt = smarm::current_runtime().unwrap();
            let m = Arc::new(smarm::Mutex::new(0u64));
            let hs: Vec<_> = (0..8).map(|_| { let m = m.clone(); rt.spawn(move || loop { let mut g = m.lock(); *g += 1; drop(g); smarm::check!(); }).unwrap() }).collect();
            smarm::sleep(Duration::from_millis(2));
            for h in hs { smarm::sleep(Duration::from_micros(200)); rt.request_stop(h.pid()).unwrap(); h.join().unwrap(); }
            assert!(m.try_lock().is_some(), "round {round}: mutex leaked");
        }).unwrap();
    }
}

#[test]
fn demonitor_race() {
    let hits = Arc::new(AtomicU64::new(0));
    let h2 = hits.clone();
    engine().block_on(move || {
        for i in 0..20_000u64 {
            let (go_tx, go) = smarm::channel::<()>();
            let t = smarm::spawn_on(1 + (i % 3) as usize, move || { let _ = go.recv(); }).unwrap();
            let m = smarm::monitor(t.pid());
            drop(go_tx);
            for _ in 0..(i % 200) { std::hint::spin_loop(); }
            let _ = smarm::demonitor(&m);
            t.join().unwrap();
            match m.rx.recv().map_err(|_| TryRecvError::Disconnected) { Ok(_) => { h2.fetch_add(1, Ordering::SeqCst); } Err(TryRecvError::Empty) => { h2.fetch_add(1_000_000, Ordering::SeqCst); } _ => {} }
        }
    }).unwrap();
    assert_eq!(hits.load(Ordering::SeqCst), 0, "Down after demonitor");
}

#[test]
fn bounded_stop_storm() {
    for round in 0..20 {
        engine().block_on(move || {
            let rt = smarm::current_runtime().unwrap();
            let (tx, rx) = smarm::bounded::<u64>(1);
            let senders: Vec<_> = (0..4).map(|_| { let tx = tx.clone(); rt.spawn(move || { while tx.send(1).is_ok() {} }).unwrap() }).collect();
            drop(tx);
            let r = rt.spawn(move || loop { let _ = rx.recv(); }).unwrap();
            smarm::sleep(Duration::from_millis(3));
            rt.request_stop(r.pid()).unwrap();
            r.join().unwrap();
            for s in senders { s.join().unwrap(); }
            let _ = round;
        }).unwrap();
    }
}
