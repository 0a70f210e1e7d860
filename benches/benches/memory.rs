//! Resident memory per parked process: 100,000 processes (tasks,
//! coroutines) each blocked on a receive, and the growth of the resident
//! set divided by 100,000. A measurement, not a timing: it prints its
//! figures and writes them where the summarizer reads them
//! ([`smarm_benches::measure`]); criterion is not involved.
//!
//! Each runtime is measured in a fresh child process, so that one runtime's
//! freed-but-kept memory does not hide another's cost. In each:
//!
//! 1. make the 100,000 channels first, and the vector of join handles, so
//!    that neither counts;
//! 2. read the resident set (`/proc/self/statm`);
//! 3. spawn the 100,000, each bumping a counter and then blocking on its
//!    channel; yield until the counter says all have run up to their
//!    receive (on one worker, FIFO, each parks before the next runs);
//! 4. read the resident set again: (after − before) / 100,000 is the
//!    figure; then release them all and join.
//!
//! - `smarm/process`: [`smarm::run`], one worker, the default
//!   configuration (no `max_processes` cap: the slab grows; 256 KiB stacks,
//!   committed lazily).
//! - `smarm/process_1m`: the same with 1,000,000 parked at once (100,000
//!   under `benches/run.sh --quick`). Its note also gives the resident set
//!   before the spawns, at the peak, after every process has exited and
//!   been joined (the runtime still up: its stack pool and slab segments
//!   kept), and after the runtime is gone.
//! - `tokio/task`: a `current_thread` runtime, unbounded mpsc channels.
//! - `may/coroutine`: a one-worker `may` runtime, `may::sync::mpsc`,
//!   default 32 KiB stacks. On a default Linux (`vm.max_map_count` 65,530)
//!   may cannot map 100,000 guarded stacks; then the failure is recorded
//!   and may is measured again with 20,000, and the note says so.

use std::sync::atomic::{AtomicUsize, Ordering};

use smarm_benches::measure::{self, Measurement};

mod common;

const PARKED: usize = 100_000;
/// The million of `smarm/process_1m`.
const PARKED_1M: usize = 1_000_000;
/// What may is measured with when it cannot hold `PARKED`.
const MAY_FALLBACK: usize = 20_000;

/// Processes that have reached their receive.
static READY: AtomicUsize = AtomicUsize::new(0);

/// Bytes of the resident set of this process.
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm is readable");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|field| field.parse().ok())
        .expect("statm's second field is the resident page count");
    // SAFETY: sysconf only reads a system constant.
    let page_size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * u64::try_from(page_size).expect("a positive page size")
}

fn per_parked(before: u64, after: u64, count: usize) -> f64 {
    after.saturating_sub(before) as f64 / count as f64
}

/// `per_parked before peak exited dropped slab_bytes`: bytes per parked
/// process, then the resident set before the spawns, at the peak, after
/// every process exited and was joined, and after the runtime was dropped;
/// and the address space of the slab's segments.
fn smarm_child(count: usize) -> String {
    let (per_parked, before, peak, exited, slab_bytes) = smarm::run(move || {
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..count).map(|_| smarm::channel::<()>()).unzip();
        let mut handles = Vec::with_capacity(count);
        let before = resident_bytes();
        for receiver in receivers {
            let handle = smarm::spawn(move || {
                READY.fetch_add(1, Ordering::Relaxed);
                let _ = receiver.recv();
            })
            .expect("the slab has room for all");
            handles.push(handle);
        }
        while READY.load(Ordering::Relaxed) < count {
            smarm::yield_now();
        }
        let after = resident_bytes();
        drop(senders);
        for handle in handles {
            handle.join().expect("a parked process exits normally");
        }
        let rt = smarm::current_runtime().expect("inside the runtime");
        (per_parked(before, after, count), before, after, resident_bytes(), rt.slab_bytes())
    });
    let dropped = resident_bytes();
    format!("{per_parked} {before} {peak} {exited} {dropped} {slab_bytes}")
}

fn tokio_child(count: usize) -> f64 {
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("tokio runtime starts");
    runtime.block_on(async move {
        let (senders, receivers): (Vec<_>, Vec<_>) =
            (0..count).map(|_| tokio::sync::mpsc::unbounded_channel::<()>()).unzip();
        let mut handles = Vec::with_capacity(count);
        let before = resident_bytes();
        for mut receiver in receivers {
            handles.push(tokio::spawn(async move {
                READY.fetch_add(1, Ordering::Relaxed);
                let _ = receiver.recv().await;
            }));
        }
        while READY.load(Ordering::Relaxed) < count {
            tokio::task::yield_now().await;
        }
        let after = resident_bytes();
        drop(senders);
        for handle in handles {
            handle.await.expect("a parked task exits normally");
        }
        per_parked(before, after, count)
    })
}

