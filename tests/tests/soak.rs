//! Soak: the runtime under volume, on the four-thread Engine, with every
//! count asserted — a million spawns, ten million messages, ten thousand
//! processes stopped or released out of every kind of wait, a hundred
//! thousand processes of which a tenth panic — and a million processes
//! parked at once on the default configuration (under `smarm::run`, then on
//! a two-worker Engine), whose resident memory it prints.
//!
//! Full size in release (`cargo test --release -p smarm-tests --test
//! soak`). A debug build (the workspace's `cargo test`, the aarch64 suite
//! under qemu) and an AddressSanitizer build run every scenario at a
//! hundredth of its size: the same paths, in seconds.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use smarm::{Engine, ExitReason, JoinError, JoinHandle, RecvTimeoutError};

/// Every count is divided by this.
const SCALE: usize = if cfg!(debug_assertions) || cfg!(smarm_asan) { 100 } else { 1 };

const WORKERS: usize = 4;

fn engine() -> Engine {
    Engine::builder().workers(WORKERS).build().expect("engine starts")
}

/// Spawns `count` processes (`make(i)` is process `i`'s body), round-robin
/// over the workers, `batch` at a time, and hands each result to `check`
/// as it is joined. Returns how many were joined.
fn spawn_join_in_batches<T, F>(
    count: usize,
    batch: usize,
    make: impl Fn(usize) -> F,
    mut check: impl FnMut(usize, Result<T, JoinError>),
) -> usize
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let mut joined = 0;
    let mut first = 0;
    while first < count {
        let end = (first + batch).min(count);
        let handles: Vec<(usize, JoinHandle<T>)> =
            (first..end).map(|i| (i, smarm::spawn_on(i % WORKERS, make(i)).expect("spawn"))).collect();
        for (i, handle) in handles {
            check(i, handle.join());
            joined += 1;
        }
        first = end;
    }
    joined
}

#[test]
fn a_million_spawns_and_joins() {
    let total = 1_000_000 / SCALE;
    engine()
        .block_on(move || {
            let rt = smarm::current_runtime().unwrap();
            let free_at_start = rt.free_slots();
            let mut sum = 0u64;
            let joined = spawn_join_in_batches(
                total,
                1_000,
                |i| move || i as u64,
                |i, result| {
                    let value = result.expect("a process that returns is joined with its value");
                    assert_eq!(value, i as u64);
                    sum += value;
                },
            );
            assert_eq!(joined, total);
            assert_eq!(sum, (total as u64) * (total as u64 - 1) / 2);
            assert_eq!(rt.live(), 1, "only the root is live");
            assert_eq!(rt.free_slots(), free_at_start, "every slot came back");
        })
        .expect("root runs");
}

#[test]
fn ten_million_messages_in_order_per_pair() {
    const PAIRS: usize = 8;
    let per_pair = 10_000_000 / SCALE / PAIRS;
    engine()
        .block_on(move || {
            let mut receivers = Vec::new();
            let mut senders = Vec::new();
            for pair in 0..PAIRS {
                let (tx, rx) = smarm::bounded::<(usize, u64)>(256);
                // The receiver on the worker after its sender's: every
                // message crosses workers.
                receivers.push(
                    smarm::spawn_on((pair + 1) % WORKERS, move || {
                        let mut next = 0u64;
                        while let Ok((from, sequence)) = rx.recv() {
                            assert_eq!(from, pair, "a message crossed into another pair's channel");
                            assert_eq!(sequence, next, "pair {pair}: out of order, lost or duplicated");
                            next += 1;
                        }
                        next
                    })
                    .unwrap(),
                );
                senders.push(
                    smarm::spawn_on(pair % WORKERS, move || {
                        for sequence in 0..per_pair as u64 {
                            tx.send((pair, sequence)).expect("the receiver outlives its sender");
                        }
                    })
                    .unwrap(),
                );
            }
            for sender in senders {
                sender.join().unwrap();
            }
            let mut total = 0;
            for (pair, receiver) in receivers.into_iter().enumerate() {
                let received = receiver.join().unwrap();
                assert_eq!(received, per_pair as u64, "pair {pair}");
                total += received;
            }
            assert_eq!(total, (PAIRS * per_pair) as u64);
        })
        .expect("root runs");
}

