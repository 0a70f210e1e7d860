//! Stack overflow past the platform's guard-page budget, on a canary stack
//! where no fault announces it: the core's check at the switch out reports
//! it — the same line as a guard-page fault, naming the overflowing
//! process — and aborts before a neighbour whose stack it trampled runs
//! again. Checked in forked children on the default configuration: once at
//! the overflowing process's exit (canary overwritten), once at a yield
//! from below its stack (stack pointer check).
//!
//! One test in this file: see `common::fork`.

mod common;

use std::time::Instant;

use common::fork::{exit_child, run_child, say};
use smarm::Engine;

/// Parked processes spawned before the one that overflows: more than the
/// guard-page budget of a default machine (`vm.max_map_count` 65,530 gives
/// 14,334 guard-page stacks), so the last stacks are canary stacks carved
/// side by side from shared chunks.
const NEIGHBOURS: usize = 15_000;
/// More spawns allowed after `NEIGHBOURS` to find two adjacent canary
/// stacks (a chunk holds 64).
const SEARCH: usize = 200;
/// `Config::default().stack_size`: the scenario runs on the defaults.
const DEFAULT_STACK_SIZE: usize = 256 * 1024;

/// What a parked neighbour is told to do.
enum Command {
    /// Overflow the stack by a few KiB, then return (`yield_deep`: yield at
    /// the deepest point first).
    Overflow { yield_deep: bool },
    /// Return.
    Exit,
}

/// Recurses with 512-byte zeroed frames until a frame lies below `floor`.
#[inline(never)]
fn dig(floor: usize, yield_deep: bool) -> u64 {
    let mut frame = [0u8; 512];
    std::hint::black_box(&mut frame);
    if (frame.as_ptr() as usize) < floor {
        if yield_deep {
            smarm::yield_now();
        }
        return u64::from(frame[0]);
    }
    dig(floor, yield_deep).wrapping_add(u64::from(frame[511]))
}

/// Every process of the scenario: reports where its stack is (the address
/// of a local, at the same depth in every process) and its pid, then waits
/// for commands.
fn neighbour(report: smarm::Sender<(usize, String)>, commands: smarm::Receiver<Command>) {
    let marker = 0u8;
    let address = std::hint::black_box(&marker) as *const u8 as usize;
    let pid = smarm::self_pid().unwrap();
    report.send((address, format!("{}.{}", pid.index(), pid.generation()))).unwrap();
    drop(report);
    while let Ok(command) = commands.recv() {
        match command {
            // From a local near the top to 2 KiB below the stack: through
            // the canary and into the top of the stack below.
            Command::Overflow { yield_deep } => {
                std::hint::black_box(dig(address - DEFAULT_STACK_SIZE - 2048, yield_deep));
            }
            Command::Exit => return,
        }
    }
}

/// The child: `NEIGHBOURS` parked processes, then more until one's stack
/// lies directly above the previous one's — two canary stacks of one chunk
/// (guard-page stacks are separate mappings with a guard page between) —
/// and that one overflows into its parked neighbour's stack. Without the
/// switch-out check nothing reports it: the overflowing process goes on
/// with the neighbour's stack trampled, and the child hangs or crashes
/// later (it was seen to hang in the join).
fn canary_child(yield_deep: usize) -> ! {
    let yield_deep = yield_deep != 0;
    // One worker: every stack comes from the one worker's spawns, in order.
    let engine = Engine::builder().workers(1).build().expect("engine starts");
    let _ = engine.block_on(move || {
        let (report, reports) = smarm::channel();
        let mut parked = Vec::new();
        let mut previous = 0usize;
        for spawned in 1..=NEIGHBOURS + SEARCH {
            let (commands, inbox) = smarm::channel();
            let report = report.clone();
            let handle = smarm::spawn(move || neighbour(report, inbox)).unwrap();
            let (address, pid) = reports.recv().unwrap();
            if spawned > NEIGHBOURS && address == previous + DEFAULT_STACK_SIZE {
                say(&format!("CHILD overflowing {pid} after {spawned} spawns\n"));
                commands.send(Command::Overflow { yield_deep }).unwrap();
                let _ = handle.join();
                say("CHILD overflowing process returned\n");
                for neighbour in &parked {
                    let _ = smarm::Sender::send(neighbour, Command::Exit);
                }
                return;
            }
            previous = address;
            parked.push(commands);
        }
        say("CHILD no two adjacent canary stacks\n");
    });
    say("CHILD survived the overflow\n");
    exit_child(3)
}

fn check_canary_report(yield_deep: bool, evidence: &str) {
    let started = Instant::now();
    let (output, status) = run_child(canary_child, usize::from(yield_deep));
    let pid = output
        .lines()
        .find_map(|l| l.strip_prefix("CHILD overflowing "))
        .and_then(|l| l.split(' ').next())
        .unwrap_or_else(|| panic!("child found no canary stack to overflow (status {status}):\n{output}"))
        .to_owned();
    assert!(
        libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGABRT,
        "child did not abort (status {status}):\n{output}"
    );
    let report = format!("smarm: stack overflow in process {pid} (");
    assert!(output.contains(&report), "no report naming {pid}:\n{output}");
    assert!(output.contains(&format!("size {DEFAULT_STACK_SIZE} bytes) \u{2014} {evidence}")), "{output}");
    assert_eq!(output.matches("smarm: stack overflow").count(), 1, "{output}");
    assert!(!output.contains("returned") && !output.contains("survived"), "{output}");
    eprintln!("canary overflow ({evidence}) child took {:?}", started.elapsed());
}

#[test]
fn overflow_past_the_guard_budget_is_reported_at_the_switch_out() {
    check_canary_report(false, "canary overwritten");
    check_canary_report(true, "stack pointer 0x");
}
