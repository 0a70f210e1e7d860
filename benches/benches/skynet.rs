//! Skynet: a tree of processes, ten children per node, six levels deep —
//! 1,000,000 leaves and 1,111,111 processes in all. Leaf `n` sends `n` to
//! its parent; every inner node spawns its ten children, adds up the ten
//! numbers they send and sends the sum on. The root checks the total
//! (0 + 1 + … + 999,999).
//!
//! - `smarm/processes_channels`: processes and unbounded [`smarm::channel`]s
//!   under [`smarm::run_with`] — one worker, no `max_processes` cap (the
//!   default) and 16 KiB stacks (see [`smarm_config`]);
//! - `tokio/tasks_mpsc`: tasks and unbounded `tokio::sync::mpsc` channels on
//!   a `current_thread` runtime;
//! - `may/coroutines_mpsc`: coroutines and `may::sync::mpsc` channels on a
//!   one-worker `may` runtime.
//!
//! All three run on one worker thread. Scheduling is FIFO in all three, so
//! the tree is built level by level and at its peak nearly every process is
//! alive at once: the live set is the whole tree.
//!
//! `may` maps every coroutine stack with its own guard page (two mappings),
//! so on a default Linux (`vm.max_map_count` 65,530) it cannot hold more
//! than about 32,000 coroutines. It is tried once in a child process first;
//! if that fails, the reason is written to the measurements file the
//! summarizer reads, and the may bench is skipped.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion};
use smarm_benches::measure::{self, Measurement};

mod common;

const LEAVES: u64 = 1_000_000;
/// Leaves in quick mode, which only checks that the bench runs: a tree of
/// 11,111 processes instead of a minute of CI time.
const QUICK_LEAVES: u64 = 10_000;
const FAN_OUT: u64 = 10;

/// Leaves in this run.
fn leaves() -> u64 {
    if measure::quick() {
        QUICK_LEAVES
    } else {
        LEAVES
    }
}

/// 0 + 1 + … + (leaves - 1).
fn total(leaves: u64) -> u64 {
    leaves * (leaves - 1) / 2
}
/// Every process of the tree: 1 + 10 + … + 10^6.
const TREE_PROCESSES: usize = 1_111_111;

/// The smarm configuration for the tree: the default (no `max_processes`
/// cap: the slab grows to hold the whole tree at once), and stacks at the
/// hosted minimum of
/// 64 KiB (a node needs well under 4 KiB; the floor is what a panic with a
/// backtrace needs), so that address space stays at about 73 GB reserved
/// for 1.1 M stacks, committed only where touched.
fn smarm_config() -> smarm::Config {
    smarm::Config { stack_size: smarm::MIN_STACK_SIZE, ..smarm::Config::default() }
}

const _: () = assert!(TREE_PROCESSES < 1_200_000);

fn smarm_node(first: u64, leaves: u64, parent: smarm::Sender<u64>) {
    if leaves == 1 {
        // The parent outlives its children: it waits for all ten.
        let _ = parent.send(first);
        return;
    }
    let (to_me, inbox) = smarm::channel();
    let share = leaves / FAN_OUT;
    for child in 0..FAN_OUT {
        let to_me = to_me.clone();
        smarm::spawn(move || smarm_node(first + child * share, share, to_me))
            .expect("the slab holds the tree");
    }
    drop(to_me);
    let sum: u64 = (0..FAN_OUT).map(|_| inbox.recv().expect("every child reports")).sum();
    let _ = parent.send(sum);
}

fn smarm_skynet(iterations: u64) -> Duration {
    let leaves = leaves();
    smarm::run_with(smarm_config(), move || {
        let start = Instant::now();
        for _ in 0..iterations {
            let (to_root, result) = smarm::channel();
            smarm::spawn(move || smarm_node(0, black_box(leaves), to_root)).expect("spawn the tree");
            assert_eq!(result.recv().expect("the tree reports"), total(leaves));
        }
        start.elapsed()
    })
}

fn tokio_skynet(runtime: &tokio::runtime::Runtime, iterations: u64) -> Duration {
    common::tokio_skynet(runtime, iterations, leaves())
}

fn may_node(first: u64, leaves: u64, parent: may::sync::mpsc::Sender<u64>) {
    if leaves == 1 {
        let _ = parent.send(first);
        return;
    }
    let (to_me, inbox) = may::sync::mpsc::channel();
    let share = leaves / FAN_OUT;
    for child in 0..FAN_OUT {
        let to_me = to_me.clone();
        drop(common::may_spawn(move || may_node(first + child * share, share, to_me)));
    }
    drop(to_me);
    let sum: u64 = (0..FAN_OUT).map(|_| inbox.recv().expect("every child reports")).sum();
    let _ = parent.send(sum);
}

fn may_skynet(iterations: u64) -> Duration {
    let leaves = leaves();
    let start = Instant::now();
    for _ in 0..iterations {
        let (to_root, result) = may::sync::mpsc::channel();
        drop(common::may_spawn(move || may_node(0, black_box(leaves), to_root)));
        assert_eq!(result.recv().expect("the tree reports"), total(leaves));
    }
    start.elapsed()
}

/// Name of the child process that tries may's tree once.
const MAY_PROBE: &str = "skynet-may";

fn skynet(criterion: &mut Criterion) {
    let mut group = criterion.benchmark_group("skynet_1m");
    // An iteration takes seconds: criterion's minimum of 10 flat samples.
    common::long_iterations(&mut group, 10, Duration::from_secs(20));
    group.bench_function("smarm/processes_channels", |bencher| bencher.iter_custom(smarm_skynet));

    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("tokio runtime starts");
    group.bench_function("tokio/tasks_mpsc", |bencher| {
        bencher.iter_custom(|iterations| tokio_skynet(&runtime, iterations))
    });

    let may_id = "skynet_1m/may/coroutines_mpsc";
    match measure::child_of(MAY_PROBE) {
        Ok(_) => {
            // may's configuration is global and read when its scheduler
            // first starts: one worker, as for the others.
            may::config().set_workers(1);
            group.bench_function("may/coroutines_mpsc", |bencher| bencher.iter_custom(may_skynet));
            record("skynet", may_id, None);
        }
        Err(reason) => {
            println!("{may_id}: skipped, may could not build the tree: {reason}");
            record("skynet", may_id, Some(reason));
        }
    }
    group.finish();
}

/// Writes whether the may tree could run, for the summarizer.
fn record(file: &str, id: &str, failure: Option<String>) {
    let rows: Vec<(String, Measurement)> =
        failure.map(|reason| (id.to_string(), Measurement::Failed { reason })).into_iter().collect();
    if let Err(error) = measure::write(file, &rows) {
        eprintln!("cannot write the {file} measurements: {error}");
    }
}

fn main() {
    if measure::child_request().as_deref() == Some(MAY_PROBE) {
        may::config().set_workers(1);
        may_skynet(1);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}

criterion_group!(benches, skynet);
