//! Figures that are not criterion timings: resident memory, and peers that
//! could not run at all.
//!
//! A bench binary writes them with [`write`] into one small CSV file per
//! binary under [`directory`]; the summarizer reads them all back with
//! [`read_all`]. Each line is `id,value,note`: `value` is a number when
//! something was measured, empty when it failed, and `note` says how it was
//! measured or why it failed.
//!
//! Also here: [`quick`], the switch `benches/run.sh --quick` sets so that
//! benches keep criterion's short command-line timings instead of their own
//! longer ones, and [`child_of`], for measurements that need a fresh
//! process.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use crate::csv_field;

/// Set to `1` by `benches/run.sh --quick`.
pub const QUICK_VAR: &str = "SMARM_BENCH_QUICK";
/// Overrides where measurements are written and read.
pub const DIRECTORY_VAR: &str = "SMARM_BENCH_MEASUREMENTS";
/// Set in a child process started by [`child_of`]: which measurement it is
/// to make.
pub const CHILD_VAR: &str = "SMARM_BENCH_CHILD";

/// Whether this is a CI smoke run: benches then leave criterion's timings
/// (set on the command line) alone, and nothing they print is a figure.
pub fn quick() -> bool {
    std::env::var_os(QUICK_VAR).is_some_and(|value| value == "1")
}

/// Where measurement files go: `$SMARM_BENCH_MEASUREMENTS`, else
/// `$CARGO_TARGET_DIR/smarm-measurements`, else `target/smarm-measurements`
/// at the repository root — beside criterion's own `criterion/` directory.
pub fn directory() -> PathBuf {
    if let Some(directory) = std::env::var_os(DIRECTORY_VAR) {
        return PathBuf::from(directory);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("smarm-measurements")
}

/// One figure, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub enum Measurement {
    /// The figure, with how it was taken.
    Value { value: f64, note: String },
    /// The peer (or smarm) could not do it; why.
    Failed { reason: String },
}

/// Writes `rows` (id, measurement) as `<directory>/<file>.csv`, replacing
/// what an earlier run wrote there.
pub fn write(file: &str, rows: &[(String, Measurement)]) -> io::Result<PathBuf> {
    let directory = directory();
    fs::create_dir_all(&directory)?;
    let mut text = String::from("id,value,note\n");
    for (id, measurement) in rows {
        let (value, note) = match measurement {
            Measurement::Value { value, note } => (format!("{value}"), note.as_str()),
            Measurement::Failed { reason } => (String::new(), reason.as_str()),
        };
        text.push_str(&format!("{},{value},{}\n", csv_field(id), csv_field(note)));
    }
    let path = directory.join(format!("{file}.csv"));
    fs::write(&path, text)?;
    Ok(path)
}

/// Every measurement under `directory`, keyed by id, with when its file was
/// written. A missing directory is no measurements.
pub fn read_all(directory: &Path) -> Result<HashMap<String, (Measurement, SystemTime)>, String> {
    let mut all = HashMap::new();
    let entries = match fs::read_dir(directory) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(all),
        Err(error) => return Err(format!("cannot read {}: {error}", directory.display())),
    };
    for entry in entries {
        let path = entry.map_err(|error| format!("cannot read {}: {error}", directory.display()))?.path();
        if path.extension().is_none_or(|extension| extension != "csv") {
            continue;
        }
        let text =
            fs::read_to_string(&path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
        let written = fs::metadata(&path)
            .and_then(|metadata| metadata.modified())
            .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
        for (number, line) in text.lines().enumerate().skip(1) {
            let fields = split_csv_line(line);
            let [id, value, note] = fields.as_slice() else {
                return Err(format!("{}:{}: expected id,value,note", path.display(), number + 1));
            };
            let measurement = if value.is_empty() {
                Measurement::Failed { reason: note.clone() }
            } else {
                let value = value
                    .parse()
                    .map_err(|_| format!("{}:{}: {value:?} is not a number", path.display(), number + 1))?;
                Measurement::Value { value, note: note.clone() }
            };
            all.insert(id.clone(), (measurement, written));
        }
    }
    Ok(all)
}

/// Splits one line written by [`write`] (RFC 4180 quoting, no newlines in
/// fields).
fn split_csv_line(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut characters = line.chars().peekable();
    while let Some(character) = characters.next() {
        match (character, quoted) {
            ('"', true) if characters.peek() == Some(&'"') => {
                field.push('"');
                characters.next();
            }
            ('"', true) => quoted = false,
            ('"', false) if field.is_empty() => quoted = true,
            (',', false) => fields.push(std::mem::take(&mut field)),
            (character, _) => field.push(character),
        }
    }
    fields.push(field);
    fields
}

/// Runs this same executable again with [`CHILD_VAR`] set to `child`, and
/// returns what the child printed on its standard output — or why it failed
/// (its exit status and the end of its standard error). For measurements
/// that need a fresh process (resident memory) or that may crash it (a peer
/// running out of mappings).
pub fn child_of(child: &str) -> Result<String, String> {
    let executable =
        std::env::current_exe().map_err(|error| format!("cannot find this executable: {error}"))?;
    let output = Command::new(executable)
        .env(CHILD_VAR, child)
        // A panic's message, not a backtrace, is the reason worth keeping.
        .env("RUST_BACKTRACE", "0")
        .output()
        .map_err(|error| format!("cannot start a child process: {error}"))?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let last_lines: Vec<&str> =
        stderr.lines().filter(|line| !line.starts_with("note:")).rev().take(2).collect();
    let tail = last_lines.into_iter().rev().collect::<Vec<_>>().join(" / ");
    Err(format!("{}: {}", output.status, tail.trim()))
}

/// The child measurement this process was started to make, if any.
pub fn child_request() -> Option<String> {
    std::env::var(CHILD_VAR).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measurements_round_trip_through_the_file() {
        let directory = std::env::temp_dir().join(format!("smarm-benches-measure-{}", std::process::id()));
        // Points `write` at a scratch directory; no other test reads the
        // variable.
        std::env::set_var(DIRECTORY_VAR, &directory);
        let rows = vec![
            (
                "memory/smarm".to_string(),
                Measurement::Value { value: 4096.5, note: "100000 parked, \"rss\"".to_string() },
            ),
            ("memory/may".to_string(), Measurement::Failed { reason: "exit status: 134, a,b".to_string() }),
        ];
        write("memory", &rows).unwrap();
        let read = read_all(&directory).unwrap();
        std::env::remove_var(DIRECTORY_VAR);
        fs::remove_dir_all(&directory).unwrap();
        assert_eq!(read.len(), 2);
        assert_eq!(read["memory/smarm"].0, rows[0].1);
        assert_eq!(read["memory/may"].0, rows[1].1);
    }

    #[test]
    fn a_missing_directory_is_no_measurements() {
        assert!(read_all(Path::new("/nonexistent/smarm-benches")).unwrap().is_empty());
    }
}
