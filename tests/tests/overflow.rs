//! Stack overflow in a process is reported with the process's pid and its
//! stack size, then the program dies — checked in forked children (an
//! overflow ends the whole program), each overflowing on a *recycled*
//! stack, for two different pids.
//!
//! One test in this file: see `common::fork`.

mod common;

use common::fork::{exit_child, run_child, say};
use smarm::Engine;

const STACK_SIZE: usize = 64 * 1024;

/// Recurses with 512-byte frames until the guard page is hit.
#[inline(never)]
fn recurse(depth: u64) -> u64 {
    let mut frame = [0u8; 512];
    frame[0] = depth as u8;
    std::hint::black_box(&mut frame);
    if std::hint::black_box(depth) == u64::MAX {
        return 0;
    }
    recurse(depth + 1).wrapping_add(u64::from(frame[511]))
}

/// The child: `warmups` processes run and exit first, so the overflowing
/// process gets a pooled (recycled) stack and a later generation of a slot.
fn child(warmups: usize) -> ! {
    let engine = Engine::builder().workers(2).stack_size(STACK_SIZE).build().expect("engine starts");
    let _ = engine.block_on(move || {
        let rt = smarm::current_runtime().unwrap();
        for _ in 0..warmups {
            smarm::spawn(smarm::yield_now).unwrap().join().unwrap();
        }
        let pooled_before = rt.pooled_stacks();
        let overflowing = smarm::spawn(|| {
            let pid = smarm::self_pid().unwrap();
            say(&format!("CHILD pid {}.{}\n", pid.index(), pid.generation()));
            std::hint::black_box(recurse(0));
        })
        .unwrap();
        // Spawned from our own worker: the stack came out of the pool at
        // spawn time, before the process runs.
        say(&format!("CHILD pooled {pooled_before} -> {}\n", rt.pooled_stacks()));
        let _ = overflowing.join();
    });
    say("CHILD survived the overflow\n");
    exit_child(3)
}

#[test]
fn overflow_on_a_recycled_stack_names_the_process_in_two_children() {
    let mut pids = Vec::new();
    for warmups in [1, 3] {
        let (output, status) = run_child(child, warmups);
        assert!(libc::WIFSIGNALED(status), "child did not die of a signal (status {status}):\n{output}");
        let signal = libc::WTERMSIG(status);
        assert!(signal == libc::SIGSEGV || signal == libc::SIGBUS, "signal {signal}:\n{output}");
        let pid = output
            .lines()
            .find_map(|l| l.strip_prefix("CHILD pid "))
            .unwrap_or_else(|| panic!("child never ran the overflowing process:\n{output}"))
            .to_owned();
        let pooled = output.lines().find_map(|l| l.strip_prefix("CHILD pooled ")).unwrap_or("?");
        let (before, after) = pooled.split_once(" -> ").expect("pooled line");
        let (before, after): (usize, usize) = (before.parse().unwrap(), after.parse().unwrap());
        assert!(before >= 1 && after == before - 1, "stack not taken from the pool: {pooled}");
        let report = format!("smarm: stack overflow in process {pid} (");
        assert!(output.contains(&report), "no report naming {pid}:\n{output}");
        assert!(output.contains(&format!("size {STACK_SIZE} bytes")), "no stack size:\n{output}");
        assert!(!output.contains("survived"), "{output}");
        pids.push(pid);
    }
    assert_ne!(pids[0], pids[1]);
}