/// splitmix64: a deterministic, dependency-free generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniformly shuffled `0..n`.
    fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut v: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            v.swap(i, (self.next() % (i as u64 + 1)) as usize);
        }
        v
    }
}

/// Counts its drops in its own cell of a shared table: every destructor
/// must run exactly once.
struct Guard {
    drops: Arc<Vec<AtomicUsize>>,
    index: usize,
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.drops[self.index].fetch_add(1, Ordering::Relaxed);
    }
}

fn drop_table(n: usize) -> Arc<Vec<AtomicUsize>> {
    Arc::new((0..n).map(|_| AtomicUsize::new(0)).collect())
}

/// The waits a process can be parked in.
const KINDS: usize = 7;

/// What the root keeps to release a waiter of each kind: dropping it
/// releases the waiter (the fields are held only to be dropped), except
/// for select, which is sent to. The mutex, sleep and recv_timeout kinds
/// are released all at once.
#[allow(dead_code)]
enum Release {
    /// Channel recv: the only sender.
    Recv(smarm::Sender<()>),
    /// Bounded send on a full channel: the receiver.
    Send(smarm::Receiver<u8>),
    /// Select over two channels: the sender of the second arm.
    Select(smarm::Sender<()>),
    Mutex,
    Sleep,
    /// Join: the sender its target (a process parked in recv) waits on.
    Join(smarm::Sender<()>),
    RecvTimeout,
}

