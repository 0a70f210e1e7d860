//! Turns criterion's output, and the measurements benches write beside it
//! ([`smarm_benches::measure`]), into `bench_results/summary.csv`: one row
//! per smarm figure and peer, with the ratio smarm / peer and the goal for
//! it. With `--chart`, also draws the ratios as a PNG bar chart.
//!
//! Usage: `summarize --criterion-dir DIR --out FILE [--measurements-dir DIR]
//! [--chart PNG] [--since UNIX_SECONDS]`
//!
//! `benches/run.sh` calls this after `cargo bench`. With `--since`, a figure
//! written before that time is an error, so a bench that silently stopped
//! running cannot hide behind the numbers of an older run. A peer that
//! could not run at all (recorded as failed in the measurements) gives a
//! row saying so instead of a ratio.
#![deny(unsafe_code)]

use std::fs;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use clap::Parser;
use smarm_benches::measure::{self, Measurement};
use smarm_benches::plot::{self, Bar};
use smarm_benches::savina;
use smarm_benches::{csv_field, machine_description, read_estimates};

/// A smarm figure set beside a peer's. Both are criterion function ids in
/// `group`; the ratio is smarm / peer, so lower is better and `goal` is the
/// largest ratio we accept.
struct Comparison {
    group: &'static str,
    smarm: &'static str,
    peer: &'static str,
    goal: f64,
}

/// Every comparison the summary reports. Adding a benchmark to the summary is
/// one line here.
const COMPARISONS: &[Comparison] = &[
    // A raw context-switch round trip against corosensei's resume + suspend:
    // the scheduler's pair (what the core uses), then the symmetric switch.
    Comparison {
        group: "switch_round_trip",
        smarm: "smarm/arch_resume_suspend",
        peer: "corosensei/resume_suspend",
        goal: 1.2,
    },
    Comparison {
        group: "switch_round_trip",
        smarm: "smarm/arch_switch",
        peer: "corosensei/resume_suspend",
        goal: 1.2,
    },
    // A process as cheap as a task (benches/benches/*.rs say what each side
    // runs).
    Comparison { group: "yield_ping", smarm: "smarm/yield_now", peer: "may/yield_now", goal: 0.5 },
    Comparison { group: "yield_ping", smarm: "smarm/yield_now", peer: "tokio/yield_now", goal: 0.25 },
    Comparison { group: "spawn_join_10k", smarm: "smarm/spawn_join", peer: "tokio/spawn_await", goal: 1.0 },
    Comparison { group: "spawn_join_10k", smarm: "smarm/spawn_join", peer: "may/spawn_join", goal: 0.3 },
    Comparison {
        group: "spawn_join_10k",
        smarm: "smarm/spawn_join",
        peer: "std_thread/spawn_join",
        goal: REPORT,
    },
    Comparison { group: "ping_pong_same_worker", smarm: "smarm/channel", peer: "tokio/mpsc", goal: 0.5 },
    Comparison { group: "ping_pong_same_worker", smarm: "smarm/channel", peer: "may/mpsc", goal: 0.5 },
    Comparison {
        group: "ping_pong_two_workers",
        smarm: "smarm/engine_channel",
        peer: "tokio/multi_thread_mpsc",
        goal: 2.0,
    },
    Comparison {
        group: "ping_pong_two_workers",
        smarm: "smarm/engine_channel",
        peer: "crossbeam/threads",
        goal: 0.5,
    },
    Comparison { group: "thread_ring", smarm: "smarm/workers_1", peer: "tokio/multi_thread_2", goal: REPORT },
    Comparison { group: "thread_ring", smarm: "smarm/workers_2", peer: "tokio/multi_thread_2", goal: 2.0 },
    Comparison { group: "thread_ring", smarm: "smarm/workers_2", peer: "tokio/current_thread", goal: REPORT },
    // No collapse when workers outnumber the CPUs: against smarm's own
    // two-worker figure of the same run.
    Comparison { group: "thread_ring", smarm: "smarm/workers_4", peer: "smarm/workers_2", goal: 2.0 },
    Comparison { group: "thread_ring", smarm: "smarm/workers_8", peer: "smarm/workers_2", goal: 2.0 },
    // At most 1.5 times tokio (the aim: at most 1).
    Comparison { group: "skynet_1m", smarm: "smarm/processes_channels", peer: "tokio/tasks_mpsc", goal: 1.5 },
    Comparison {
        group: "skynet_1m",
        smarm: "smarm/processes_channels",
        peer: "may/coroutines_mpsc",
        goal: 1.0,
    },
    // A plain thread waiting on smarm channels, against two threads on
    // std's; block_on of a ready future against tokio's.
    Comparison {
        group: "thread_ping_pong",
        smarm: "smarm/thread_process",
        peer: "std/mpsc_thread_thread",
        goal: 1.2,
    },
    Comparison {
        group: "block_on_ready",
        smarm: "smarm/in_process",
        peer: "tokio/current_thread",
        goal: 1.0,
    },
    // The Erlang distribution protocol against the BEAM's own (benches/dist.rs).
    Comparison { group: "dist_round_trip", smarm: "smarm/to_beam", peer: "beam/to_beam", goal: 1.0 },
    Comparison { group: "dist_round_trip", smarm: "smarm/to_smarm", peer: "beam/to_beam", goal: 0.5 },
    // Time per one-way message: at most the BEAM's is at least its rate.
    Comparison { group: "dist_one_way", smarm: "smarm/to_beam", peer: "beam/to_beam", goal: 1.0 },
    // The BEAM on the same workloads (benches/benches/beam.rs; Erlang times
    // itself, a measurement rather than a criterion estimate), reported.
    Comparison { group: "yield_ping", smarm: "smarm/yield_now", peer: "beam/yield", goal: REPORT },
    Comparison {
        group: "spawn_join_10k",
        smarm: "smarm/spawn_join",
        peer: "beam/spawn_monitor",
        goal: REPORT,
    },
    Comparison {
        group: "ping_pong_same_worker",
        smarm: "smarm/channel",
        peer: "beam/send_receive",
        goal: REPORT,
    },
    Comparison {
        group: "ping_pong_two_workers",
        smarm: "smarm/engine_channel",
        peer: "beam/bound_schedulers",
        goal: REPORT,
    },
    Comparison {
        group: "skynet_1m",
        smarm: "smarm/processes_channels",
        peer: "beam/processes",
        goal: REPORT,
    },
    // Each wake ring against the default (mpmc), reported.
    Comparison { group: "rq_micro/pairs/1t", smarm: "mutex", peer: "mpmc", goal: REPORT },
    Comparison { group: "rq_micro/pairs/1t", smarm: "striped", peer: "mpmc", goal: REPORT },
    Comparison { group: "rq_micro/pairs/2t", smarm: "mutex", peer: "mpmc", goal: REPORT },
    Comparison { group: "rq_micro/pairs/2t", smarm: "striped", peer: "mpmc", goal: REPORT },
    Comparison { group: "rq_micro/pairs/4t", smarm: "mutex", peer: "mpmc", goal: REPORT },
    Comparison { group: "rq_micro/pairs/4t", smarm: "striped", peer: "mpmc", goal: REPORT },
    Comparison { group: "rq_micro/mpsc/2t", smarm: "mutex", peer: "mpmc", goal: REPORT },
    Comparison { group: "rq_micro/mpsc/2t", smarm: "striped", peer: "mpmc", goal: REPORT },
    Comparison { group: "rq_micro/mpsc/4t", smarm: "mutex", peer: "mpmc", goal: REPORT },
    Comparison { group: "rq_micro/mpsc/4t", smarm: "striped", peer: "mpmc", goal: REPORT },
];

