//! Benchmark helpers: what machine the figures came from, and reading them
//! back out of criterion's output.
//!
//! The benchmarks themselves live in `benches/`; this library is shared by
//! them and by the `summarize` binary, which turns criterion's
//! `estimates.json` files into `bench_results/summary.csv` and draws
//! `bench_results/ratios.png`. Its only dependencies are for the chart
//! (plotters' bitmap backend, `png`), with a bitmap font of its own: the
//! summary must build wherever the benches do, with no other toolchain, no
//! system fonts and no JSON crate.
#![deny(unsafe_code)]

pub mod beam;
pub mod font;
pub mod measure;
pub mod plot;
pub mod savina;

use std::collections::HashMap;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Deserialize;

/// "CPU model (N cores)" for the machine this runs on, e.g.
/// `Intel(R) Xeon(R) Processor (2 cores)`.
///
/// The core count is what this process may use (affinity and cgroup limits
/// included), since that is what the benchmarks ran on.
pub fn machine_description() -> String {
    let model = cpu_model().unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let cores = std::thread::available_parallelism().map(|count| count.get()).unwrap_or(1);
    let plural = if cores == 1 { "" } else { "s" };
    format!("{model} ({cores} core{plural})")
}

/// The CPU model as /proc/cpuinfo names it: `model name` on x86, and on
/// AArch64 (which has no model string) the implementer / part numbers.
fn cpu_model() -> Option<String> {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").ok()?;
    let field = |name: &str| {
        cpuinfo.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim() == name).then(|| value.trim().to_string())
        })
    };
    if let Some(model) = field("model name").filter(|model| !model.is_empty()) {
        return Some(model);
    }
    match (field("CPU implementer"), field("CPU part")) {
        (Some(implementer), Some(part)) => {
            Some(format!("{} implementer {implementer} part {part}", std::env::consts::ARCH))
        }
        _ => None,
    }
}

/// Quotes a CSV field when it needs it (RFC 4180).
pub fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// Why criterion's output could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// A file or directory could not be read.
    Io { path: PathBuf, error: io::Error },
    /// A file was not the JSON criterion writes.
    Format { path: PathBuf, reason: String },
}

impl fmt::Display for ReadError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io { path, error } => write!(formatter, "cannot read {}: {error}", path.display()),
            ReadError::Format { path, reason } => write!(
                formatter,
                "{} is not criterion output ({reason}); delete it and run the benches again",
                path.display()
            ),
        }
    }
}

impl std::error::Error for ReadError {}

/// One benchmark's figure as criterion last recorded it.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    /// Nanoseconds per iteration: the slope of the linear fit when criterion
    /// made one, else the mean, i.e. the figure criterion itself prints.
    pub nanoseconds: f64,
    /// When criterion wrote it.
    pub written: SystemTime,
}

/// Reads every `<benchmark>/new/{benchmark,estimates}.json` pair under
/// `criterion_dir` (criterion's output, normally `target/criterion`), keyed
/// by criterion's full id: `group/function` or `group/function/parameter`.
///
/// Results are looked up by the id recorded in `benchmark.json` rather than
/// by directory name, because criterion rewrites characters such as `/` in
/// directory names.
pub fn read_estimates(criterion_dir: &Path) -> Result<HashMap<String, Estimate>, ReadError> {
    let mut estimates = HashMap::new();
    let mut pending = vec![criterion_dir.to_path_buf()];
    while let Some(directory) = pending.pop() {
        let entries =
            fs::read_dir(&directory).map_err(|error| ReadError::Io { path: directory.clone(), error })?;
        for entry in entries {
            let entry = entry.map_err(|error| ReadError::Io { path: directory.clone(), error })?;
            let path = entry.path();
            if !path.is_dir() {
                continue;
            }
            if path.file_name().is_some_and(|name| name == "new") {
                if let Some((id, estimate)) = read_one(&path)? {
                    estimates.insert(id, estimate);
                }
            } else {
                pending.push(path);
            }
        }
    }
    Ok(estimates)
}

