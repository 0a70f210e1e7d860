//! The BEAM beside smarm's core benches: the same workloads written in
//! Erlang (`benches/erl/peers.erl`), run under `erl -noshell` and timed by
//! Erlang itself.
//!
//! Each figure lands in the summary under the group of the Rust bench it
//! stands beside, in that bench's unit (one criterion iteration = one
//! round here):
//!
//! - `yield_ping/beam/yield`: two processes calling `erlang:yield/0`
//!   50,000 times each, `+S 1`;
//! - `spawn_join_10k/beam/spawn_monitor`: 10,000 `spawn_monitor`s, then
//!   each `'DOWN'` received, `+S 1`;
//! - `ping_pong_same_worker/beam/send_receive`: 100,000 round trips
//!   between two processes, `+S 1`;
//! - `ping_pong_two_workers/beam/bound_schedulers`: 10,000 round trips,
//!   `+S 2`, the two processes bound to schedulers 1 and 2
//!   (`spawn_opt(…, [{scheduler, N}])`);
//! - `skynet_1m/beam/processes`: the 10-ary tree of 1,000,000 leaves
//!   (10,000 in quick mode), `+S 1`;
//! - `memory_per_parked/beam/process_1m`: resident bytes per process
//!   parked in `receive`, 1,000,000 of them (100,000 in quick mode): the
//!   RSS delta on a BEAM that has run nothing else, with
//!   `erlang:memory(processes)` printed beside it.
//!
//! Timings are the median of 5 rounds (1 in quick mode). Criterion does
//! not host them: the BEAM runs its own loop, and this binary writes the
//! figures as measurements (`smarm_benches::measure`), which the
//! summariser reads beside criterion's estimates.
//!
//! Without `erl` the peer is recorded as unable to run (a row saying so in
//! the summary) — except in quick mode, which CI runs with erlang-nox
//! installed, where it is an error. A failed check or a time-out in Erlang
//! is always an error.

use std::time::Duration;

use smarm_benches::beam::{self, erlang_string, BeamError};
use smarm_benches::measure::{self, Measurement};

/// One figure: its summary id, the `peers` bench and its arguments.
struct Figure {
    id: &'static str,
    bench: &'static str,
    args: String,
}

fn figure(id: &'static str, bench: &'static str, args: String) -> Figure {
    Figure { id, bench, args }
}

fn main() {
    let quick = measure::quick();
    let rounds = if quick { 1 } else { 5 };
    let (leaves, parked) = if quick { (10_000, 100_000) } else { (1_000_000, 1_000_000) };
    let runs = [
        (
            1,
            vec![
                figure("yield_ping/beam/yield", "yield", "[50000]".into()),
                figure("spawn_join_10k/beam/spawn_monitor", "spawn_join", "[10000]".into()),
                figure("ping_pong_same_worker/beam/send_receive", "ping_pong", "[100000, free]".into()),
                figure("skynet_1m/beam/processes", "skynet", format!("[{leaves}]")),
            ],
        ),
        // On a fresh BEAM: what earlier figures allocated would be reused.
        (1, vec![figure("memory_per_parked/beam/process_1m", "memory", format!("[{parked}]"))]),
        (
            2,
            vec![figure("ping_pong_two_workers/beam/bound_schedulers", "ping_pong", "[10000, bound]".into())],
        ),
    ];
    let mut rows = Vec::new();
    for (schedulers, figures) in &runs {
        let list: Vec<String> = figures
            .iter()
            .map(|figure| format!("{{{}, {}, {}}}", erlang_string(figure.id), figure.bench, figure.args))
            .collect();
        let call = format!("peers:main({rounds}, [{}]).", list.join(", "));
        let results =
            match beam::run("peers", *schedulers, &call, Duration::from_secs(600)) {
                Ok(results) => results,
                Err(BeamError::Missing(what)) if !quick => {
                    let reason = format!("{what} not found (Debian: erlang-nox); the BEAM was skipped");
                    eprintln!("beam: {reason}");
                    rows.extend(figures.iter().map(|figure| {
                        (figure.id.to_string(), Measurement::Failed { reason: reason.clone() })
                    }));
                    continue;
                }
                Err(error) => {
                    eprintln!("beam: {error}");
                    std::process::exit(1);
                }
            };
        for figure in figures {
            let Some((_, value)) = results.iter().find(|(id, _)| id == figure.id) else {
                eprintln!("beam: peers printed no result for {}", figure.id);
                std::process::exit(1);
            };
            let note = if figure.bench == "memory" {
                format!("RSS delta per parked process, +S {schedulers}")
            } else {
                format!("median of {rounds} rounds, +S {schedulers}")
            };
            println!("{}: {value:.0} ({note})", figure.id);
            rows.push((figure.id.to_string(), Measurement::Value { value: *value, note }));
        }
    }
    match measure::write("beam", &rows) {
        Ok(path) => println!("wrote {}", path.display()),
        Err(error) => {
            eprintln!("cannot write the BEAM's measurements: {error}");
            std::process::exit(1);
        }
    }
}
