//! The known workload the observer shows: paced so that it keeps every
//! worker busy without taking whole cores.

use std::time::Duration;

use smarm::{Actor, Addr, ChildSpec, Ctx, Restart, Shutdown, StartError, Strategy, Supervisor};

use crate::{Observed, WORKERS};

/// Registered names the workload creates, with the kind the process table
/// gives each.
pub const NAMES: [(&str, &str); 7] = [
    ("logger", "process"),
    ("spawner", "process"),
    ("thrower", "process"),
    ("app_sup", "supervisor"),
    ("db_pool", "process"),
    ("bouncer_0", "actor"),
    ("observer", "process"),
];

/// Names in the supervision tree.
pub const TREE: [&str; 8] = ["app_sup", "db", "pool", "cache", "web", "router", "sessions", "flaky"];

/// Round trips a ping-pong pair makes between two sleeps.
const ROUNDS: u32 = 50;
/// Hops of each ball the thrower sends to the bouncers.
const HOPS: u32 = 100;
/// The pace of the paced loops.
const TICK: Duration = Duration::from_millis(10);

/// A handler actor that sends each ball it gets on to its partner (on
/// another worker) until the ball has no hops left.
struct Bouncer {
    partner: Option<Addr<Bouncer>>,
}

enum Bounce {
    Partner(Addr<Bouncer>),
    Ball(u32),
}

impl Actor for Bouncer {
    type Msg = Bounce;
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, msg: Bounce) {
        match msg {
            Bounce::Partner(partner) => self.partner = Some(partner),
            Bounce::Ball(0) => {}
            Bounce::Ball(hops) => {
                if let Some(partner) = &self.partner {
                    let _ = partner.send(Bounce::Ball(hops - 1));
                }
            }
        }
    }
}

/// Idles, registered under `name` (a restarted child takes the name again).
fn idle(name: &'static str) -> impl FnMut() -> Result<smarm::JoinHandle, smarm::SpawnError> {
    move || {
        smarm::spawn(move || {
            if let Some(me) = smarm::self_pid() {
                let _ = smarm::register(name, me);
            }
            loop {
                smarm::sleep(Duration::from_millis(100));
            }
        })
    }
}

/// A child that ends normally after a few seconds; `Permanent`, so its
/// supervisor restarts it.
fn flaky() -> Result<smarm::JoinHandle, smarm::SpawnError> {
    smarm::spawn(|| smarm::sleep(Duration::from_secs(3)))
}

/// A supervisor child of `app_sup`, built afresh at each start and handed
/// to the observer.
fn subtree(name: &'static str, observed: &std::sync::Arc<Observed>, build: fn() -> Supervisor) -> ChildSpec {
    let observed = observed.clone();
    ChildSpec::new(name, move || {
        let supervisor = build().start()?;
        observed.watch(supervisor.clone());
        Ok::<_, StartError>(supervisor)
    })
    .shutdown(Shutdown::Infinity)
}

fn db() -> Supervisor {
    Supervisor::new()
        .strategy(Strategy::OneForAll)
        .child(ChildSpec::new("pool", idle("db_pool")))
        .child(ChildSpec::new("cache", idle("db_cache")))
}

fn web() -> Supervisor {
    Supervisor::new()
        .strategy(Strategy::RestForOne)
        .intensity(10, Duration::from_secs(1))
        .child(ChildSpec::new("router", idle("web_router")))
        .child(ChildSpec::new("sessions", idle("web_sessions")).restart(Restart::Transient))
        .child(ChildSpec::new("flaky", flaky))
}

/// Starts the workload (from a process: supervisors start from one).
pub fn start(observed: &std::sync::Arc<Observed>) -> Result<(), String> {
    let runtime = smarm::current_runtime().ok_or("not in a process")?;
    let spawn_error = |e: smarm::SpawnError| e.to_string();
    // Ping-pong pairs across workers, paced.
    for w in 0..WORKERS {
        let (to_pong, from_ping) = smarm::channel::<u64>();
        let (to_ping, from_pong) = smarm::channel::<u64>();
        runtime
            .spawn_on(w, move || {
                let mut n = 0;
                loop {
                    for _ in 0..ROUNDS {
                        if to_pong.send(n).is_err() {
                            return;
                        }
                        let Ok(back) = from_pong.recv() else { return };
                        n = back;
                    }
                    smarm::sleep(TICK);
                }
            })
            .map_err(spawn_error)?;
        runtime
            .spawn_on((w + 1) % WORKERS, move || {
                while let Ok(n) = from_ping.recv() {
                    if to_ping.send(n + 1).is_err() {
                        return;
                    }
                }
            })
            .map_err(spawn_error)?;
    }
    // A registered logger that traps exits, linked to two flushers.
    runtime
        .spawn_on(0, || {
            let me = smarm::self_pid().expect("a process");
            let _ = smarm::register("logger", me);
            let exits = smarm::trap_exit().expect("in a process");
            for name in ["flusher_0", "flusher_1"] {
                if let Ok(flusher) = smarm::spawn(move || {
                    if let Some(me) = smarm::self_pid() {
                        let _ = smarm::register(name, me);
                    }
                    loop {
                        smarm::sleep(Duration::from_millis(20));
                    }
                }) {
                    let _ = smarm::link(flusher.pid());
                }
            }
            while exits.recv().is_ok() {}
        })
        .map_err(spawn_error)?;
    // A spawner of short-lived processes that monitors a sleeper.
    runtime
        .spawn_on(1, || {
            let me = smarm::self_pid().expect("a process");
            let _ = smarm::register("spawner", me);
            let sleeper = smarm::spawn(|| loop {
                smarm::sleep(Duration::from_millis(100));
            });
            let _watch = sleeper.map(|sleeper| smarm::monitor(sleeper.pid()));
            loop {
                let batch: Vec<_> = (0..50u64).filter_map(|i| smarm::spawn(move || i * i).ok()).collect();
                let _: u64 = batch.into_iter().filter_map(|h| h.join().ok()).sum();
                smarm::sleep(Duration::from_millis(20));
            }
        })
        .map_err(spawn_error)?;
    // Bouncing actors, a pair across each two neighbouring workers.
    let mut bouncers = Vec::new();
    for w in 0..WORKERS {
        let bouncer = runtime.spawn_actor_on(w, Bouncer { partner: None }).map_err(spawn_error)?;
        runtime.register(&format!("bouncer_{w}"), bouncer.pid()).map_err(|e| e.to_string())?;
        bouncers.push(bouncer);
    }
    for (w, bouncer) in bouncers.iter().enumerate() {
        let partner = bouncers[(w + 1) % WORKERS].clone();
        bouncer.send(Bounce::Partner(partner)).map_err(|_| "a bouncer ended")?;
    }
    runtime
        .spawn_on(2, move || {
            let me = smarm::self_pid().expect("a process");
            let _ = smarm::register("thrower", me);
            loop {
                for bouncer in &bouncers {
                    let _ = bouncer.send(Bounce::Ball(HOPS));
                }
                smarm::sleep(TICK);
            }
        })
        .map_err(spawn_error)?;
    // The supervision tree.
    let root = Supervisor::new()
        .intensity(10, Duration::from_secs(1))
        .child(subtree("db", observed, db))
        .child(subtree("web", observed, web))
        .on_worker(3)
        .start()
        .map_err(|e| e.to_string())?;
    runtime.register("app_sup", root.pid()).map_err(|e| e.to_string())?;
    observed.watch(root);
    Ok(())
}