fn may_child(count: usize) -> f64 {
    may::config().set_workers(1);
    common::may_spawn(move || {
        let (senders, receivers): (Vec<_>, Vec<_>) =
            (0..count).map(|_| may::sync::mpsc::channel::<()>()).unzip();
        let mut handles = Vec::with_capacity(count);
        let before = resident_bytes();
        for receiver in receivers {
            handles.push(common::may_spawn(move || {
                READY.fetch_add(1, Ordering::Relaxed);
                let _ = receiver.recv();
            }));
        }
        // may's `yield_now` from this coroutine starves the new ones on a
        // one-worker scheduler; a short sleep lets them all run.
        while READY.load(Ordering::Relaxed) < count {
            may::coroutine::sleep(std::time::Duration::from_millis(1));
        }
        let after = resident_bytes();
        drop(senders);
        for handle in handles {
            handle.join().expect("a parked coroutine exits normally");
        }
        per_parked(before, after, count)
    })
    .join()
    .expect("the root coroutine exits normally")
}

/// The child's side: measure one runtime, print the figure.
fn child(request: &str) {
    let (runtime, count) = request.split_once(':').expect("child request is runtime:count");
    let count: usize = count.parse().expect("child count is a number");
    match runtime {
        "smarm" => println!("{}", smarm_child(count)),
        "tokio" => println!("{}", tokio_child(count)),
        "may" => println!("{}", may_child(count)),
        _ => panic!("unknown runtime {runtime:?}"),
    }
}

/// Runs one runtime's child and turns its output into a measurement: the
/// bytes per parked process, and the rest of what the child printed.
fn measure_in_child(runtime: &str, count: usize) -> Result<(f64, Vec<u64>), String> {
    let output = measure::child_of(&format!("{runtime}:{count}"))?;
    let mut fields = output.split_whitespace();
    let value = fields
        .next()
        .and_then(|first| first.parse().ok())
        .ok_or_else(|| format!("child printed {output:?}, not a number"))?;
    let rest: Result<Vec<u64>, String> =
        fields.map(|field| field.parse().map_err(|_| format!("child printed {output:?}"))).collect();
    Ok((value, rest?))
}

/// The note of a smarm row: the count, and the resident sets the child
/// reported.
fn smarm_note(count: usize, rest: &[u64]) -> String {
    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    match rest {
        [before, peak, exited, dropped, slab] => format!(
            "{count} parked; RSS before {:.0} MiB, peak {:.0} MiB, all exited {:.0} MiB, \
             runtime dropped {:.0} MiB; slab segments {:.0} MiB of address space",
            mib(*before),
            mib(*peak),
            mib(*exited),
            mib(*dropped),
            mib(*slab)
        ),
        _ => format!("{count} parked"),
    }
}

fn main() {
    if let Some(request) = measure::child_request() {
        child(&request);
        return;
    }
    // `cargo bench` passes criterion's flags (and `--bench`); none applies.
    let mut rows = Vec::new();
    let million = if measure::quick() { PARKED } else { PARKED_1M };
    for (runtime, id, count) in [
        ("smarm", "memory_per_parked/smarm/process", PARKED),
        ("smarm", "memory_per_parked/smarm/process_1m", million),
        ("tokio", "memory_per_parked/tokio/task", PARKED),
        ("may", "memory_per_parked/may/coroutine", PARKED),
    ] {
        let measurement = match measure_in_child(runtime, count) {
            Ok((value, rest)) if runtime == "smarm" => {
                Measurement::Value { value, note: smarm_note(count, &rest) }
            }
            Ok((value, _)) => Measurement::Value { value, note: format!("{count} parked") },
            Err(reason) if runtime == "may" => {
                let failed = format!("{PARKED} parked failed ({reason})");
                match measure_in_child(runtime, MAY_FALLBACK) {
                    Ok((value, _)) => {
                        Measurement::Value { value, note: format!("{failed}; {MAY_FALLBACK} parked") }
                    }
                    Err(again) => {
                        Measurement::Failed { reason: format!("{failed}; {MAY_FALLBACK}: {again}") }
                    }
                }
            }
            Err(reason) => Measurement::Failed { reason },
        };
        match &measurement {
            Measurement::Value { value, note } => {
                println!("{id}: {value:.0} resident bytes per parked ({note})")
            }
            Measurement::Failed { reason } => println!("{id}: failed: {reason}"),
        }
        rows.push((id.to_string(), measurement));
    }
    match measure::write("memory", &rows) {
        Ok(path) => println!("wrote {}", path.display()),
        Err(error) => {
            eprintln!("cannot write the memory measurements: {error}");
            std::process::exit(1);
        }
    }
}
