//! Actor mail and the allocator: once warm, a send from a handler to an
//! actor — on the same worker or another — allocates nothing (its
//! envelope is a block recycled by the sending worker), and a runtime
//! that drops frees every block it made. Counted per thread by a global
//! allocator (this file is its own test binary); a `Stepper` runs every
//! worker on the test's thread.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use smarm::{Actor, Addr, Config, Ctx, Stepper};

/// The system allocator, counting this thread's allocations and frees.
struct Counting;

thread_local! {
    static ALLOCATED: Cell<u64> = const { Cell::new(0) };
    static FREED: Cell<u64> = const { Cell::new(0) };
}

fn bump(counter: &'static std::thread::LocalKey<Cell<u64>>) {
    // A thread being torn down has no counters any more: not counted.
    let _ = counter.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every call is forwarded unchanged to `System`, which upholds the
// `GlobalAlloc` contract; the counters have no effect on memory (and
// allocate nothing: const thread-locals without destructors).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        bump(&ALLOCATED);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        bump(&ALLOCATED);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        bump(&ALLOCATED);
        bump(&FREED);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        bump(&FREED);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocated() -> u64 {
    ALLOCATED.with(Cell::get)
}

fn live() -> i64 {
    ALLOCATED.with(Cell::get) as i64 - FREED.with(Cell::get) as i64
}

/// Answers every number with the next one.
struct Pong;

impl Actor for Pong {
    type Msg = (u64, Addr<Ping>);
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, (n, back): (u64, Addr<Ping>)) {
        let _ = back.send(Rally::Ball(n + 1));
    }
}

enum Rally {
    /// Play this many round trips.
    Go(u64),
    Ball(u64),
}

/// Plays rounds of round trips with its `Pong`, counting finished rounds.
struct Ping {
    pong: Addr<Pong>,
    trips: u64,
    rounds: Arc<AtomicU64>,
}

impl Actor for Ping {
    type Msg = Rally;
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, msg: Rally) {
        match msg {
            Rally::Go(trips) => {
                self.trips = trips;
                let _ = self.pong.send((0, ctx.addr()));
            }
            Rally::Ball(n) if n == self.trips => {
                self.rounds.fetch_add(1, Ordering::Relaxed);
            }
            Rally::Ball(n) => {
                let _ = self.pong.send((n, ctx.addr()));
            }
        }
    }
}

const TRIPS: u64 = 2_000;

/// A stepper of `workers` workers with a Ping on worker 0 and its Pong on
/// `pong_worker`.
fn rally(workers: usize, pong_worker: usize) -> (Stepper, Addr<Ping>, Addr<Pong>, Arc<AtomicU64>) {
    let stepper =
        Stepper::new(Config { worker_count: workers, ..Config::default() }).expect("runtime builds");
    let rt = stepper.runtime().clone();
    let pong = rt.spawn_actor_on(pong_worker, Pong).expect("spawn pong");
    let rounds = Arc::new(AtomicU64::new(0));
    let ping = rt
        .spawn_actor_on(0, Ping { pong: pong.clone(), trips: 0, rounds: rounds.clone() })
        .expect("spawn ping");
    (stepper, ping, pong, rounds)
}

/// Stops both actors and runs the stepper until they have ended, so the
/// runtime drops with nothing abandoned.
fn finish(mut stepper: Stepper, ping: Addr<Ping>, pong: Addr<Pong>) {
    ping.stop().expect("ping alive");
    pong.stop().expect("pong alive");
    drop((ping, pong));
    stepper.run();
}

/// Plays one round; returns this thread's allocations during it.
fn round(stepper: &mut Stepper, ping: &Addr<Ping>, rounds: &AtomicU64) -> u64 {
    let done = rounds.load(Ordering::Relaxed) + 1;
    let before = allocated();
    // From the test's thread: one boxed envelope.
    ping.send(Rally::Go(TRIPS)).map_err(|_| "ping alive").unwrap();
    while rounds.load(Ordering::Relaxed) < done {
        assert!(stepper.try_tick(), "the round stalled");
    }
    allocated() - before
}

/// Allocations of a warm round of `TRIPS` round trips: a few, whatever
/// the number of messages (without recycling, at least one per message).
fn warm_round_allocations(workers: usize, pong_worker: usize) -> u64 {
    let (mut stepper, ping, pong, rounds) = rally(workers, pong_worker);
    round(&mut stepper, &ping, &rounds);
    round(&mut stepper, &ping, &rounds);
    let warm = round(&mut stepper, &ping, &rounds);
    assert_eq!(rounds.load(Ordering::Relaxed), 3);
    finish(stepper, ping, pong);
    warm
}

#[test]
fn a_warm_same_worker_send_allocates_nothing() {
    let allocations = warm_round_allocations(1, 0);
    assert!(allocations <= 2, "{allocations} allocations for {} messages", 2 * TRIPS);
}

#[test]
fn a_warm_cross_worker_send_allocates_nothing() {
    let allocations = warm_round_allocations(2, 1);
    assert!(allocations <= 2, "{allocations} allocations for {} messages", 2 * TRIPS);
}

/// A runtime whose workers sent each other many messages frees every
/// block when it drops: a runtime's life leaves this thread's live
/// allocations where one that sent almost nothing leaves them (whatever
/// a runtime leaves to other threads to free, or keeps process-wide, is
/// the same for both).
#[test]
fn a_dropped_runtime_frees_its_blocks() {
    let life = |rounds_played: u32| {
        let (mut stepper, ping, pong, rounds) = rally(2, 1);
        for _ in 0..rounds_played {
            round(&mut stepper, &ping, &rounds);
        }
        finish(stepper, ping, pong);
    };
    life(0);
    life(3);
    let start = live();
    life(0);
    let quiet = live() - start;
    life(3);
    let busy = live() - start - quiet;
    assert_eq!(busy, quiet, "live allocations a busy runtime left behind, against a quiet one");
}

/// Counts what it is sent.
struct Tally(Arc<AtomicU64>);

impl Actor for Tally {
    type Msg = u64;
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
}

/// A process's burst of sends to an actor of its own worker goes straight
/// into the mailbox: no envelope a message, so even the first burst of a
/// fresh runtime allocates only as the mailbox grows (staged, each
/// message took a block of the worker's cache, which starts empty).
#[test]
fn a_process_s_burst_to_a_local_actor_takes_no_envelope_a_message() {
    const BURST: u64 = 1_000;
    let mut stepper = Stepper::new(Config { worker_count: 1, ..Config::default() }).expect("runtime builds");
    let rt = stepper.runtime().clone();
    let total = Arc::new(AtomicU64::new(0));
    let tally = rt.spawn_actor_on(0, Tally(total.clone())).expect("spawn tally");
    // Installed before the burst, so no message waits for the install.
    while stepper.try_tick() {}
    let to = tally.clone();
    let before = allocated();
    let sender = rt
        .spawn(move || {
            for _ in 0..BURST {
                to.send(1).expect("tally alive");
            }
        })
        .expect("spawn the sender");
    while total.load(Ordering::Relaxed) < BURST {
        assert!(stepper.try_tick(), "the burst stalled");
    }
    let allocations = allocated() - before;
    assert_eq!(total.load(Ordering::Relaxed), BURST, "every message handled once");
    assert!(allocations < BURST / 4, "{allocations} allocations for a burst of {BURST} messages");
    drop(sender);
    tally.stop().expect("tally alive");
    drop(tally);
    stepper.run();
}