/// The goal of a row that is reported, not judged.
const REPORT: f64 = f64::INFINITY;

/// Comparisons whose figures exist only if a build with another feature set
/// ran: `rq_runtime` once per `rq-*` feature. A missing figure here is
/// reported and skipped, not an error (a feature that does not select its
/// ring makes no results under that ring's name).
const PER_FEATURE: &[Comparison] = &[
    Comparison { group: "rq_runtime/yield_storm", smarm: "mutex", peer: "mpmc", goal: REPORT },
    Comparison { group: "rq_runtime/yield_storm", smarm: "striped", peer: "mpmc", goal: REPORT },
    Comparison { group: "rq_runtime/ping_pong_pairs", smarm: "mutex", peer: "mpmc", goal: REPORT },
    Comparison { group: "rq_runtime/ping_pong_pairs", smarm: "striped", peer: "mpmc", goal: REPORT },
    Comparison { group: "rq_runtime/spawn_storm", smarm: "mutex", peer: "mpmc", goal: REPORT },
    Comparison { group: "rq_runtime/spawn_storm", smarm: "striped", peer: "mpmc", goal: REPORT },
];

/// The Savina suite (benches/benches/savina): per bench and worker count,
/// smarm's processes and actors against tokio, processes against the BEAM,
/// actors against ractor's; all reported. Its figures are measurements
/// (median of rounds, nanoseconds per run).
fn savina_comparisons() -> Vec<(String, &'static str, &'static str)> {
    let pairs = [
        ("smarm/processes", "tokio"),
        ("smarm/actors", "tokio"),
        ("smarm/processes", "beam"),
        ("smarm/actors", "ractor"),
    ];
    let mut comparisons = Vec::new();
    for bench in savina::BENCHES {
        for workers in savina::WORKERS {
            for (smarm, peer) in pairs {
                comparisons.push((savina::group(bench, workers), smarm, peer));
            }
        }
    }
    comparisons
}

