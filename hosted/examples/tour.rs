//! A tour of smarm in about ten seconds: each step prints a heading and the
//! figures it measured.
//!
//! 1. A million processes: a tree of 1,111,111 processes, ten children per
//!    node, each leaf sending its number up and each node the sum of its
//!    children — spawned, run and collected on one worker.
//! 2. Supervision: a supervisor with three workers that crash at random;
//!    every crash is seen, and the child restarted under a new pid.
//! 3. A gen_server key-value store: calls, casts, a call that times out, and
//!    a tick arriving through `handle_info`.
//! 4. Blocking-style code on many cores: the four-worker Engine passes
//!    messages between processes on every worker; a table shows each
//!    worker's share.
//! 5. Handler actors: a thousand actors spread over the workers pass a
//!    token around a ring; a table shows each worker's actor statistics.
//!
//! Run: `cargo run --release --example tour`
//! (`-- --quick` shrinks every size a hundredfold, for CI and debug builds).

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use smarm::{Actor, Addr, CallError, ChildSpec, Ctx, GenServer, Server, Strategy, Supervisor};

/// Sizes for this run: full, or a hundredth (`--quick`).
#[derive(Clone, Copy)]
struct Sizes {
    leaves: u64,
    crashes: u64,
    messages: u64,
    actors: usize,
    laps: u64,
}

impl Sizes {
    fn new(quick: bool) -> Sizes {
        if quick {
            Sizes { leaves: 10_000, crashes: 6, messages: 40_000, actors: 10, laps: 30 }
        } else {
            Sizes { leaves: 1_000_000, crashes: 12, messages: 4_000_000, actors: 1_000, laps: 3_000 }
        }
    }
}

/// Whether stdout is a terminal: only then are headings bold and progress
/// lines rewritten in place (a file or a CI log gets plain lines).
fn on_terminal() -> bool {
    static TERMINAL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TERMINAL.get_or_init(|| std::io::stdout().is_terminal())
}

fn heading(step: usize, title: &str) {
    if on_terminal() {
        println!("\n\x1b[1m{step}. {title}\x1b[0m");
    } else {
        println!("\n{step}. {title}");
    }
}

/// Rewrites the current line (a progress report); nothing when stdout is
/// not a terminal, where only the final line of a step is printed.
fn progress(line: &str) {
    if on_terminal() {
        print!("\r   {line:<70}");
        let _ = std::io::stdout().flush();
    }
}

