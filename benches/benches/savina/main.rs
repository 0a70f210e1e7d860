//! The Savina actor benchmarks (`smarm_benches::savina` holds their sizes)
//! in five implementations — smarm processes and channels, smarm handler
//! actors, tokio tasks and channels, ractor actors, and the BEAM
//! (`benches/erl/savina.erl`) — on one worker and on two (tokio
//! `current_thread` / `multi_thread(2)`, `erl +S 1` / `+S 2`).
//!
//! Every run checks its result (the counter's total, fib's value, the
//! ring's hops, the meetings, the pongs…) and panics, or makes erl exit
//! non-zero, when the work was not done.
//!
//! This binary is its own harness, not criterion: the BEAM times itself
//! inside one `erl` per worker count, and every implementation is given
//! the same statistic — the median of 3 runs (1 in quick mode), each on a
//! freshly started runtime whose start is not timed. Figures are written
//! as measurements (`savina/<bench>/<N>w/<implementation>`, nanoseconds)
//! for the summariser, and printed as the tables of `benches/README.md`
//! (also written to `bench_results/savina.md` by a full run).
//!
//! Without `erl` the BEAM is recorded as unable to run — except in quick
//! mode, which CI runs with erlang-nox installed, where it is an error.
//!
//! Arguments that are not options (and not numbers) filter the runs: only the ids
//! containing one of them run (`cargo bench -p smarm-benches --bench savina
//! -- 2w/smarm fork_join`), the BEAM only if a filter names it, and nothing
//! is written to the measurement files or `bench_results/`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use smarm_benches::beam::{self, BeamError};
use smarm_benches::measure::{self, Measurement};
use smarm_benches::savina::{group, Bench, Params, BENCHES, IMPLEMENTATIONS, WORKERS};

mod actors;
mod processes;
mod ractor_actors;
mod tokio_tasks;

type Run = fn(Bench, Params, usize) -> Duration;

/// The Rust implementations, by their id's last part.
const RUST: [(&str, Run); 4] = [
    ("smarm/processes", processes::run),
    ("smarm/actors", actors::run),
    ("tokio", tokio_tasks::run),
    ("ractor", ractor_actors::run),
];

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[(times.len() - 1) / 2]
}

/// The BEAM's medians for every bench on `workers` schedulers, keyed by
/// bench name.
fn beam_figures(params: Params, workers: usize, rounds: usize) -> Result<HashMap<String, f64>, BeamError> {
    let list: Vec<String> =
        BENCHES.iter().map(|bench| format!("{{{}, {}}}", bench.name(), params.erlang_args(*bench))).collect();
    let call = format!("savina:main({rounds}, [{}]).", list.join(", "));
    Ok(beam::run("savina", workers, &call, Duration::from_secs(600))?.into_iter().collect())
}

