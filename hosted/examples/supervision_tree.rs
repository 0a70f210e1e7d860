//! A supervision tree and its three strategies. The root supervisor
//! (one-for-one) holds two subtrees:
//!
//! - `db` (one-for-all): `pool`, `cache` — they need each other, so when one
//!   dies both restart;
//! - `web` (rest-for-one): `router`, `auth`, `api` — each depends on those
//!   started before it, so a death restarts it and everything after it.
//!
//! Workers are crashed (with `smarm::exit`, reason "crash") in turn; each
//! crash prints which pids changed, and checks that exactly the children
//! the strategy names were restarted.
//!
//! Run: `cargo run -p smarm --example supervision_tree -- 10` (crashes;
//! default 10).

use std::time::{Duration, Instant};

use smarm::{ChildSpec, ExitReason, Pid, Strategy, Supervisor, SupervisorRef};

/// A worker: idles until it is told to end.
fn worker() {
    loop {
        smarm::sleep(Duration::from_millis(100));
    }
}

fn spec(name: &'static str) -> ChildSpec {
    ChildSpec::new(name, || smarm::spawn(worker))
}

/// The running pid of each child of `sup`, in start order.
fn pids(sup: &SupervisorRef) -> Vec<(String, Option<Pid>)> {
    sup.which_children().expect("the supervisor answers").into_iter().map(|c| (c.name, c.pid)).collect()
}

fn main() {
    let crashes: usize = std::env::args().nth(1).map_or(10, |n| n.parse().expect("a number of crashes"));
    smarm::run(move || {
        let root = Supervisor::new().intensity(1_000, Duration::from_secs(1)).start().expect("root starts");
        let db = Supervisor::new()
            .strategy(Strategy::OneForAll)
            .intensity(1_000, Duration::from_secs(1))
            .child(spec("pool"))
            .child(spec("cache"))
            .start_under(&root, "db")
            .expect("db starts");
        let web = Supervisor::new()
            .strategy(Strategy::RestForOne)
            .intensity(1_000, Duration::from_secs(1))
            .child(spec("router"))
            .child(spec("auth"))
            .child(spec("api"))
            .start_under(&root, "web")
            .expect("web starts");
        let targets: [(&str, &SupervisorRef, Strategy, &str); 5] = [
            ("db", &db, Strategy::OneForAll, "pool"),
            ("web", &web, Strategy::RestForOne, "auth"),
            ("db", &db, Strategy::OneForAll, "cache"),
            ("web", &web, Strategy::RestForOne, "api"),
            ("web", &web, Strategy::RestForOne, "router"),
        ];
        let mut restarted = 0;
        for n in 0..crashes {
            let (tree, sup, strategy, victim) = targets[n % targets.len()];
            let before = pids(sup);
            let index = before.iter().position(|(name, _)| name == victim).expect("a child of this tree");
            // Which children the strategy restarts with the victim.
            let expected: Vec<bool> = (0..before.len())
                .map(|i| match strategy {
                    Strategy::OneForOne => i == index,
                    Strategy::OneForAll => true,
                    Strategy::RestForOne => i >= index,
                })
                .collect();
            let old = before[index].1.expect("running");
            smarm::exit(old, ExitReason::Other("crash".into())).expect("the victim is alive");
            // Wait until every child the strategy names runs under a new pid.
            let start = Instant::now();
            let after = loop {
                let now = pids(sup);
                let settled = now
                    .iter()
                    .zip(&before)
                    .zip(&expected)
                    .all(|(((_, new), (_, old)), &cycled)| new.is_some() && (!cycled || new != old));
                if settled {
                    break now;
                }
                assert!(start.elapsed() < Duration::from_secs(5), "{tree} never restarted {victim}");
                smarm::sleep(Duration::from_millis(1));
            };
            let changes: Vec<String> = before
                .iter()
                .zip(&after)
                .map(|((name, old), (_, new))| {
                    let (old, new) = (old.expect("running"), new.expect("running"));
                    if old == new {
                        format!("{name} {old} kept")
                    } else {
                        format!("{name} {old}->{new}")
                    }
                })
                .collect();
            for (((_, old), (_, new)), &cycled) in before.iter().zip(&after).zip(&expected) {
                assert_eq!(old != new, cycled, "{tree} ({strategy:?}) restarted the wrong children");
                restarted += usize::from(cycled);
            }
            println!("crash {:>2}: {victim:<6} in {tree} ({strategy:?}): {}", n + 1, changes.join(", "));
        }
        println!("{crashes} crashes, {restarted} restarts, every one the strategy's");
        root.stop().expect("the tree shuts down in order");
    });
}