fn done(line: &str) {
    if on_terminal() {
        println!("\r   {line:<70}");
    } else {
        println!("   {line}");
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quick = std::env::args().any(|a| a == "--quick") || std::env::var_os("SMARM_TOUR_QUICK").is_some();
    let sizes = Sizes::new(quick);
    println!("smarm tour{}", if quick { " (quick)" } else { "" });
    skynet(sizes.leaves);
    // The crashes below are on purpose: keep their panic reports quiet
    // (this replaces the hook smarm installed with its first runtime, which
    // names the panicking process before the default report).
    std::panic::set_hook(Box::new(|_| {}));
    supervision(sizes.crashes)?;
    kv_store()?;
    engine_messages(sizes.messages)?;
    actor_ring(sizes.actors, sizes.laps)?;
    println!("\ntour complete");
    Ok(())
}

// ---------------------------------------------------------------- 1 ----

fn node(first: u64, leaves: u64, parent: smarm::Sender<u64>) {
    if leaves == 1 {
        let _ = parent.send(first);
        return;
    }
    let (to_me, inbox) = smarm::channel();
    let share = leaves / 10;
    for child in 0..10 {
        let to_me = to_me.clone();
        smarm::spawn(move || node(first + child * share, share, to_me)).expect("spawn");
    }
    drop(to_me);
    let sum: u64 = (0..10).map(|_| inbox.recv().expect("every child reports")).sum();
    let _ = parent.send(sum);
}

fn skynet(leaves: u64) {
    const TREES: usize = 3;
    let processes = (leaves * 10 - 1) / 9;
    heading(1, &format!("{processes} processes: spawned, run and collected (skynet), {TREES} times"));
    let config = smarm::Config { stack_size: smarm::MIN_STACK_SIZE, ..smarm::Config::default() };
    let times = smarm::run_with(config, move || {
        let mut times = Vec::new();
        for tree in 1..=TREES {
            progress(&format!("tree {tree} of {TREES}: building on one worker..."));
            let start = Instant::now();
            let (to_root, result) = smarm::channel();
            smarm::spawn(move || node(0, leaves, to_root)).expect("spawn the root");
            let sum = result.recv().expect("the tree reports");
            times.push(start.elapsed());
            assert_eq!(sum, leaves * (leaves - 1) / 2, "the tree summed its leaves");
        }
        times
    });
    let best = times.iter().min().copied().unwrap_or_default();
    let all: Vec<String> = times.iter().map(|t| format!("{:.0} ms", t.as_secs_f64() * 1e3)).collect();
    done(&format!(
        "each tree summed its {leaves} leaves to {} (checked): {}",
        leaves * (leaves - 1) / 2,
        all.join(", ")
    ));
    println!(
        "   best: {:.1} M processes/s, {:.0} ns per process spawned, run, joined by message and freed",
        processes as f64 / best.as_secs_f64() / 1e6,
        best.as_nanos() as f64 / processes as f64,
    );
}

// ---------------------------------------------------------------- 2 ----

/// A worker that does jobs until told to crash.
fn flaky_worker(name: &'static str, jobs: smarm::Receiver<bool>) {
    smarm::register(name, smarm::self_pid().expect("a process")).expect("the name is free");
    while let Ok(crash) = jobs.recv() {
        assert!(!crash, "{name} crashed on purpose");
    }
}

fn supervision(crashes: u64) -> Result<(), Box<dyn std::error::Error>> {
    heading(2, "supervision: workers crash and are restarted");
    let names = ["alpha", "beta", "gamma"];
    smarm::run(move || -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        // Each start of a child makes a fresh job channel; the senders are
        // kept here by name so the tour can reach whoever runs now.
        let senders: Arc<std::sync::Mutex<HashMap<&'static str, smarm::Sender<bool>>>> = Arc::default();
        let mut supervisor =
            Supervisor::new().strategy(Strategy::OneForOne).intensity(100, Duration::from_secs(5));
        for name in names {
            let senders = senders.clone();
            supervisor = supervisor.child(ChildSpec::new(name, move || {
                let (tx, rx) = smarm::channel();
                senders.lock().unwrap().insert(name, tx);
                smarm::spawn(move || flaky_worker(name, rx))
            }));
        }
        let sup = supervisor.start()?;
        let mut restarts: HashMap<&str, u64> = HashMap::new();
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        for n in 0..crashes {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let name = names[(seed % 3) as usize];
            let old = loop {
                match (sup.child_pid(name)?, smarm::whereis(name)) {
                    // Registered by the child itself once it runs.
                    (Some(pid), Some(registered)) if pid == registered => break pid,
                    _ => smarm::sleep(Duration::from_millis(1)),
                }
            };
            let monitor = smarm::monitor(old);
            let tx = senders.lock().unwrap().get(name).cloned().expect("started");
            tx.send(true)?; // crash
            let down = monitor.rx.recv()?;
            let new = loop {
                match sup.child_pid(name)? {
                    Some(pid) if pid != old => break pid,
                    _ => smarm::sleep(Duration::from_millis(1)),
                }
            };
            *restarts.entry(name).or_default() += 1;
            println!(
                "   crash {:>2}: {name:<5} {old} died ({}) -> restarted as {new}",
                n + 1,
                short(&down.reason)
            );
        }
        let children = sup.which_children()?;
        assert!(children.iter().all(|c| c.pid.is_some()), "every child runs again");
        let mut counts: Vec<_> = restarts.into_iter().collect();
        counts.sort();
        let counts: Vec<String> = counts.iter().map(|(n, c)| format!("{n} {c}")).collect();
        println!(
            "   restarts: {} ({crashes} in all); all {} children running",
            counts.join(", "),
            children.len()
        );
        sup.stop()?;
        Ok(())
    })
    .map_err(|e| e as Box<dyn std::error::Error>)
}

