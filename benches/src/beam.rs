//! The BEAM as a peer: compiles an Erlang module from `benches/erl/`, runs
//! it under `erl -noshell` with a given number of schedulers and a time
//! limit, and reads back the figures it printed.
//!
//! The Erlang side times itself (`erlang:monotonic_time`) and prints one
//! `result <id> <value>` line per figure; any other line is passed through
//! to this process's standard error (notes on how a figure was taken). A
//! module checks its own results and exits non-zero when one is wrong, so
//! a figure that comes back is one of work that was done.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Why the BEAM gave no figures.
#[derive(Debug, Clone, PartialEq)]
pub enum BeamError {
    /// `erl` or `erlc` is not installed: a peer that cannot run, not a
    /// failure of the bench.
    Missing(String),
    /// The module did not compile, crashed, failed a check, or ran out of
    /// time.
    Failed(String),
}

impl std::fmt::Display for BeamError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BeamError::Missing(what) => write!(formatter, "{what} not found (Debian: erlang-nox)"),
            BeamError::Failed(why) => formatter.write_str(why),
        }
    }
}

impl std::error::Error for BeamError {}

/// The Erlang sources, `benches/erl/`.
pub fn source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("erl")
}

/// Compiles `benches/erl/<module>.erl` and evaluates `call` (an Erlang
/// expression, e.g. `peers:main(3, [...])`, which must end with `halt/1`)
/// on a BEAM with `schedulers` schedulers, killing it after `limit`.
/// Returns the `(id, value)` pairs it printed, in order.
pub fn run(
    module: &str,
    schedulers: usize,
    call: &str,
    limit: Duration,
) -> Result<Vec<(String, f64)>, BeamError> {
    let out = std::env::temp_dir().join(format!("smarm-beam-{}", std::process::id()));
    std::fs::create_dir_all(&out)
        .map_err(|error| BeamError::Failed(format!("{}: {error}", out.display())))?;
    let source = source_dir().join(format!("{module}.erl"));
    let compiled = Command::new("erlc").arg("-o").arg(&out).arg(&source).status();
    match compiled {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(BeamError::Missing("erlc".to_string()))
        }
        Err(error) => return Err(BeamError::Failed(format!("erlc: {error}"))),
        Ok(status) if !status.success() => {
            return Err(BeamError::Failed(format!("erlc {}: {status}", source.display())))
        }
        Ok(_) => {}
    }
    let schedulers = format!("{schedulers}:{schedulers}");
    let spawned = Command::new("erl")
        // +P: room for skynet's 1,111,111 processes and a million parked.
        .args(["-noshell", "-noinput", "+S", &schedulers, "+P", "4000000", "-pa"])
        .arg(&out)
        .args(["-eval", call])
        .env("ERL_CRASH_DUMP_SECONDS", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(BeamError::Missing("erl".to_string()))
        }
        Err(error) => return Err(BeamError::Failed(format!("erl: {error}"))),
        Ok(child) => child,
    };
    // Lines are read on a thread so the deadline holds while erl is silent.
    let stdout = child.stdout.take().expect("stdout is piped");
    let (lines_tx, lines) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                return;
            }
        }
    });
    let deadline = Instant::now() + limit;
    let mut figures = Vec::new();
    loop {
        match lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) => match parse_result(&line) {
                Some(figure) => figures.push(figure),
                None => eprintln!("beam: {line}"),
            },
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(BeamError::Failed(format!("{module}: no result within {limit:?}; killed")));
            }
        }
    }
    let _ = reader.join();
    let status = child.wait().map_err(|error| BeamError::Failed(format!("erl: {error}")))?;
    let _ = std::fs::remove_dir_all(&out);
    if !status.success() {
        return Err(BeamError::Failed(format!("{module} on erl: {status} (its standard error says why)")));
    }
    Ok(figures)
}

/// `result <id> <value>` → `(id, value)`.
fn parse_result(line: &str) -> Option<(String, f64)> {
    let mut fields = line.strip_prefix("result ")?.split_whitespace();
    let (id, value) = (fields.next()?, fields.next()?.parse().ok()?);
    fields.next().is_none().then(|| (id.to_string(), value))
}

/// An Erlang string literal for `text` (ids passed to a module).
pub fn erlang_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_lines_are_parsed_and_others_are_not() {
        assert_eq!(
            parse_result("result yield_ping/beam/yield 7643150"),
            Some(("yield_ping/beam/yield".into(), 7643150.0))
        );
        assert_eq!(parse_result("result m 782.66"), Some(("m".into(), 782.66)));
        assert_eq!(parse_result("note memory 100000 parked"), None);
        assert_eq!(parse_result("result m"), None);
        assert_eq!(parse_result("result m 1 2"), None);
    }
}
