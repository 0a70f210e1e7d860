//! The hot-path shapes of the criterion benches, one run each, for
//! counting the instructions an operation takes under Valgrind's
//! callgrind (`benches/instructions.sh`). Times on a shared virtual
//! machine move by a fifth between runs; instruction counts do not, so
//! they show whether a change to the hot path does less work, and how
//! the work compares with tokio's for the same shape.
//!
//! Run: `cargo run -p smarm-benches --release --example instructions -- SHAPE PEER ROUNDS [SIZE]`:
//! one runtime runs `ROUNDS` rounds of `SIZE` operations (default 10,000,
//! as in the criterion benches) of
//!
//! - `SHAPE`: `yield` (two processes or tasks yielding to each other,
//!   `SIZE` yields in all), `channel` (a ping-pong of `SIZE` round trips
//!   over two unbounded channels), `spawn` (`SIZE` processes or tasks
//!   spawned, then all joined), `actor` (a ping-pong of `SIZE` round trips
//!   between two handler actors; tokio's side is the same two tasks over
//!   mpsc channels, as in the `actors` bench), `fanout` (one handler sends
//!   `SIZE` numbers round-robin to 100 actors of another worker, in one
//!   turn; tokio's side is a task sending to 100 tasks over unbounded
//!   mpsc channels);
//! - `PEER`: `smarm` (one worker, `smarm::run`; two for `fanout`, an
//!   engine without worker handoff, so the sends cross between them) or
//!   `tokio` (a `current_thread` runtime; `multi_thread` with two workers
//!   for `fanout`).
//!
//! The two-worker shape counts both threads' instructions, idle looks
//! included, so it moves by a few percent between runs where the others
//! do not move at all.
//!
//! The first round warms the runtime up (its slab, stack pool and
//! allocator caches), as criterion's warm-up does, so the difference
//! between two runs with different `ROUNDS` is the steady-state cost.
//! Every round checks its result (every message comes back, every spawned
//! body ran) and the run exits non-zero otherwise.

use std::hint::black_box;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use smarm::{Actor, Addr, Ctx};

#[path = "../benches/common/fanout.rs"]
mod fanout;
use fanout::{Fan, Sink};

#[derive(Clone, Copy)]
enum Shape {
    Yield,
    Channel,
    Spawn,
    Actor,
    Fanout,
}

/// The receivers of the `fanout` shape.
const SINKS: u64 = 100;

/// Operations per round unless the command line says otherwise.
const DEFAULT_SIZE: u64 = 10_000;

fn parse_args() -> Result<(Shape, bool, u64, u64), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (shape, peer, rounds, size) = match args.as_slice() {
        [shape, peer, rounds] => (shape, peer, rounds, None),
        [shape, peer, rounds, size] => (shape, peer, rounds, Some(size)),
        _ => {
            return Err(
                "usage: instructions yield|channel|spawn|actor|fanout smarm|tokio ROUNDS [SIZE]".into()
            )
        }
    };
    let shape = match shape.as_str() {
        "yield" => Shape::Yield,
        "channel" => Shape::Channel,
        "spawn" => Shape::Spawn,
        "actor" => Shape::Actor,
        "fanout" => Shape::Fanout,
        other => return Err(format!("unknown shape {other:?}: yield, channel, spawn, actor or fanout")),
    };
    let smarm = match peer.as_str() {
        "smarm" => true,
        "tokio" => false,
        other => return Err(format!("unknown peer {other:?}: smarm or tokio")),
    };
    let rounds = rounds.parse::<u64>().map_err(|e| format!("ROUNDS {rounds:?}: {e}"))?;
    if rounds == 0 {
        return Err("ROUNDS must be at least 1".into());
    }
    let size = match size {
        None => DEFAULT_SIZE,
        Some(size) => size.parse::<u64>().map_err(|e| format!("SIZE {size:?}: {e}"))?,
    };
    if size < 2 || size % 2 != 0 {
        return Err(format!("SIZE {size}: an even number, at least 2 (the yield shape splits it in two)"));
    }
    if matches!(shape, Shape::Fanout) && size % SINKS != 0 {
        return Err(format!("SIZE {size}: a multiple of {SINKS} for the fanout shape"));
    }
    Ok((shape, smarm, rounds, size))
}