fn short(reason: &smarm::ExitReason) -> String {
    match reason {
        smarm::ExitReason::Panicked(message) => format!("panicked: {message}"),
        other => format!("{other:?}"),
    }
}

// ---------------------------------------------------------------- 3 ----

/// A key-value store as a gen_server.
#[derive(Default)]
struct Kv {
    map: HashMap<String, u64>,
    ticks: u64,
}

enum KvCall {
    Get(String),
    /// Answers after this long (to show `call_timeout`).
    SlowGet(String, Duration),
    Ticks,
}

impl GenServer for Kv {
    type Call = KvCall;
    type Reply = Option<u64>;
    type Cast = (String, u64);
    type Info = ();

    fn handle_call(&mut self, request: KvCall) -> Option<u64> {
        match request {
            KvCall::Get(key) => self.map.get(&key).copied(),
            KvCall::SlowGet(key, delay) => {
                smarm::sleep(delay);
                self.map.get(&key).copied()
            }
            KvCall::Ticks => Some(self.ticks),
        }
    }

    fn handle_cast(&mut self, (key, value): (String, u64)) {
        *self.map.entry(key).or_default() += value;
    }

    fn handle_info(&mut self, (): ()) {
        self.ticks += 1;
    }
}

fn kv_store() -> Result<(), Box<dyn std::error::Error>> {
    heading(3, "a gen_server key-value store");
    smarm::run(|| -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let (tick, ticks) = smarm::channel();
        let kv = Server::new(Kv::default()).with_info(ticks).start()?;
        for (i, word) in ["apple", "pear", "apple", "fig", "apple"].iter().enumerate() {
            kv.cast((word.to_string(), i as u64 + 1))?;
        }
        let apple = kv.call(KvCall::Get("apple".into()))?;
        let plum = kv.call(KvCall::Get("plum".into()))?;
        println!("   cast 5 updates; call get(apple) = {apple:?}, get(plum) = {plum:?}");
        assert_eq!(apple, Some(1 + 3 + 5));
        assert_eq!(plum, None);
        let slow = kv
            .call_timeout(KvCall::SlowGet("fig".into(), Duration::from_millis(50)), Duration::from_millis(5));
        assert!(matches!(slow, Err(CallError::Timeout)), "{slow:?}");
        println!("   call_timeout(5 ms) on a 50 ms request: {slow:?}; the caller went on");
        for _ in 0..3 {
            tick.send(())?;
        }
        let ticks = kv.call(KvCall::Ticks)?;
        println!("   3 ticks sent to its info channel; handle_info counted {ticks:?}");
        assert_eq!(ticks, Some(3));
        kv.stop()?;
        Ok(())
    })
    .map_err(|e| e as Box<dyn std::error::Error>)
}

// ---------------------------------------------------------------- 4 ----

