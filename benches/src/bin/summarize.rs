//! Turns criterion's output into `bench_results/summary.csv`: one row per
//! smarm figure and peer, with the ratio smarm / peer and the goal for it.
//!
//! Usage: `summarize --criterion-dir DIR --out FILE [--since UNIX_SECONDS]`
//!
//! `benches/run.sh` calls this after `cargo bench`. With `--since`, a figure
//! written before that time is an error, so a bench that silently stopped
//! running cannot hide behind the numbers of an older run.
#![deny(unsafe_code)]

use std::fs;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

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
];

const HEADER: &str = "bench,smarm_ns,peer,peer_ns,ratio,goal,machine";

struct Options {
    criterion_dir: PathBuf,
    out: PathBuf,
    since: Option<SystemTime>,
}

fn parse_options() -> Result<Options, String> {
    let mut criterion_dir = None;
    let mut out = None;
    let mut since = None;
    let mut arguments = std::env::args().skip(1);
    while let Some(flag) = arguments.next() {
        let mut value = || arguments.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--criterion-dir" => criterion_dir = Some(PathBuf::from(value()?)),
            "--out" => out = Some(PathBuf::from(value()?)),
            "--since" => {
                let text = value()?;
                let seconds: u64 =
                    text.parse().map_err(|_| format!("--since wants whole Unix seconds, not {text:?}"))?;
                since = Some(SystemTime::UNIX_EPOCH + Duration::from_secs(seconds));
            }
            _ => return Err(format!("unknown argument {flag:?}")),
        }
    }
    Ok(Options {
        criterion_dir: criterion_dir.ok_or("--criterion-dir is required (criterion's output directory)")?,
        out: out.ok_or("--out is required (the CSV file to write)")?,
        since,
    })
}

fn main() -> ExitCode {
    let options = match parse_options() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("summarize: {message}");
            eprintln!("usage: summarize --criterion-dir DIR --out FILE [--since UNIX_SECONDS]");
            return ExitCode::FAILURE;
        }
    };
    match run(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("summarize: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(options: &Options) -> Result<(), String> {
    let estimates = read_estimates(&options.criterion_dir).map_err(|error| error.to_string())?;
    let machine = machine_description();
    let mut problems = Vec::new();
    let mut lookup = |group: &str, function: &str| {
        let id = format!("{group}/{function}");
        match estimates.get(&id) {
            None => {
                problems.push(format!("no result for {id} under {}", options.criterion_dir.display()));
                None
            }
            Some(estimate) if options.since.is_some_and(|since| estimate.written < since) => {
                problems.push(format!("the result for {id} is from an earlier run; did that bench run?"));
                None
            }
            Some(estimate) => Some(estimate.nanoseconds),
        }
    };

    let mut csv = format!("{HEADER}\n");
    println!(
        "{:<40} {:>12} {:<28} {:>12} {:>7} {:>7}",
        "bench", "smarm ns", "peer", "peer ns", "ratio", "goal"
    );
    for comparison in COMPARISONS {
        let (Some(smarm_ns), Some(peer_ns)) =
            (lookup(comparison.group, comparison.smarm), lookup(comparison.group, comparison.peer))
        else {
            continue;
        };
        let bench = format!("{}/{}", comparison.group, comparison.smarm);
        let ratio = smarm_ns / peer_ns;
        let goal = format!("<={:.2}", comparison.goal);
        let verdict = if ratio <= comparison.goal { "met" } else { "MISSED" };
        println!(
            "{bench:<40} {smarm_ns:>12.2} {:<28} {peer_ns:>12.2} {ratio:>7.3} {goal:>7} {verdict}",
            comparison.peer
        );
        csv.push_str(&format!(
            "{},{smarm_ns:.3},{},{peer_ns:.3},{ratio:.4},{},{}\n",
            csv_field(&bench),
            csv_field(comparison.peer),
            csv_field(&goal),
            csv_field(&machine)
        ));
    }
    println!("machine: {machine}");

    if !problems.is_empty() {
        return Err(format!("{} not written:\n  {}", options.out.display(), problems.join("\n  ")));
    }
    if let Some(parent) = options.out.parent().filter(|parent| !parent.as_os_str().is_empty()) {
        fs::create_dir_all(parent).map_err(|error| format!("cannot create {}: {error}", parent.display()))?;
    }
    fs::write(&options.out, csv)
        .map_err(|error| format!("cannot write {}: {error}", options.out.display()))?;
    println!("wrote {}", options.out.display());
    Ok(())
}