/// Reads one criterion `new/` directory; `None` if it is not a complete one
/// (criterion's `report/` directories, an interrupted run).
fn read_one(new_dir: &Path) -> Result<Option<(String, Estimate)>, ReadError> {
    let benchmark_path = new_dir.join("benchmark.json");
    let estimates_path = new_dir.join("estimates.json");
    if !benchmark_path.is_file() || !estimates_path.is_file() {
        return Ok(None);
    }
    let benchmark: BenchmarkFile = read_json(&benchmark_path)?;
    let estimates: EstimatesFile = read_json(&estimates_path)?;
    let nanoseconds = [estimates.slope, estimates.mean]
        .into_iter()
        .flatten()
        .map(|estimate| estimate.point_estimate)
        .next()
        .ok_or_else(|| format_error(&estimates_path, "neither slope nor mean has a point_estimate"))?;
    let id = benchmark.full_id;
    let written = fs::metadata(&estimates_path)
        .and_then(|metadata| metadata.modified())
        .map_err(|error| ReadError::Io { path: estimates_path.clone(), error })?;
    Ok(Some((id, Estimate { nanoseconds, written })))
}

/// The part of criterion's `benchmark.json` we read.
#[derive(Deserialize)]
struct BenchmarkFile {
    full_id: String,
}

/// The part of criterion's `estimates.json` we read: the slope (a linear
/// fit over the samples' iteration counts) when criterion made one, else
/// the mean.
#[derive(Deserialize)]
struct EstimatesFile {
    slope: Option<PointEstimate>,
    mean: Option<PointEstimate>,
}

#[derive(Deserialize)]
struct PointEstimate {
    point_estimate: f64,
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, ReadError> {
    let text = fs::read_to_string(path).map_err(|error| ReadError::Io { path: path.to_path_buf(), error })?;
    serde_json::from_str(&text).map_err(|error| format_error(path, &error.to_string()))
}

fn format_error(path: &Path, reason: &str) -> ReadError {
    ReadError::Format { path: path.to_path_buf(), reason: reason.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_only_when_needed() {
        assert_eq!(csv_field("Intel Xeon (2 cores)"), "Intel Xeon (2 cores)");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }

    #[test]
    fn machine_description_names_the_core_count() {
        let description = machine_description();
        assert!(description.ends_with(" core)") || description.ends_with(" cores)"), "{description}");
    }

    #[test]
    fn estimates_are_found_by_full_id_and_prefer_the_slope() {
        let root = std::env::temp_dir().join(format!("smarm-benches-read-{}", std::process::id()));
        let with_slope = root.join("switch_round_trip/smarm_arch_switch/new");
        let mean_only = root.join("switch_round_trip/peer/new");
        let report_only = root.join("switch_round_trip/report");
        for directory in [&with_slope, &mean_only, &report_only] {
            fs::create_dir_all(directory).unwrap();
        }
        let point = |value: &str| format!("{{\"point_estimate\":{value},\"standard_error\":0.1}}");
        fs::write(
            with_slope.join("benchmark.json"),
            r#"{"group_id":"switch_round_trip","function_id":"smarm/arch_switch","full_id":"switch_round_trip/smarm/arch_switch"}"#,
        )
        .unwrap();
        fs::write(
            with_slope.join("estimates.json"),
            format!("{{\"mean\":{},\"slope\":{}}}", point("12.5"), point("11.25")),
        )
        .unwrap();
        fs::write(mean_only.join("benchmark.json"), r#"{"full_id":"switch_round_trip/peer"}"#).unwrap();
        fs::write(mean_only.join("estimates.json"), format!("{{\"mean\":{},\"slope\":null}}", point("7e1")))
            .unwrap();

        let estimates = read_estimates(&root).unwrap();
        fs::remove_dir_all(&root).unwrap();

        assert_eq!(estimates.len(), 2);
        assert_eq!(estimates["switch_round_trip/smarm/arch_switch"].nanoseconds, 11.25);
        assert_eq!(estimates["switch_round_trip/peer"].nanoseconds, 70.0);
    }
}