/// A comparison of measurements (not timings), with a goal on smarm's own
/// figure rather than on the ratio.
struct Measured {
    group: &'static str,
    smarm: &'static str,
    peer: &'static str,
    unit: &'static str,
    /// The largest smarm figure accepted, in `unit`.
    smarm_at_most: f64,
}

const MEASURED: &[Measured] = &[
    // Resident bytes per parked process, 100,000 parked: at most 4.5 KiB
    // (one page of stack and the slot).
    Measured {
        group: "memory_per_parked",
        smarm: "smarm/process",
        peer: "tokio/task",
        unit: "bytes",
        smarm_at_most: 4608.0,
    },
    Measured {
        group: "memory_per_parked",
        smarm: "smarm/process",
        peer: "may/coroutine",
        unit: "bytes",
        smarm_at_most: 4608.0,
    },
    // A million parked on the default configuration (100,000 in quick
    // mode): at most 4.5 KiB each, the goal for a million processes.
    Measured {
        group: "memory_per_parked",
        smarm: "smarm/process_1m",
        peer: "tokio/task",
        unit: "bytes",
        smarm_at_most: 4608.0,
    },
    Measured {
        group: "memory_per_parked",
        smarm: "smarm/process_1m",
        peer: "beam/process_1m",
        unit: "bytes",
        smarm_at_most: 4608.0,
    },
    // Heap allocations per spawn + join (warm): the process's closure, and
    // a box for its return value unless that is zero-sized (and a little
    // over two: the round's own vectors grow once).
    Measured {
        group: "allocations/spawn_join",
        smarm: "smarm/process",
        peer: "tokio/task",
        unit: "allocations",
        smarm_at_most: 2.05,
    },
];

const HEADER: &str = "bench,smarm,peer,peer_figure,unit,ratio,goal,verdict,machine";

/// Turns criterion's output and the benches' measurements into the summary
/// CSV (and, with `--chart`, a bar chart of the ratios).
#[derive(Parser)]
#[command(name = "summarize")]
struct Options {
    /// Criterion's output directory (normally `target/criterion`).
    #[arg(long, value_name = "DIR")]
    criterion_dir: PathBuf,
    /// Where the benches wrote their measurements (default: where
    /// `smarm_benches::measure` puts them).
    #[arg(long, value_name = "DIR")]
    measurements_dir: Option<PathBuf>,
    /// The CSV file to write.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Also draw the ratios as a PNG bar chart here.
    #[arg(long, value_name = "PNG")]
    chart: Option<PathBuf>,
    /// Fail on any figure written before this time (whole Unix seconds).
    #[arg(long, value_name = "UNIX_SECONDS", value_parser = parse_since)]
    since: Option<SystemTime>,
}

fn parse_since(text: &str) -> Result<SystemTime, String> {
    let seconds: u64 = text.parse().map_err(|_| format!("whole Unix seconds, not {text:?}"))?;
    Ok(SystemTime::UNIX_EPOCH + Duration::from_secs(seconds))
}

fn main() -> ExitCode {
    let options = Options::parse();
    match run(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("summarize: {message}");
            ExitCode::FAILURE
        }
    }
}

/// A figure, or why the runtime could not produce one.
enum Figure {
    Value(f64),
    Failed(String),
}

/// One line of the summary.
struct Row {
    bench: String,
    smarm: f64,
    peer: String,
    peer_figure: Figure,
    unit: &'static str,
    /// The goal as written in the CSV (`<=1.00`, `<=8192 bytes`, `report`).
    goal: String,
    /// The largest ratio accepted, for the chart and the verdict.
    ratio_goal: Option<f64>,
}

impl Row {
    fn ratio(&self) -> Option<f64> {
        match self.peer_figure {
            Figure::Value(peer) => Some(self.smarm / peer),
            Figure::Failed(_) => None,
        }
    }

