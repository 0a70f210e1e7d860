//! Heap allocations per operation, counted by a global allocator that
//! wraps the system's: per spawn + join, per message on a same-worker
//! channel ping-pong, and per `block_on` of a ready future, for smarm and
//! tokio (`current_thread`). A
//! measurement, not a timing: it prints its figures and writes them where
//! the summarizer reads them ([`smarm_benches::measure`]).
//!
//! Each figure is taken warm — after a first round of the same shape, so
//! that pools, slabs and channel buffers have grown — as the number of
//! `alloc`/`realloc` calls during the second round divided by its
//! operations.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use smarm_benches::measure::{self, Measurement};

/// The system allocator, counting allocations (`alloc`, `alloc_zeroed`,
/// `realloc`) over the whole process.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded unchanged to `System`, which upholds the
// `GlobalAlloc` contract; the counter has no effect on memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Spawns joined per round.
const SPAWNS: u64 = 10_000;
/// Round trips (two messages each) per round.
const TRIPS: u64 = 100_000;

/// Allocations per operation made by `round` the second time it runs.
fn per_op(ops: u64, mut round: impl FnMut()) -> f64 {
    round();
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    round();
    let after = ALLOCATIONS.load(Ordering::Relaxed);
    (after - before) as f64 / ops as f64
}

fn smarm_spawn_join() -> f64 {
    smarm::run(|| {
        per_op(SPAWNS, || {
            let handles: Vec<_> = (0..SPAWNS).map(|i| smarm::spawn(move || i).expect("spawn")).collect();
            let mut handles = handles.into_iter();
            let mut sum = 0;
            for handle in handles.by_ref() {
                sum += handle.join().expect("joins");
            }
            assert_eq!(sum, SPAWNS * (SPAWNS - 1) / 2);
        })
    })
}

fn tokio_spawn_join() -> f64 {
    let rt = tokio::runtime::Builder::new_current_thread().build().expect("tokio runtime");
    rt.block_on(async {
        let mut total = 0.0;
        let mut rounds = 0;
        // `per_op` needs a synchronous round: count around two async rounds
        // by hand instead.
        for round in 0..2 {
            let before = ALLOCATIONS.load(Ordering::Relaxed);
            let handles: Vec<_> = (0..SPAWNS).map(|i| tokio::spawn(async move { i })).collect();
            let mut sum = 0;
            for handle in handles {
                sum += handle.await.expect("joins");
            }
            assert_eq!(sum, SPAWNS * (SPAWNS - 1) / 2);
            if round == 1 {
                total = (ALLOCATIONS.load(Ordering::Relaxed) - before) as f64 / SPAWNS as f64;
                rounds += 1;
            }
        }
        assert_eq!(rounds, 1);
        total
    })
}

fn smarm_message() -> f64 {
    smarm::run(|| {
        let (to_ponger, from_pinger) = smarm::channel::<u64>();
        let (to_pinger, from_ponger) = smarm::channel::<u64>();
        let ponger = smarm::spawn(move || {
            while let Ok(value) = from_pinger.recv() {
                if to_pinger.send(value).is_err() {
                    break;
                }
            }
        })
        .expect("spawn");
        let figure = per_op(2 * TRIPS, || {
            for trip in 0..TRIPS {
                to_ponger.send(trip).expect("ponger alive");
                assert_eq!(from_ponger.recv().expect("ponger answers"), trip);
            }
        });
        drop(to_ponger);
        ponger.join().expect("ponger exits");
        figure
    })
}

fn tokio_message() -> f64 {
    let rt = tokio::runtime::Builder::new_current_thread().build().expect("tokio runtime");
    rt.block_on(async {
        let (to_ponger, mut from_pinger) = tokio::sync::mpsc::unbounded_channel::<u64>();
        let (to_pinger, mut from_ponger) = tokio::sync::mpsc::unbounded_channel::<u64>();
        let ponger = tokio::spawn(async move {
            while let Some(value) = from_pinger.recv().await {
                if to_pinger.send(value).is_err() {
                    break;
                }
            }
        });
        let mut figure = 0.0;
        for round in 0..2 {
            let before = ALLOCATIONS.load(Ordering::Relaxed);
            for trip in 0..TRIPS {
                to_ponger.send(trip).expect("ponger alive");
                assert_eq!(from_ponger.recv().await.expect("ponger answers"), trip);
            }
            if round == 1 {
                figure = (ALLOCATIONS.load(Ordering::Relaxed) - before) as f64 / (2 * TRIPS) as f64;
            }
        }
        drop(to_ponger);
        ponger.await.expect("ponger exits");
        figure
    })
}

/// `block_on` calls of a ready future per round.
const BLOCK_ONS: u64 = 10_000;

fn smarm_block_on_ready() -> f64 {
    smarm::run(|| {
        per_op(BLOCK_ONS, || {
            for i in 0..BLOCK_ONS {
                std::hint::black_box(smarm::block_on(async move { i }).expect("in a process"));
            }
        })
    })
}

fn tokio_block_on_ready() -> f64 {
    let rt = tokio::runtime::Builder::new_current_thread().build().expect("tokio runtime");
    per_op(BLOCK_ONS, || {
        for i in 0..BLOCK_ONS {
            std::hint::black_box(rt.block_on(async move { i }));
        }
    })
}

fn main() {
    // `cargo bench` passes criterion's flags (and `--bench`); none applies.
    let rows: Vec<(String, Measurement)> = [
        (
            "allocations/spawn_join/smarm/process",
            smarm_spawn_join as fn() -> f64,
            "per spawn + join, 10,000 warm",
        ),
        ("allocations/spawn_join/tokio/task", tokio_spawn_join, "per spawn + join, 10,000 warm"),
        ("allocations/message/smarm/channel", smarm_message, "per message, same-worker ping-pong, warm"),
        ("allocations/message/tokio/mpsc", tokio_message, "per message, same-worker ping-pong, warm"),
        (
            "allocations/block_on_ready/smarm/in_process",
            smarm_block_on_ready,
            "per block_on of a ready future, warm",
        ),
        (
            "allocations/block_on_ready/tokio/current_thread",
            tokio_block_on_ready,
            "per block_on of a ready future, warm",
        ),
    ]
    .into_iter()
    .map(|(id, measure, note)| {
        let value = measure();
        println!("{id}: {value:.3} allocations ({note})");
        (id.to_string(), Measurement::Value { value, note: note.to_string() })
    })
    .collect();
    match measure::write("allocations", &rows) {
        Ok(path) => println!("wrote {}", path.display()),
        Err(error) => {
            eprintln!("cannot write the allocation counts: {error}");
            std::process::exit(1);
        }
    }
}
