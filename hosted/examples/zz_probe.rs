use std::time::{Duration, Instant};
fn run(budget: u64) -> Duration {
    let e = smarm::Engine::builder().workers(2).max_spinners(2).spin_budget_cycles(budget).build().unwrap();
    e.block_on(|| {
        let (tx, rx) = smarm::channel::<Instant>();
        let (atx, arx) = smarm::channel::<()>();
        let r = smarm::spawn_on(1, move || {
            let mut v = Vec::new();
            while let Ok(s) = rx.recv() {
                v.push(s.elapsed());
                if atx.send(()).is_err() {
                    break;
                }
            }
            v.sort();
            println!("p50 {:?}", v[v.len() / 2]);
        });
        let s = smarm::spawn_on(0, move || {
            for _ in 0..20000 {
                tx.send(Instant::now()).unwrap();
                arx.recv().unwrap();
            }
        });
        s.unwrap().join().unwrap();
        r.unwrap().join().unwrap();
    })
    .unwrap();
    Duration::ZERO
}
fn main() {
    for b in [0u64, 1000, 5000, 20000, 100000] {
        print!("budget {b}: ");
        run(b);
        println!("{:?}", smarm::DBG.iter().map(|a| a.swap(0, std::sync::atomic::Ordering::Relaxed)).collect::<Vec<_>>());
    }
}