#[test]
fn ten_thousand_waiters_half_stopped_every_destructor_runs_once() {
    let n = 10_000 / SCALE;
    let drops = drop_table(n);
    let target_drops = drop_table(n);
    let (drops_in, target_drops_in) = (drops.clone(), target_drops.clone());
    engine()
        .block_on(move || {
            let (drops, target_drops) = (drops_in, target_drops_in);
            let rt = smarm::current_runtime().unwrap();
            let free_at_start = rt.free_slots();
            let mutex = Arc::new(smarm::Mutex::new(()));
            let held = mutex.lock();
            // Sleepers and recv_timeout waiters go round their wait until
            // this is set.
            let released = Arc::new(AtomicBool::new(false));
            // Waiters about to enter their wait.
            let waiting = Arc::new(AtomicUsize::new(0));

            let mut waiters: Vec<(JoinHandle<()>, Release)> = Vec::with_capacity(n);
            for index in 0..n {
                let guard = Guard { drops: drops.clone(), index };
                let waiting = waiting.clone();
                let worker = index % WORKERS;
                let spawn = |body: Box<dyn FnOnce() + Send>| smarm::spawn_on(worker, body).unwrap();
                let waiter = match index % KINDS {
                    0 => {
                        let (tx, rx) = smarm::channel::<()>();
                        let handle = spawn(Box::new(move || {
                            let _guard = guard;
                            waiting.fetch_add(1, Ordering::Relaxed);
                            assert!(rx.recv().is_err(), "released by the sender's drop");
                        }));
                        (handle, Release::Recv(tx))
                    }
                    1 => {
                        let (tx, rx) = smarm::bounded::<u8>(1);
                        let handle = spawn(Box::new(move || {
                            let _guard = guard;
                            tx.send(0).expect("room for one");
                            waiting.fetch_add(1, Ordering::Relaxed);
                            assert!(tx.send(1).is_err(), "released by the receiver's drop");
                        }));
                        (handle, Release::Send(rx))
                    }
                    2 => {
                        let (keep_open, never) = smarm::channel::<()>();
                        let (tx, rx) = smarm::channel::<()>();
                        let handle = spawn(Box::new(move || {
                            let _guard = guard;
                            let _keep_open = keep_open;
                            waiting.fetch_add(1, Ordering::Relaxed);
                            assert_eq!(smarm::select(&[&never, &rx]), 1);
                        }));
                        (handle, Release::Select(tx))
                    }
                    3 => {
                        let mutex = mutex.clone();
                        let handle = spawn(Box::new(move || {
                            let _guard = guard;
                            waiting.fetch_add(1, Ordering::Relaxed);
                            drop(mutex.lock());
                        }));
                        (handle, Release::Mutex)
                    }
                    4 => {
                        let released = released.clone();
                        let handle = spawn(Box::new(move || {
                            let _guard = guard;
                            waiting.fetch_add(1, Ordering::Relaxed);
                            while !released.load(Ordering::Acquire) {
                                smarm::sleep(Duration::from_millis(20));
                            }
                        }));
                        (handle, Release::Sleep)
                    }
                    5 => {
                        let (tx, rx) = smarm::channel::<()>();
                        let target_guard = Guard { drops: target_drops.clone(), index };
                        let target = spawn(Box::new(move || {
                            let _guard = target_guard;
                            assert!(rx.recv().is_err(), "released by the sender's drop");
                        }));
                        let handle = spawn(Box::new(move || {
                            let _guard = guard;
                            waiting.fetch_add(1, Ordering::Relaxed);
                            // The target is never stopped: it ends normally.
                            target.join().expect("the target ends normally");
                        }));
                        (handle, Release::Join(tx))
                    }
                    _ => {
                        let (keep_open, rx) = smarm::channel::<()>();
                        let released = released.clone();
                        let handle = spawn(Box::new(move || {
                            let _guard = guard;
                            let _keep_open = keep_open;
                            waiting.fetch_add(1, Ordering::Relaxed);
                            while !released.load(Ordering::Acquire) {
                                match rx.recv_timeout(Duration::from_millis(20)) {
                                    Err(RecvTimeoutError::Timeout) => {}
                                    other => panic!("only timeouts arrive: {other:?}"),
                                }
                            }
                        }));
                        (handle, Release::RecvTimeout)
                    }
                };
                waiters.push(waiter);
            }
            // Every waiter is at its wait; give them a moment to park.
            while waiting.load(Ordering::Relaxed) < n {
                smarm::sleep(Duration::from_millis(1));
            }
            smarm::sleep(Duration::from_millis(20));

            // Stop a random half, and join those.
            let mut order = Rng(0x5eed).permutation(n);
            let survivors = order.split_off(n / 2);
            let mut slots: Vec<Option<(JoinHandle<()>, Release)>> = waiters.into_iter().map(Some).collect();
            for &index in &order {
                rt.request_stop(slots[index].as_ref().unwrap().0.pid()).expect("a waiter is alive");
            }
            let mut stopped_per_kind = [0usize; KINDS];
            for &index in &order {
                let (handle, release) = slots[index].take().unwrap();
                assert_eq!(handle.join(), Err(JoinError::Exited(ExitReason::Stopped)), "waiter {index}");
                assert_eq!(drops[index].load(Ordering::Relaxed), 1, "stopped waiter {index}'s guard");
                stopped_per_kind[index % KINDS] += 1;
                drop(release);
            }
            assert!(stopped_per_kind.iter().all(|&k| k > 0), "every kind of wait was stopped");

            // Release the rest, and join them.
            released.store(true, Ordering::Release);
            drop(held);
            let mut rest = Vec::with_capacity(survivors.len());
            for &index in &survivors {
                let (handle, release) = slots[index].take().unwrap();
                match release {
                    Release::Select(tx) => tx.send(()).expect("the waiter holds the receiver"),
                    other => drop(other),
                }
                rest.push((index, handle));
            }
            for (index, handle) in rest {
                assert_eq!(handle.join(), Ok(()), "released waiter {index}");
            }

            // Every destructor ran exactly once; every slot came back.
            for (index, count) in drops.iter().enumerate() {
                assert_eq!(count.load(Ordering::Relaxed), 1, "waiter {index}'s guard");
            }
            // A target outlives a stopped joiner (it ends when its sender
            // is dropped, after its joiner's stop): wait for the stragglers.
            while rt.live() > 1 {
                smarm::sleep(Duration::from_millis(1));
            }
            for index in (0..n).filter(|i| i % KINDS == 5) {
                assert_eq!(target_drops[index].load(Ordering::Relaxed), 1, "target {index}'s guard");
            }
            assert_eq!(rt.free_slots(), free_at_start, "every slot came back");
        })
        .expect("root runs");
}