    fn verdict(&self) -> String {
        match (&self.peer_figure, self.ratio(), self.ratio_goal) {
            (Figure::Failed(reason), _, _) => format!("peer failed: {reason}"),
            (_, Some(ratio), Some(goal)) if ratio <= goal => "met".to_string(),
            (_, Some(_), Some(_)) => "MISSED".to_string(),
            _ => "report".to_string(),
        }
    }
}

fn run(options: &Options) -> Result<(), String> {
    let estimates = read_estimates(&options.criterion_dir).map_err(|error| error.to_string())?;
    let measurements_dir = options.measurements_dir.clone().unwrap_or_else(measure::directory);
    let measurements = measure::read_all(&measurements_dir)?;
    let machine = machine_description();
    let mut problems = Vec::new();
    let is_stale = |written: SystemTime| options.since.is_some_and(|since| written < since);
    // Criterion's estimate for `id`, else a measurement (a timing taken
    // outside criterion, or a recorded failure); `None` (and a problem,
    // when `required`) if neither is there and current.
    let mut lookup = |group: &str, function: &str, required: bool| -> Option<Figure> {
        let id = format!("{group}/{function}");
        if let Some(estimate) = estimates.get(&id).filter(|estimate| !is_stale(estimate.written)) {
            return Some(Figure::Value(estimate.nanoseconds));
        }
        match measurements.get(&id) {
            Some((Measurement::Value { value, .. }, written)) if !is_stale(*written) => {
                return Some(Figure::Value(*value));
            }
            Some((Measurement::Failed { reason }, written)) if !is_stale(*written) => {
                return Some(Figure::Failed(reason.clone()));
            }
            _ => {}
        }
        if !required {
            println!("skipped: no current result for {id} (its build did not run)");
        } else if estimates.contains_key(&id) || measurements.contains_key(&id) {
            problems.push(format!("the result for {id} is from an earlier run; did that bench run?"));
        } else {
            problems.push(format!("no result for {id} under {}", options.criterion_dir.display()));
        }
        None
    };

    let mut rows = Vec::new();
    let timed = COMPARISONS.iter().map(|comparison| (comparison, true));
    let timed = timed
        .chain(PER_FEATURE.iter().map(|comparison| (comparison, false)))
        .map(|(comparison, required)| {
            let Comparison { group, smarm, peer, goal } = comparison;
            (group.to_string(), *smarm, *peer, *goal, required)
        })
        .chain(
            savina_comparisons().into_iter().map(|(group, smarm, peer)| (group, smarm, peer, REPORT, true)),
        );
    for (group, smarm, peer, goal, required) in timed {
        let smarm_figure = lookup(&group, smarm, required);
        let peer_figure = lookup(&group, peer, required);
        let (Some(smarm_figure), Some(peer_figure)) = (smarm_figure, peer_figure) else { continue };
        // smarm's own side never has a failure recorded; a value it is.
        let Figure::Value(smarm_figure) = smarm_figure else { continue };
        let reported = goal.is_infinite();
        rows.push(Row {
            bench: format!("{group}/{smarm}"),
            smarm: smarm_figure,
            peer: peer.to_string(),
            peer_figure,
            unit: "ns",
            goal: if reported { "report".to_string() } else { format!("<={goal:.2}") },
            ratio_goal: (!reported).then_some(goal),
        });
    }
    for measured in MEASURED {
        let mut figure = |function: &str| {
            let id = format!("{}/{function}", measured.group);
            match measurements.get(&id) {
                Some((_, written)) if is_stale(*written) => {
                    problems
                        .push(format!("the measurement {id} is from an earlier run; did that bench run?"));
                    None
                }
                Some((Measurement::Value { value, .. }, _)) => Some(Figure::Value(*value)),
                Some((Measurement::Failed { reason }, _)) => Some(Figure::Failed(reason.clone())),
                None => {
                    problems.push(format!("no measurement {id} under {}", measurements_dir.display()));
                    None
                }
            }
        };
        let (Some(Figure::Value(smarm)), Some(peer_figure)) = (figure(measured.smarm), figure(measured.peer))
        else {
            continue;
        };
        // The goal is on smarm's figure; as a ratio it is goal / peer.
        let ratio_goal = match peer_figure {
            Figure::Value(peer) => Some(measured.smarm_at_most / peer),
            Figure::Failed(_) => None,
        };
        rows.push(Row {
            bench: format!("{}/{}", measured.group, measured.smarm),
            smarm,
            peer: measured.peer.to_string(),
            peer_figure,
            unit: measured.unit,
            goal: format!("<={} {} (smarm)", measured.smarm_at_most, measured.unit),
            ratio_goal,
        });
    }

    let mut csv = format!("{HEADER}\n");
    println!(
        "{:<44} {:>14} {:<26} {:>14} {:>8} {:>14} verdict",
        "bench", "smarm", "peer", "peer", "ratio", "goal"
    );
    for row in &rows {
        let (peer_text, ratio_text) = match (&row.peer_figure, row.ratio()) {
            (Figure::Value(peer), Some(ratio)) => (format!("{peer:.3}"), format!("{ratio:.4}")),
            _ => (String::new(), String::new()),
        };
        let verdict = row.verdict();
        println!(
            "{:<44} {:>14.1} {:<26} {:>14} {:>8} {:>14} {verdict}",
            row.bench,
            row.smarm,
            row.peer,
            peer_text.split('.').next().unwrap_or(""),
            ratio_text.get(..ratio_text.len().min(6)).unwrap_or(""),
            row.goal,
        );
        csv.push_str(&format!(
            "{},{:.3},{},{peer_text},{},{ratio_text},{},{},{}\n",
            csv_field(&row.bench),
            row.smarm,
            csv_field(&row.peer),
            row.unit,
            csv_field(&row.goal),
            csv_field(&verdict),
            csv_field(&machine)
        ));
    }
    println!("machine: {machine}");

    if !problems.is_empty() {
        return Err(format!("{} not written:\n  {}", options.out.display(), problems.join("\n  ")));
    }
    write_file(&options.out, |path| {
        fs::write(path, csv).map_err(|error| format!("cannot write {}: {error}", path.display()))
    })?;
    if let Some(chart) = &options.chart {
        // The Savina rows (64 of them) have their own tables in
        // benches/README.md; the chart keeps to the core benches.
        let bars: Vec<Bar> = rows
            .iter()
            .filter(|row| !row.bench.starts_with("savina/"))
            .filter_map(|row| {
                let ratio = row.ratio()?;
                // `group/smarm/function` for peers, `rq_*/…/ring` for rings.
                let (group, smarm) = match row.bench.split_once("/smarm/") {
                    Some((group, function)) => (group.to_string(), format!("smarm/{function}")),
                    None => match row.bench.rsplit_once('/') {
                        Some((group, ring)) => (group.to_string(), ring.to_string()),
                        None => (row.bench.clone(), String::new()),
                    },
                };
                let label = format!("{group}: {smarm} vs {}", row.peer);
                Some(Bar { label, ratio, goal: row.ratio_goal })
            })
            .collect();
        let title = format!("smarm vs peers, {} - {machine}", today());
        write_file(chart, |path| plot::draw(path, &title, &bars))?;
    }
    Ok(())
}