fn main() {
    let quick = measure::quick();
    let params = Params::current();
    let rounds = if quick { 1 } else { 3 };
    let started = Instant::now();
    // Criterion's options (and their numeric values, `--sample-size 10`)
    // reach this binary too when run.sh passes them to every bench: a
    // filter is an argument with a letter in it that is not an option.
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with('-') && arg.chars().any(|c| c.is_ascii_alphabetic()))
        .collect();
    let selected = |id: &str| filters.is_empty() || filters.iter().any(|filter| id.contains(filter.as_str()));
    // Figures by id, nanoseconds; a missing one failed to run.
    let mut figures: HashMap<String, f64> = HashMap::new();
    let mut rows = Vec::new();
    for workers in WORKERS {
        for bench in BENCHES {
            for (implementation, run) in RUST {
                let id = format!("{}/{implementation}", group(bench, workers));
                if !selected(&id) {
                    continue;
                }
                let time = median((0..rounds).map(|_| run(bench, params, workers)).collect());
                println!("{id}: {:.3} ms", time.as_secs_f64() * 1e3);
                figures.insert(id.clone(), time.as_nanos() as f64);
                let note = format!("median of {rounds} runs");
                rows.push((id, Measurement::Value { value: time.as_nanos() as f64, note }));
            }
        }
        if !filters.is_empty()
            && !BENCHES.iter().any(|bench| selected(&format!("{}/beam", group(*bench, workers))))
        {
            continue;
        }
        match beam_figures(params, workers, rounds) {
            Ok(results) => {
                for bench in BENCHES {
                    let id = format!("{}/beam", group(bench, workers));
                    let Some(&nanoseconds) = results.get(bench.name()) else {
                        eprintln!("savina: the BEAM printed no result for {}", bench.name());
                        std::process::exit(1);
                    };
                    println!("{id}: {:.3} ms", nanoseconds / 1e6);
                    figures.insert(id.clone(), nanoseconds);
                    let note = format!("median of {rounds} runs, erl +S {workers}");
                    rows.push((id, Measurement::Value { value: nanoseconds, note }));
                }
            }
            Err(BeamError::Missing(what)) if !quick => {
                let reason = format!("{what} not found (Debian: erlang-nox); the BEAM was skipped");
                eprintln!("savina: {reason}");
                for bench in BENCHES {
                    let failed = Measurement::Failed { reason: reason.clone() };
                    rows.push((format!("{}/beam", group(bench, workers)), failed));
                }
            }
            Err(error) => {
                eprintln!("savina: the BEAM failed: {error}");
                std::process::exit(1);
            }
        }
    }
    if !filters.is_empty() {
        return;
    }
    if let Err(error) = measure::write("savina", &rows) {
        eprintln!("cannot write the Savina measurements: {error}");
        std::process::exit(1);
    }
    let tables = tables(&figures, rounds);
    println!("\n{tables}");
    println!(
        "savina: {} implementations x {} benches x {} worker counts in {:.1} s",
        IMPLEMENTATIONS.len(),
        BENCHES.len(),
        WORKERS.len(),
        started.elapsed().as_secs_f64()
    );
    if !quick {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench_results/savina.md");
        if let Err(error) = std::fs::write(&path, &tables) {
            eprintln!("cannot write {}: {error}", path.display());
            std::process::exit(1);
        }
    }
}

/// The README's tables: one worker in milliseconds; two workers as ratios
/// to tokio `multi_thread(2)` (below 1: faster than tokio).
fn tables(figures: &HashMap<String, f64>, rounds: usize) -> String {
    let figure = |bench: Bench, workers: usize, implementation: &str| {
        figures.get(&format!("{}/{implementation}", group(bench, workers))).copied()
    };
    let mut text = format!(
        "One worker, milliseconds (median of {rounds}):\n\n\
         | bench | smarm processes | smarm actors | tokio current_thread | ractor | BEAM +S 1 |\n\
         |---|---:|---:|---:|---:|---:|\n"
    );
    for bench in BENCHES {
        let _ = write!(text, "| {} |", bench.name());
        for implementation in IMPLEMENTATIONS {
            match figure(bench, 1, implementation) {
                Some(nanoseconds) => {
                    let _ = write!(text, " {:.1} |", nanoseconds / 1e6);
                }
                None => text.push_str(" — |"),
            }
        }
        text.push('\n');
    }
    let _ = write!(
        text,
        "\nTwo workers, time / tokio multi_thread(2)'s (tokio's in milliseconds):\n\n\
         | bench | tokio mt(2), ms | smarm processes | smarm actors | ractor | BEAM +S 2 |\n\
         |---|---:|---:|---:|---:|---:|\n"
    );
    for bench in BENCHES {
        let Some(tokio) = figure(bench, 2, "tokio") else { continue };
        let _ = write!(text, "| {} | {:.1} |", bench.name(), tokio / 1e6);
        for implementation in ["smarm/processes", "smarm/actors", "ractor", "beam"] {
            match figure(bench, 2, implementation) {
                Some(nanoseconds) => {
                    let _ = write!(text, " {:.2} |", nanoseconds / tokio);
                }
                None => text.push_str(" — |"),
            }
        }
        text.push('\n');
    }
    text
}