fn engine_messages(messages: u64) -> Result<(), Box<dyn std::error::Error>> {
    const WORKERS: usize = 4;
    heading(4, &format!("blocking-style code on {WORKERS} workers (the Engine)"));
    let engine = smarm::Engine::builder().workers(WORKERS).build()?;
    let rt = engine.runtime().clone();
    let received = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let seen = received.clone();
    let total = engine.block_on(move || {
        // One pair per worker: a producer on worker w sends to a consumer
        // on worker w + 1, so every message crosses between workers.
        let rt = smarm::current_runtime().expect("in a process");
        let per_pair = messages / WORKERS as u64;
        let consumers: Vec<_> = (0..WORKERS)
            .map(|w| {
                let (tx, rx) = smarm::channel::<u64>();
                let seen = seen.clone();
                let consumer = rt
                    .spawn_on((w + 1) % WORKERS, move || {
                        let mut sum = 0u64;
                        while let Ok(v) = rx.recv() {
                            sum += v;
                            seen.fetch_add(1, Ordering::Relaxed);
                        }
                        sum
                    })
                    .expect("spawn consumer");
                rt.spawn_on(w, move || {
                    for i in 0..per_pair {
                        tx.send(i).expect("consumer alive");
                    }
                })
                .expect("spawn producer");
                consumer
            })
            .collect();
        let mut last = Instant::now();
        // Progress while they run (the root is a process too: it sleeps).
        while seen.load(Ordering::Relaxed) < per_pair * WORKERS as u64 {
            if last.elapsed() > Duration::from_millis(100) {
                progress(&format!(
                    "{} of {} messages",
                    seen.load(Ordering::Relaxed),
                    per_pair * WORKERS as u64
                ));
                last = Instant::now();
            }
            smarm::sleep(Duration::from_millis(5));
        }
        consumers.into_iter().map(|c| c.join().expect("consumer returns")).sum::<u64>()
    })?;
    let elapsed = start.elapsed();
    let per_pair = messages / WORKERS as u64;
    assert_eq!(total, WORKERS as u64 * (per_pair * (per_pair - 1) / 2));
    assert_eq!(received.load(Ordering::Relaxed), per_pair * WORKERS as u64);
    done(&format!(
        "{} messages across workers in {:.0} ms ({:.1} M/s), every one received",
        per_pair * WORKERS as u64,
        elapsed.as_secs_f64() * 1e3,
        (per_pair * WORKERS as u64) as f64 / elapsed.as_secs_f64() / 1e6
    ));
    println!("   {:<7} {:>9} {:>9} {:>10} {:>8}", "worker", "spawned", "exited", "switches", "passes");
    for w in 0..rt.worker_count() {
        let s = rt.stats(w)?;
        println!("   {w:<7} {:>9} {:>9} {:>10} {:>8}", s.spawned, s.exited, s.switches, s.passes);
    }
    Ok(())
}

// ---------------------------------------------------------------- 5 ----

/// One member of the ring: passes the token on until its laps are done.
struct RingMember {
    next: Arc<std::sync::OnceLock<Addr<RingMember>>>,
    done: smarm::InboxAddr<u64>,
}

impl Actor for RingMember {
    /// Hops left.
    type Msg = u64;
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, hops: u64) {
        if hops == 0 {
            let _ = self.done.send(0);
            return;
        }
        let next = self.next.get().expect("linked before the first token");
        next.send(hops - 1).expect("the ring is alive");
    }
}

fn actor_ring(actors: usize, laps: u64) -> Result<(), Box<dyn std::error::Error>> {
    const WORKERS: usize = 4;
    heading(5, &format!("handler actors: a ring of {actors} on {WORKERS} workers"));
    let engine = smarm::Engine::builder().workers(WORKERS).build()?;
    let rt = engine.runtime().clone();
    let inbox = rt.new_inbox::<u64>();
    let links: Vec<_> = (0..actors).map(|_| Arc::new(std::sync::OnceLock::new())).collect();
    // Spawns through the handle go round-robin over the workers: every hop
    // crosses to the next worker.
    let members: Vec<Addr<RingMember>> = links
        .iter()
        .map(|next| rt.spawn_actor(RingMember { next: next.clone(), done: inbox.addr() }))
        .collect::<Result<_, _>>()?;
    for (i, next) in links.iter().enumerate() {
        let _ = next.set(members[(i + 1) % actors].clone());
    }
    let hops = laps * actors as u64;
    let start = Instant::now();
    members[0].send(hops)?;
    inbox.recv_timeout(Duration::from_secs(60))?;
    let elapsed = start.elapsed();
    done(&format!(
        "{hops} hops ({laps} laps) in {:.0} ms: {:.0} ns per hop",
        elapsed.as_secs_f64() * 1e3,
        elapsed.as_nanos() as f64 / hops as f64
    ));
    // Statistics are published every few passes; let every worker idle once.
    std::thread::sleep(Duration::from_millis(50));
    println!(
        "   {:<7} {:>7} {:>10} {:>12} {:>12}",
        "worker", "actors", "handled", "local sends", "cross sends"
    );
    let mut handled = 0;
    for w in 0..rt.worker_count() {
        let s = rt.actor_stats(w)?;
        handled += s.handled;
        println!("   {w:<7} {:>7} {:>10} {:>12} {:>12}", s.actors, s.handled, s.local_sends, s.cross_sends);
    }
    assert!(handled >= hops, "every hop was handled: {handled} of {hops}");
    for member in &members {
        member.stop()?;
    }
    engine.wait().unwrap();
    Ok(())
}
