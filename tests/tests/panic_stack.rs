//! A process on the smallest stack the hosted runtime accepts panics with
//! `RUST_BACKTRACE=1` and with `RUST_BACKTRACE=full` — the panic hook
//! captures and symbolises a backtrace on the process's stack — and the
//! program survives: `join` returns the panic message. And a smaller stack
//! is refused with an error naming the minimum.
//!
//! The environment variable is process-global and std reads it once, at
//! the first panic, so each setting runs in a forked child of its own that
//! sets it before anything panics. One test in this file: see
//! `common::fork`.

mod common;

use std::time::Instant;

use common::fork::{exit_child, run_child, say};
use smarm::{Config, Engine, JoinError};

/// The `RUST_BACKTRACE` settings tried, by child argument.
const STYLES: [&str; 2] = ["1", "full"];

/// The child: sets `RUST_BACKTRACE`, then a process on the minimum stack
/// panics — the first panic of the program, which also loads the debug
/// information for the backtrace — and the root joins it.
fn child(style: usize) -> ! {
    // The child is single-threaded here: nothing reads the environment
    // concurrently.
    std::env::set_var("RUST_BACKTRACE", STYLES[style]);
    let engine = Engine::builder().stack_size(smarm::MIN_STACK_SIZE).build().expect("engine starts");
    let joined = engine.block_on(|| {
        let handle = smarm::spawn(|| -> u32 { panic!("deliberate panic on the smallest stack") }).unwrap();
        match handle.join() {
            Err(JoinError::Exited(smarm::ExitReason::Panicked(message))) => message,
            other => format!("unexpected join result: {other:?}"),
        }
    });
    match joined {
        Ok(message) => say(&format!("CHILD joined: {message}\n")),
        Err(e) => say(&format!("CHILD engine failed: {e}\n")),
    }
    exit_child(0)
}

#[test]
fn panic_with_backtrace_on_the_smallest_stack_is_survived() {
    for (index, style) in STYLES.iter().enumerate() {
        let started = Instant::now();
        let (output, status) = run_child(child, index);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "RUST_BACKTRACE={style}: the child died (status {status}):\n{output}"
        );
        assert!(
            output.contains("CHILD joined: deliberate panic on the smallest stack"),
            "RUST_BACKTRACE={style}:\n{output}"
        );
        assert!(!output.contains("stack overflow"), "RUST_BACKTRACE={style}:\n{output}");
        eprintln!("RUST_BACKTRACE={style}: child took {:?}", started.elapsed());
    }
    let Err(refused) = Engine::builder().stack_size(smarm::MIN_STACK_SIZE - 1).build() else {
        panic!("a stack below the minimum was accepted");
    };
    let text = refused.to_string();
    assert!(text.contains(&format!("use at least {} bytes (64 KiB)", smarm::MIN_STACK_SIZE)), "{text}");
    let refused =
        smarm::try_run_with(Config { stack_size: 16 * 1024, ..Config::default() }, || ()).unwrap_err();
    assert!(refused.to_string().contains("64 KiB"), "{refused}");
}