fn main() -> ExitCode {
    let (shape, smarm, rounds, size) = match parse_args() {
        Ok(parsed) => parsed,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    // What each round did, to check: yields made, values echoed, bodies run.
    let done = if smarm { smarm_run(shape, rounds, size) } else { tokio_run(shape, rounds, size) };
    match done.iter().position(|&done| done != size) {
        None => ExitCode::SUCCESS,
        Some(round) => {
            eprintln!("round {round}: expected {size} operations, saw {}", done[round]);
            ExitCode::FAILURE
        }
    }
}

// ---------------------------------------------------------------- smarm

/// Answers every number with the same number.
struct Pong;

impl Actor for Pong {
    type Msg = (u64, Addr<Ping>);
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, (n, back): (u64, Addr<Ping>)) {
        let _ = back.send(black_box(n));
    }
}

/// Sends `trips` numbers one at a time and reports how many came back.
struct Ping {
    pong: Addr<Pong>,
    trips: u64,
    back: u64,
    done: smarm::Sender<u64>,
}

impl Actor for Ping {
    type Msg = u64;
    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        let _ = self.pong.send((0, ctx.addr()));
    }
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, n: u64) {
        self.back += 1;
        if n + 1 == self.trips {
            let _ = self.done.send(self.back);
            ctx.stop_self();
        } else {
            let _ = self.pong.send((n + 1, ctx.addr()));
        }
    }
}

/// Runs `rounds` rounds of `size` operations in one runtime; what each
/// round did.
fn smarm_run(shape: Shape, rounds: u64, size: u64) -> Vec<u64> {
    let all_rounds = move || (0..rounds).map(|_| smarm_round(shape, size)).collect();
    match shape {
        // Two workers, so that every send crosses between them.
        Shape::Fanout => smarm::Engine::builder()
            .workers(2)
            .worker_handoff(false)
            .build()
            .expect("engine starts")
            .block_on(all_rounds)
            .expect("engine runs"),
        _ => smarm::run(all_rounds),
    }
}

/// One round of the `fanout` shape: the messages the sinks counted.
fn smarm_fanout(n: u64) -> u64 {
    let runtime = smarm::current_runtime().expect("in a process");
    let (done, reports) = smarm::channel();
    let sinks: Vec<_> = (0..SINKS)
        .map(|_| {
            runtime.spawn_actor_on(1, Sink { expect: n / SINKS, got: 0, done: done.clone() }).expect("spawn")
        })
        .collect();
    let fan = runtime.spawn_actor_on(0, Fan { sinks: sinks.clone(), messages: n }).expect("spawn fan");
    fan.send(()).expect("fan alive");
    let got = (0..SINKS).map(|_| reports.recv().expect("every sink reports")).sum();
    for sink in &sinks {
        sink.stop().expect("sink alive");
    }
    got
}