/// Creates `path`'s directory, then writes it with `write`.
fn write_file(
    path: &std::path::Path,
    write: impl FnOnce(&std::path::Path) -> Result<(), String>,
) -> Result<(), String> {
    if let Some(parent) = path.parent().filter(|parent| !parent.as_os_str().is_empty()) {
        fs::create_dir_all(parent).map_err(|error| format!("cannot create {}: {error}", parent.display()))?;
    }
    write(path)?;
    println!("wrote {}", path.display());
    Ok(())
}

/// Today's UTC date as YYYY-MM-DD, from the system clock.
fn today() -> String {
    let seconds = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |since| since.as_secs());
    let (year, month, day) = civil_date((seconds / 86_400) as i64);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The proleptic Gregorian date `days` days after 1970-01-01, counting in
/// 400-year eras of 146,097 days that start on March 1st (so the leap day
/// ends a year).
fn civil_date(days: i64) -> (i64, u32, u32) {
    let shifted = days + 719_468; // days from 0000-03-01 to 1970-01-01
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u32;
    let month = if month_from_march < 10 { month_from_march + 3 } else { month_from_march - 9 } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_savina_bench_and_worker_count_has_its_four_rows() {
        let comparisons = savina_comparisons();
        assert_eq!(comparisons.len(), savina::BENCHES.len() * savina::WORKERS.len() * 4);
        assert!(comparisons.contains(&("savina/fib/2w".to_string(), "smarm/actors", "ractor")));
        assert!(comparisons.contains(&("savina/big/1w".to_string(), "smarm/processes", "beam")));
        for (_, smarm, peer) in &comparisons {
            assert!(savina::IMPLEMENTATIONS.contains(smarm) && savina::IMPLEMENTATIONS.contains(peer));
        }
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_date(0), (1970, 1, 1));
        assert_eq!(civil_date(59), (1970, 3, 1));
        assert_eq!(civil_date(11_016), (2000, 2, 29));
        assert_eq!(civil_date(19_723), (2024, 1, 1));
    }
}