/// Replaces the panic hook with a silent one until dropped, so ten
/// thousand expected panics do not flood stderr; the previous hook comes
/// back even if the test fails.
struct QuietPanics(Option<PanicHook>);

type PanicHook = Box<dyn Fn(&std::panic::PanicHookInfo<'_>) + Sync + Send>;

impl QuietPanics {
    fn install() -> QuietPanics {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        QuietPanics(Some(previous))
    }
}

impl Drop for QuietPanics {
    fn drop(&mut self) {
        if let Some(previous) = self.0.take() {
            std::panic::set_hook(previous);
        }
    }
}

#[test]
fn a_hundred_thousand_processes_a_tenth_panic() {
    let total = 100_000 / SCALE;
    // After the engine is built: building one installs the runtime's own
    // hook (once per program), which would otherwise wrap the quiet one.
    let engine = engine();
    let quiet = QuietPanics::install();
    let (ok, panicked) = engine
        .block_on(move || {
            let rt = smarm::current_runtime().unwrap();
            let free_at_start = rt.free_slots();
            let (mut ok, mut panicked) = (0usize, 0usize);
            let joined = spawn_join_in_batches(
                total,
                1_000,
                |i| {
                    move || {
                        if i % 10 == 0 {
                            panic!("soak panic {i}");
                        }
                        i
                    }
                },
                |i, result| match result {
                    Ok(value) => {
                        assert_eq!(value, i);
                        ok += 1;
                    }
                    Err(JoinError::Exited(ExitReason::Panicked(message))) => {
                        assert_eq!(message, format!("soak panic {i}"));
                        panicked += 1;
                    }
                    Err(other) => panic!("process {i}: {other:?}"),
                },
            );
            assert_eq!(joined, total);
            assert_eq!(rt.live(), 1, "only the root is live");
            assert_eq!(rt.free_slots(), free_at_start, "every slot came back");
            (ok, panicked)
        })
        .expect("root runs");
    drop(quiet);
    assert_eq!(ok, total / 10 * 9);
    assert_eq!(panicked, total / 10);
}

/// A ring member of the actor exchange: checks per-origin order, counts
/// arrivals, forwards until the hops run out.
struct RingNode {
    id: usize,
    peers: Arc<std::sync::OnceLock<Vec<smarm::Addr<RingNode>>>>,
    last: Vec<u64>,
    handled: Arc<AtomicUsize>,
    finished: Arc<AtomicUsize>,
}

impl smarm::Actor for RingNode {
    /// (origin, seq, hops left)
    type Msg = (u32, u64, u32);
    fn handle(&mut self, _ctx: &mut smarm::Ctx<'_, Self>, (origin, seq, hops): (u32, u64, u32)) {
        self.handled.fetch_add(1, Ordering::Relaxed);
        // Messages reach this node from one neighbour only, so per origin
        // they must arrive in sequence (FIFO per (sender, target) pair).
        let o = origin as usize;
        if self.last.len() <= o {
            self.last.resize(o + 1, 0);
        }
        assert_eq!(self.last[o], seq, "node {}: origin {origin} out of order", self.id);
        self.last[o] = seq + 1;
        if hops == 0 {
            self.finished.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let peers = self.peers.get().expect("peers are set before the first message");
        peers[(self.id + 1) % peers.len()].send((origin, seq, hops - 1)).unwrap();
    }
}

/// 10,000 handler actors on a 4-thread Engine pass 1,000,000 messages
/// around a ring (200,000 sends × 5 deliveries): every message in is a
/// message out, in order per pair, no handler panics.
#[test]
fn ten_thousand_actors_a_million_messages() {
    const ACTORS: usize = 10_000 / SCALE;
    const PER_ACTOR: u64 = 20;
    const HOPS: u32 = 4;
    let engine = engine();
    let rt = engine.runtime().clone();
    let peers = Arc::new(std::sync::OnceLock::new());
    let handled = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(AtomicUsize::new(0));
    let addrs: Vec<_> = (0..ACTORS)
        .map(|id| {
            rt.spawn_actor(RingNode {
                id,
                peers: peers.clone(),
                last: Vec::new(),
                handled: handled.clone(),
                finished: finished.clone(),
            })
            .unwrap()
        })
        .collect();
    assert!(peers.set(addrs.clone()).is_ok());
    // Each origin's messages start at the node after it, so every node
    // hears from each origin through exactly one neighbour.
    for seq in 0..PER_ACTOR {
        for (origin, _) in addrs.iter().enumerate() {
            addrs[(origin + 1) % ACTORS].send((origin as u32, seq, HOPS)).unwrap();
        }
    }
    let total = ACTORS * PER_ACTOR as usize;
    let start = std::time::Instant::now();
    while finished.load(Ordering::Relaxed) < total {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "stalled at {}",
            finished.load(Ordering::Relaxed)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(handled.load(Ordering::Relaxed), total * (HOPS as usize + 1));
    let panics: u64 = (0..rt.worker_count()).map(|w| rt.actor_stats(w).unwrap().panics).sum();
    assert_eq!(panics, 0, "no order assertion failed");
    for a in &addrs {
        a.stop().unwrap();
    }
    engine.wait().unwrap();
    assert_eq!(rt.live(), 0);
}

/// A fresh actor that expects its messages `0, 1, 2` in order.
struct Fresh {
    next: u32,
    in_order: Arc<AtomicUsize>,
    out_of_order: Arc<AtomicUsize>,
}

impl smarm::Actor for Fresh {
    type Msg = u32;
    fn handle(&mut self, ctx: &mut smarm::Ctx<'_, Self>, msg: u32) {
        if msg != self.next {
            self.out_of_order.fetch_add(1, Ordering::Relaxed);
        }
        self.next = msg + 1;
        if msg == 2 {
            self.in_order.fetch_add(1, Ordering::Relaxed);
            ctx.stop_self();
        }
    }
}

/// 100,000 actors spawned from outside onto the Engine's workers, each
/// sent three messages at once: the messages outrun the installs (the
/// spawn queue is drained a budget at a time), are held per target and
/// released by its install, in order. Each envelope is looked at once, so
/// this takes a fraction of a second (retrying every held envelope each
/// pass made it quadratic: seconds).
#[test]
fn a_hundred_thousand_fresh_actors_get_their_mail_in_order() {
    const ACTORS: usize = 100_000 / SCALE;
    let engine = engine();
    let rt = engine.runtime().clone();
    let in_order = Arc::new(AtomicUsize::new(0));
    let out_of_order = Arc::new(AtomicUsize::new(0));
    for _ in 0..ACTORS {
        let addr = rt
            .spawn_actor(Fresh { next: 0, in_order: in_order.clone(), out_of_order: out_of_order.clone() })
            .unwrap();
        for m in 0..3 {
            addr.send(m).unwrap();
        }
    }
    let start = std::time::Instant::now();
    while in_order.load(Ordering::Relaxed) < ACTORS {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "stalled at {}",
            in_order.load(Ordering::Relaxed)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(out_of_order.load(Ordering::Relaxed), 0);
    engine.wait().unwrap();
    assert_eq!(rt.live(), 0);
}

/// Bytes of this process's resident set (`/proc/self/statm`), or 0 where
/// it cannot be read.
fn resident_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|statm| statm.split_whitespace().nth(1).and_then(|field| field.parse::<u64>().ok()))
        .unwrap_or(0);
    pages * 4096
}

/// The stacks a runtime keeps in its pool by default (`stack_pool_max`
/// unset): the rest go back to the platform when their processes end.
const DEFAULT_STACK_POOL_MAX: usize = 16_384;

/// The body of the million-parked test, run inside a root process:
/// `count` processes spawned (on `workers` workers, round-robin), each
/// parked on its own channel until all are parked at once; then each is
/// sent its own value and joined with `3 * index + value`. Every slot comes
/// back and the pool keeps what it may. Prints the resident set before,
/// at the peak and after. `label` names the host in the output.
fn million_parked(label: &str, count: usize, workers: usize) {
    let rt = smarm::current_runtime().expect("inside a runtime");
    let free_at_start = rt.free_slots();
    let pooled_at_start = rt.pooled_stacks();
    let parked = Arc::new(AtomicUsize::new(0));
    let before = resident_bytes();
    let mut senders = Vec::with_capacity(count);
    let mut handles = Vec::with_capacity(count);
    for index in 0..count {
        let (sender, receiver) = smarm::channel::<u64>();
        let parked = parked.clone();
        let handle = smarm::spawn_on(index % workers, move || {
            parked.fetch_add(1, Ordering::Relaxed);
            let value = receiver.recv().expect("the root sends before it drops the sender");
            3 * index as u64 + value
        })
        .expect("the default configuration has no process cap");
        senders.push(sender);
        handles.push(handle);
    }
    while parked.load(Ordering::Relaxed) < count {
        smarm::yield_now();
    }
    // Every one is alive and past its count: parked on its receive (or
    // about to park) at once.
    assert_eq!(rt.live(), count + 1, "all {count} alive at once, and the root");
    assert_eq!(rt.free_slots(), free_at_start - count);
    assert!(rt.slab_len() > count, "the slab grew past {count}: {}", rt.slab_len());
    let peak = resident_bytes();
    for (index, sender) in senders.into_iter().enumerate() {
        sender.send(1_000 + index as u64).expect("the process is parked on the receive");
    }
    for (index, handle) in handles.into_iter().enumerate() {
        let value = handle.join().expect("a released process returns its value");
        assert_eq!(value, 3 * index as u64 + 1_000 + index as u64, "process {index}");
    }
    let after = resident_bytes();
    assert_eq!(rt.live(), 1, "only the root is live");
    assert_eq!(rt.free_slots(), free_at_start, "every slot came back");
    assert_eq!(
        rt.pooled_stacks(),
        (pooled_at_start + count).min(DEFAULT_STACK_POOL_MAX),
        "every stack came back: to the pool up to its bound, the rest to the platform"
    );
    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    eprintln!(
        "{label}: {count} parked at once: RSS before {:.0} MiB, peak {:.0} MiB ({:.0} bytes per parked \
         process), after {:.0} MiB; slab {} slots, {:.0} MiB of address space, kept",
        mib(before),
        mib(peak),
        peak.saturating_sub(before) as f64 / count as f64,
        mib(after),
        rt.slab_len(),
        mib(rt.slab_bytes() as u64),
    );
}

/// A million processes parked at once on the default `Config` — no
/// `max_processes`, default stacks — first under `smarm::run` (one worker),
/// then on a two-worker Engine (half the spawns and half the wakes cross
/// workers, far more than a wake ring holds). One test, so the two
/// millions are not resident at the same time.
#[test]
fn a_million_parked_at_once_on_the_default_config() {
    let count = 1_000_000 / SCALE;
    smarm::run(move || million_parked("smarm::run", count, 1));
    Engine::builder()
        .workers(2)
        .build()
        .expect("engine starts")
        .block_on(move || million_parked("engine, 2 workers", count, 2))
        .expect("root runs");
}