fn smarm_round(shape: Shape, n: u64) -> u64 {
    match shape {
        Shape::Yield => {
            let count = Arc::new(AtomicU64::new(0));
            let yielder = |count: Arc<AtomicU64>| {
                move || {
                    for _ in 0..n / 2 {
                        smarm::yield_now();
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                }
            };
            let a = smarm::spawn(yielder(count.clone())).expect("spawn");
            let b = smarm::spawn(yielder(count.clone())).expect("spawn");
            a.join().expect("yielder exits normally");
            b.join().expect("yielder exits normally");
            count.load(Ordering::Relaxed)
        }
        Shape::Channel => {
            let (to_ponger, from_pinger) = smarm::channel::<u64>();
            let (to_pinger, from_ponger) = smarm::channel::<u64>();
            let ponger = smarm::spawn(move || {
                while let Ok(value) = from_pinger.recv() {
                    if to_pinger.send(black_box(value)).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn");
            let mut back = 0;
            for trip in 0..n {
                to_ponger.send(trip).expect("ponger alive");
                back += u64::from(from_ponger.recv().expect("ponger answers") == trip);
            }
            drop(to_ponger);
            ponger.join().expect("ponger exits normally");
            back
        }
        Shape::Spawn => {
            let count = Arc::new(AtomicU64::new(0));
            let handles: Vec<_> = (0..n)
                .map(|_| {
                    let count = count.clone();
                    smarm::spawn(move || {
                        count.fetch_add(1, Ordering::Relaxed);
                    })
                    .expect("spawn")
                })
                .collect();
            for handle in handles {
                handle.join().expect("body exits normally");
            }
            count.load(Ordering::Relaxed)
        }
        Shape::Fanout => smarm_fanout(n),
        Shape::Actor => {
            let runtime = smarm::current_runtime().expect("in a process");
            let pong = runtime.spawn_actor_on(0, Pong).expect("spawn pong");
            let (done, back) = smarm::channel();
            runtime
                .spawn_actor_on(0, Ping { pong: pong.clone(), trips: n, back: 0, done })
                .expect("spawn ping");
            let back = back.recv().expect("ping reports");
            pong.stop().expect("pong alive");
            back
        }
    }
}

// ---------------------------------------------------------------- tokio

/// Runs `rounds` rounds of `size` operations in one runtime; what each
/// round did.
fn tokio_run(shape: Shape, rounds: u64, size: u64) -> Vec<u64> {
    let runtime = match shape {
        Shape::Fanout => tokio::runtime::Builder::new_multi_thread().worker_threads(2).build(),
        _ => tokio::runtime::Builder::new_current_thread().build(),
    }
    .expect("tokio runtime");
    (0..rounds).map(|_| runtime.block_on(tokio_round(shape, size))).collect()
}

async fn tokio_round(shape: Shape, n: u64) -> u64 {
    match shape {
        Shape::Yield => {
            let count = Arc::new(AtomicU64::new(0));
            let yielder = |count: Arc<AtomicU64>| async move {
                for _ in 0..n / 2 {
                    tokio::task::yield_now().await;
                    count.fetch_add(1, Ordering::Relaxed);
                }
            };
            let a = tokio::spawn(yielder(count.clone()));
            let b = tokio::spawn(yielder(count.clone()));
            a.await.expect("yielder exits normally");
            b.await.expect("yielder exits normally");
            count.load(Ordering::Relaxed)
        }
        // The actor shape's tokio side is the same pair of tasks.
        Shape::Channel | Shape::Actor => {
            let (to_ponger, mut from_pinger) = tokio::sync::mpsc::unbounded_channel::<u64>();
            let (to_pinger, mut from_ponger) = tokio::sync::mpsc::unbounded_channel::<u64>();
            let ponger = tokio::spawn(async move {
                while let Some(value) = from_pinger.recv().await {
                    if to_pinger.send(black_box(value)).is_err() {
                        break;
                    }
                }
            });
            let pinger = tokio::spawn(async move {
                let mut back = 0;
                for trip in 0..n {
                    to_ponger.send(trip).expect("ponger alive");
                    back += u64::from(from_ponger.recv().await.expect("ponger answers") == trip);
                }
                back
            });
            let back = pinger.await.expect("pinger exits normally");
            ponger.await.expect("ponger exits normally");
            back
        }
        Shape::Fanout => {
            let (done, mut reports) = tokio::sync::mpsc::unbounded_channel::<u64>();
            let mut senders = Vec::new();
            for _ in 0..SINKS {
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
                let done = done.clone();
                tokio::spawn(async move {
                    let mut got = 0;
                    while let Some(value) = rx.recv().await {
                        black_box(value);
                        got += 1;
                        if got == n / SINKS {
                            let _ = done.send(got);
                            break;
                        }
                    }
                });
                senders.push(tx);
            }
            tokio::spawn(async move {
                for i in 0..n {
                    let _ = senders[(i % SINKS) as usize].send(black_box(i));
                }
            });
            let mut got = 0;
            for _ in 0..SINKS {
                got += reports.recv().await.expect("every sink reports");
            }
            got
        }
        Shape::Spawn => {
            let count = Arc::new(AtomicU64::new(0));
            let handles: Vec<_> = (0..n)
                .map(|_| {
                    let count = count.clone();
                    tokio::spawn(async move {
                        count.fetch_add(1, Ordering::Relaxed);
                    })
                })
                .collect();
            for handle in handles {
                handle.await.expect("body exits normally");
            }
            count.load(Ordering::Relaxed)
        }
    }
}
