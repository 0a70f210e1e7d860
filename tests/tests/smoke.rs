#[test]
fn run_returns_root_value() {
    let v = smarm::run(|| {
        let h = smarm::spawn(smarm::yield_now).unwrap();
        h.join().unwrap();
        42
    });
    assert_eq!(v, 42);
}
