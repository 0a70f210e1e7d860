//! Deadlock reports: when every process (and handler actor) is parked and
//! nothing can wake one, `try_run` / `block_on` / `Engine::wait` end with
//! `RunError::Deadlock`, naming each parked process, what it waits on and
//! the line of the blocking call. And never when something may still
//! wake one: a timer, a socket, a thread outside the runtime.
//!
//! The report counts every OS thread of the program, and libtest's own
//! threads are awake (the sound answer there is "no report", which the
//! last scenario shows), so each scenario runs in a forked child of a
//! binary without libtest's harness (`harness = false`), one child at a
//! time. A child writes what it saw to its stderr; the parent asserts.

mod common;

use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::fork::{exit_child, run_child, say};
use smarm::{Config, DeadlockReport, Pid, RunError, WaitKind};

/// How a scenario's runtime is driven.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// One worker on the calling thread.
    One,
    /// Four workers on the calling thread.
    FourOnOneThread,
    /// The Engine: four workers on OS threads, `block_on`.
    Engine,
}

const MODES: [Mode; 3] = [Mode::One, Mode::FourOnOneThread, Mode::Engine];

fn drive<R: Send + 'static>(mode: Mode, root: impl FnOnce() -> R + Send + 'static) -> Result<R, RunError> {
    match mode {
        Mode::One => smarm::try_run_with(Config { worker_count: 1, ..Config::default() }, root),
        Mode::FourOnOneThread => smarm::try_run_with(Config { worker_count: 4, ..Config::default() }, root),
        Mode::Engine => smarm::Engine::builder().workers(4).build().expect("engine starts").block_on(root),
    }
}

/// What a scenario expects of one parked process.
type Expected = Arc<Mutex<Vec<(Pid, WaitKind, u32)>>>;

/// Records that the calling process is about to wait on `kind` at `line`.
fn expect(expected: &Expected, kind: WaitKind, line: u32) {
    expected.lock().unwrap().push((smarm::self_pid().unwrap(), kind, line));
}

/// Says one line per expectation: "MATCH" if the report lists the process
/// with that kind at that line of this file, else "MISMATCH" and why.
fn say_matches(report: &DeadlockReport, expected: &Expected) {
    let expected = expected.lock().unwrap();
    say(&format!("CHILD parked {} expected {}\n", report.processes.len(), expected.len()));
    for (pid, kind, line) in expected.iter() {
        let found = report.processes.iter().find(|p| p.pid == *pid);
        let verdict = match found {
            Some(p)
                if p.kind == *kind
                    && p.location.is_some_and(|l| l.line() == *line && l.file().ends_with("deadlock.rs")) =>
            {
                "MATCH".to_string()
            }
            other => format!("MISMATCH want {kind:?} at line {line}, got {other:?}"),
        };
        say(&format!("CHILD {pid} {verdict}\n"));
    }
}

fn deadlock_of<R: std::fmt::Debug>(result: Result<R, RunError>) -> DeadlockReport {
    match result {
        Err(RunError::Deadlock(report)) => report,
        other => {
            say(&format!("CHILD not a deadlock: {other:?}\n"));
            exit_child(3)
        }
    }
}

/// The root waits on a channel whose sender it keeps: nothing can send.
fn recv_alone(mode: Mode) -> ! {
    let expected = Expected::default();
    let record = expected.clone();
    let result = drive(mode, move || {
        let (_tx, rx) = smarm::channel::<()>();
        expect(&record, WaitKind::ChannelRecv, line!() + 1);
        rx.recv()
    });
    let report = deadlock_of(result);
    say(&format!("CHILD report {report}\n"));
    say_matches(&report, &expected);
    exit_child(0)
}

struct Idle;

impl smarm::Actor for Idle {
    type Msg = ();
    fn handle(&mut self, _: &mut smarm::Ctx<'_, Self>, (): ()) {}
}

/// `Engine::wait` on a handler actor nobody stops.
fn idle_actor(_: Mode) -> ! {
    let engine = smarm::Engine::builder().workers(4).build().expect("engine starts");
    let idle = engine.runtime().spawn_actor(Idle).unwrap();
    engine.runtime().register("idler", idle.pid()).unwrap();
    idle.send(()).unwrap();
    let report = deadlock_of(engine.wait());
    say(&format!("CHILD report {report}\n"));
    say(&format!(
        "CHILD actors {} processes {} named {:?} same {}\n",
        report.actors.len(),
        report.processes.len(),
        report.actors.first().and_then(|a| a.name.clone()),
        report.actors.first().is_some_and(|a| a.pid == idle.pid())
    ));
    exit_child(0)
}

/// A wait with a timeout is not a deadlock: the timeout ends it.
fn recv_with_timeout(mode: Mode) -> ! {
    let result = drive(mode, || {
        let (_tx, rx) = smarm::channel::<()>();
        let waited = rx.recv_timeout(Duration::from_millis(20));
        let (_tx2, rx2) = smarm::channel::<()>();
        // A whole process parked on one too, joined by the root.
        let child = smarm::spawn(move || rx2.recv_timeout(Duration::from_millis(20)).is_err()).unwrap();
        (waited.is_err(), child.join().unwrap())
    });
    say(&format!("CHILD result {result:?}\n"));
    exit_child(0)
}

/// A process parked on a socket read is not a deadlock: a program outside
/// (no thread of ours) writes to the socket later.
fn socket_read(mode: Mode) -> ! {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let mut writer = std::process::Command::new("sh")
        .args(["-c", "sleep 0.2; printf x"])
        .stdout(std::process::Stdio::from(std::os::fd::OwnedFd::from(theirs)))
        .spawn()
        .unwrap();
    let result = drive(mode, move || {
        let reader = smarm::spawn(move || {
            let mut stream = smarm::net::UnixStream::from(ours);
            let mut byte = [0u8; 1];
            stream.read_exact(&mut byte).map(|()| byte[0])
        })
        .unwrap();
        reader.join().unwrap().unwrap()
    });
    let _ = writer.wait();
    say(&format!("CHILD result {result:?}\n"));
    exit_child(0)
}

/// A plain thread sleeping in `std::thread::sleep` (not in a smarm wait)
/// may send later: not a deadlock.
fn thread_sends_later(mode: Mode) -> ! {
    let (tx, rx) = smarm::channel::<u32>();
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        tx.send(7).unwrap();
    });
    let result = drive(mode, move || rx.recv().unwrap());
    sender.join().unwrap();
    say(&format!("CHILD result {result:?}\n"));
    exit_child(0)
}

/// A server that never answers: its `handle_call` waits for ever.
struct Stuck(smarm::Receiver<()>);

impl smarm::GenServer for Stuck {
    type Call = ();
    type Reply = ();
    type Cast = ();
    type Info = ();
    fn handle_call(&mut self, (): ()) {
        let _ = self.0.recv();
    }
    fn handle_cast(&mut self, (): ()) {}
}

/// One process per kind of wait; the report names each, with its line.
fn every_kind(mode: Mode) -> ! {
    let expected = Expected::default();
    let record = expected.clone();
    let result = drive(mode, move || {
        let keep: Arc<Mutex<Vec<Box<dyn std::any::Any + Send>>>> = Arc::default();
        let mut handles = Vec::new();

        let (tx, rx) = smarm::channel::<()>();
        keep.lock().unwrap().push(Box::new(tx));
        let e = record.clone();
        handles.push(
            smarm::spawn(move || {
                expect(&e, WaitKind::ChannelRecv, line!() + 1);
                let _ = rx.recv();
            })
            .unwrap(),
        );

        let (tx, rx) = smarm::bounded::<u32>(1);
        tx.send(1).unwrap();
        keep.lock().unwrap().push(Box::new(rx));
        let e = record.clone();
        handles.push(
            smarm::spawn(move || {
                expect(&e, WaitKind::ChannelSend, line!() + 1);
                let _ = tx.send(2);
            })
            .unwrap(),
        );

        let mutex = Arc::new(smarm::Mutex::new(()));
        let guard_holder = mutex.clone();
        let (locked_tx, locked_rx) = smarm::channel::<()>();
        let (_never_tx, never_rx) = smarm::channel::<()>();
        keep.lock().unwrap().push(Box::new(_never_tx));
        let e = record.clone();
        handles.push(
            smarm::spawn(move || {
                let _guard = guard_holder.lock();
                locked_tx.send(()).unwrap();
                expect(&e, WaitKind::ChannelRecv, line!() + 1);
                let _ = never_rx.recv();
            })
            .unwrap(),
        );
        locked_rx.recv().unwrap();
        let e = record.clone();
        handles.push(
            smarm::spawn(move || {
                expect(&e, WaitKind::Mutex, line!() + 1);
                drop(mutex.lock());
            })
            .unwrap(),
        );

        let (tx_a, rx_a) = smarm::channel::<()>();
        let (tx_b, rx_b) = smarm::channel::<()>();
        keep.lock().unwrap().push(Box::new((tx_a, tx_b)));
        let e = record.clone();
        handles.push(
            smarm::spawn(move || {
                expect(&e, WaitKind::Select, line!() + 1);
                let _ = smarm::select(&[&rx_a, &rx_b]);
            })
            .unwrap(),
        );

        let watched = handles[0].pid();
        let e = record.clone();
        handles.push(
            smarm::spawn(move || {
                let watch = smarm::monitor(watched);
                expect(&e, WaitKind::MonitorDown, line!() + 1);
                let _ = watch.rx.recv();
            })
            .unwrap(),
        );

        let (_server_keep, server_rx) = smarm::channel::<()>();
        keep.lock().unwrap().push(Box::new(_server_keep));
        let server = smarm::Server::new(Stuck(server_rx)).start().unwrap();
        let e = record.clone();
        handles.push(
            smarm::spawn(move || {
                expect(&e, WaitKind::Call, line!() + 1);
                let _ = server.call(());
            })
            .unwrap(),
        );

        let inbox = smarm::current_runtime().unwrap().new_inbox::<u32>();
        keep.lock().unwrap().push(Box::new(inbox.addr()));
        let e = record.clone();
        handles.push(
            smarm::spawn(move || {
                expect(&e, WaitKind::Inbox, line!() + 1);
                let _ = inbox.recv();
            })
            .unwrap(),
        );

        let e = record.clone();
        handles.push(
            smarm::spawn(move || {
                expect(&e, WaitKind::Future, line!() + 1);
                let _ = smarm::block_on(std::future::pending::<()>());
            })
            .unwrap(),
        );

        let first = handles.remove(0);
        expect(&record, WaitKind::Join, line!() + 1);
        let _ = first.join();
        drop((handles, keep));
    });
    let report = deadlock_of(result);
    say(&format!("CHILD report {report}\n"));
    say_matches(&report, &expected);
    exit_child(0)
}

/// Two processes, each joining the other.
fn join_each_other(mode: Mode) -> ! {
    let expected = Expected::default();
    let record = expected.clone();
    let result = drive(mode, move || {
        let (to_a, from_root_a) = smarm::channel::<smarm::JoinHandle<()>>();
        let (to_b, from_root_b) = smarm::channel::<smarm::JoinHandle<()>>();
        let e = record.clone();
        let a = smarm::spawn(move || {
            let b = from_root_a.recv().unwrap();
            expect(&e, WaitKind::Join, line!() + 1);
            let _ = b.join();
        })
        .unwrap();
        let e = record.clone();
        let b = smarm::spawn(move || {
            let a = from_root_b.recv().unwrap();
            expect(&e, WaitKind::Join, line!() + 1);
            let _ = a.join();
        })
        .unwrap();
        to_a.send(b).unwrap();
        to_b.send(a).unwrap();
        let (_keep, never) = smarm::channel::<()>();
        expect(&record, WaitKind::ChannelRecv, line!() + 1);
        let _ = never.recv();
    });
    let report = deadlock_of(result);
    say(&format!("CHILD report {report}\n"));
    say_matches(&report, &expected);
    exit_child(0)
}

/// Two processes taking two mutexes in opposite orders.
fn mutex_cycle(mode: Mode) -> ! {
    let expected = Expected::default();
    let record = expected.clone();
    let result = drive(mode, move || {
        let first = Arc::new(smarm::Mutex::new(()));
        let second = Arc::new(smarm::Mutex::new(()));
        let (a_holds, wait_a) = smarm::channel::<()>();
        let (b_holds, wait_b) = smarm::channel::<()>();
        let (one, two) = (first.clone(), second.clone());
        let e = record.clone();
        let a = smarm::spawn(move || {
            let _held = one.lock();
            a_holds.send(()).unwrap();
            wait_b.recv().unwrap();
            expect(&e, WaitKind::Mutex, line!() + 1);
            drop(two.lock());
        })
        .unwrap();
        let e = record.clone();
        let b = smarm::spawn(move || {
            let _held = second.lock();
            b_holds.send(()).unwrap();
            wait_a.recv().unwrap();
            expect(&e, WaitKind::Mutex, line!() + 1);
            drop(first.lock());
        })
        .unwrap();
        expect(&record, WaitKind::Join, line!() + 1);
        let _ = a.join();
        let _ = b.join();
    });
    let report = deadlock_of(result);
    say(&format!("CHILD report {report}\n"));
    say_matches(&report, &expected);
    exit_child(0)
}

/// A deadlocked runtime on a second thread while this thread is awake
/// (sleeping in `std::thread::sleep`, as libtest's threads wait in their
/// own calls): no report, since this thread could still send. Once this
/// thread waits in a smarm `recv` with no deadline, the runtime is
/// reported.
fn other_thread_awake(_: Mode) -> ! {
    let (result_tx, result_rx) = smarm::channel::<String>();
    let runner = std::thread::spawn(move || {
        let result = smarm::try_run(|| {
            let (_tx, rx) = smarm::channel::<()>();
            rx.recv()
        });
        let text = match result {
            Err(RunError::Deadlock(report)) => format!("deadlock {}", report.processes.len()),
            other => format!("{other:?}"),
        };
        result_tx.send(text).unwrap();
    });
    std::thread::sleep(Duration::from_millis(300));
    let early = result_rx.try_recv();
    say(&format!("CHILD early {early:?}\n"));
    let late = result_rx.recv();
    say(&format!("CHILD late {late:?}\n"));
    runner.join().unwrap();
    exit_child(0)
}

/// Round trips in the ping-pong scenario.
const ROUND_TRIPS: u32 = 20_000;

/// Ping-pong between a process and a plain thread that waits in smarm
/// `recv`: at every hop the runtime goes idle with the other side asleep
/// or just woken, the moment a deadlock look races a wake in flight. No
/// look may report a deadlock; every message arrives.
fn ping_pong_with_thread(mode: Mode) -> ! {
    let (to_thread, thread_rx) = smarm::channel::<u32>();
    let (to_process, process_rx) = smarm::channel::<u32>();
    let echo = std::thread::spawn(move || {
        let mut echoed = 0u32;
        while let Ok(n) = thread_rx.recv() {
            if to_process.send(n + 1).is_err() {
                break;
            }
            echoed += 1;
        }
        echoed
    });
    let root = move || {
        let mut sum = 0u64;
        for i in 0..ROUND_TRIPS {
            to_thread.send(i).unwrap();
            sum += u64::from(process_rx.recv().unwrap() - i);
        }
        sum
    };
    let result = match mode {
        // Drivers that never spin: every idle moment is a park, and a look.
        Mode::Engine => smarm::Engine::builder()
            .workers(4)
            .spin_budget_cycles(0)
            .build()
            .expect("engine starts")
            .block_on(root),
        mode => drive(mode, root),
    };
    let echoed = echo.join().unwrap();
    say(&format!("CHILD result {result:?} echoed {echoed}\n"));
    exit_child(0)
}

/// Hops of the token around the ring scenario's ring.
const RING_HOPS: u32 = 20_000;

/// A token passed around a ring of processes on four workers, each on its
/// own driver thread that never spins: at every hop the drivers sleep and
/// the next one is woken, and the host looks for a deadlock whenever all
/// of them sleep at once — with the token's wake in flight. No look may
/// report a deadlock; every hop arrives.
fn engine_ring(_: Mode) -> ! {
    let engine =
        smarm::Engine::builder().workers(4).threads(4).spin_budget_cycles(0).build().expect("engine starts");
    let result = engine.block_on(|| {
        const RING: usize = 8;
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..RING).map(|_| smarm::channel::<u32>()).unzip();
        let (done_tx, done_rx) = smarm::channel::<u32>();
        let mut members = Vec::new();
        for (i, rx) in receivers.into_iter().enumerate() {
            let next = senders[(i + 1) % RING].clone();
            let done = done_tx.clone();
            let member = smarm::current_runtime()
                .unwrap()
                .spawn_on(i % 4, move || {
                    while let Ok(hop) = rx.recv() {
                        if hop == RING_HOPS {
                            done.send(hop).unwrap();
                            return;
                        }
                        if next.send(hop + 1).is_err() {
                            return;
                        }
                    }
                })
                .unwrap();
            members.push(member);
        }
        senders[0].send(0).unwrap();
        let last = done_rx.recv().unwrap();
        drop(senders);
        members.into_iter().for_each(|m| m.join().unwrap());
        last
    });
    say(&format!("CHILD result {result:?}\n"));
    exit_child(0)
}

type Scenario = fn(Mode) -> !;

const SCENARIOS: [(&str, Scenario); 11] = [
    ("recv_alone", recv_alone),
    ("idle_actor", idle_actor),
    ("recv_with_timeout", recv_with_timeout),
    ("socket_read", socket_read),
    ("thread_sends_later", thread_sends_later),
    ("every_kind", every_kind),
    ("join_each_other", join_each_other),
    ("mutex_cycle", mutex_cycle),
    ("other_thread_awake", other_thread_awake),
    ("ping_pong_with_thread", ping_pong_with_thread),
    ("engine_ring", engine_ring),
];

fn child(argument: usize) -> ! {
    let (scenario, mode) = (argument / MODES.len(), MODES[argument % MODES.len()]);
    SCENARIOS[scenario].1(mode)
}

/// Runs scenario `name` in `mode` in a child; its stderr, once it exited
/// with status 0.
fn run(name: &str, mode: Mode) -> String {
    let scenario = SCENARIOS.iter().position(|(n, _)| *n == name).unwrap();
    let mode_index = MODES.iter().position(|m| *m == mode).unwrap();
    let (output, status) = run_child(child, scenario * MODES.len() + mode_index);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{name} ({mode:?}): the child failed ({status}):\n{output}"
    );
    output
}

/// Every expectation of the scenario matched, and the report lists
/// exactly `parked` processes.
fn assert_matches(name: &str, mode: Mode, output: &str, parked: usize) {
    assert!(
        output.contains(&format!("CHILD parked {parked} expected {parked}")),
        "{name} ({mode:?}):\n{output}"
    );
    assert_eq!(
        output.lines().filter(|line| line.ends_with(" MATCH")).count(),
        parked,
        "{name} ({mode:?}):\n{output}"
    );
    assert!(!output.contains("MISMATCH"), "{name} ({mode:?}):\n{output}");
    println!("deadlock: {name} ({mode:?}) ... ok");
}

/// Whether this platform counts the program's threads, which a report
/// needs: `/proc/self/stat`'s `num_threads` is filled in (qemu-user 7
/// writes 0 there, and then no deadlock is ever reported).
fn threads_are_counted() -> bool {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after_command = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    after_command.split_whitespace().nth(17).and_then(|n| n.parse::<usize>().ok()).is_some_and(|n| n > 0)
}

fn main() {
    // Nothing is ever reported here: the scenarios that need no report
    // still run, the others would wait for ever.
    let reports = threads_are_counted();
    if !reports {
        println!(
            "deadlock: this platform does not count threads; scenarios that expect a report are skipped"
        );
    }
    for mode in MODES.into_iter().filter(|_| reports) {
        let output = run("recv_alone", mode);
        assert!(output.contains("waits on channel recv at tests/tests/deadlock.rs:"), "{output}");
        assert_matches("recv_alone", mode, &output, 1);
    }

    if reports {
        let output = run("idle_actor", Mode::Engine);
        assert!(output.contains("CHILD actors 1 processes 0 named Some(\"idler\") same true"), "{output}");
        assert!(output.contains("is idle (registered as \"idler\")"), "{output}");
        println!("deadlock: idle_actor (Engine::wait) ... ok");
    }

    for mode in MODES {
        let output = run("recv_with_timeout", mode);
        assert!(output.contains("CHILD result Ok((true, true))"), "{mode:?}:\n{output}");
        println!("deadlock: recv_with_timeout ({mode:?}) ... ok");
    }

    for mode in [Mode::One, Mode::Engine] {
        let output = run("socket_read", mode);
        assert!(output.contains("CHILD result Ok(120)"), "{mode:?}:\n{output}");
        println!("deadlock: socket_read ({mode:?}) ... ok");
    }

    for mode in MODES {
        let output = run("thread_sends_later", mode);
        assert!(output.contains("CHILD result Ok(7)"), "{mode:?}:\n{output}");
        println!("deadlock: thread_sends_later ({mode:?}) ... ok");
    }

    for mode in MODES.into_iter().filter(|_| reports) {
        // Nine waiters, the root, and the gen_server stuck in its call.
        let output = run("every_kind", mode);
        assert!(output.contains("CHILD parked 11 expected 10"), "{mode:?}:\n{output}");
        assert_eq!(output.lines().filter(|line| line.ends_with(" MATCH")).count(), 10, "{mode:?}:\n{output}");
        assert!(!output.contains("MISMATCH"), "{mode:?}:\n{output}");
        println!("deadlock: every_kind ({mode:?}) ... ok");
    }

    for mode in MODES.into_iter().filter(|_| reports) {
        let output = run("join_each_other", mode);
        assert_matches("join_each_other", mode, &output, 3);
    }

    for mode in MODES.into_iter().filter(|_| reports) {
        let output = run("mutex_cycle", mode);
        assert_matches("mutex_cycle", mode, &output, 3);
    }

    for mode in MODES {
        let output = run("ping_pong_with_thread", mode);
        let want = format!("CHILD result Ok({ROUND_TRIPS}) echoed {ROUND_TRIPS}");
        assert!(output.contains(&want), "{mode:?}:\n{output}");
        println!("deadlock: ping_pong_with_thread ({mode:?}) ... ok");
    }

    let output = run("engine_ring", Mode::Engine);
    assert!(output.contains(&format!("CHILD result Ok({RING_HOPS})")), "{output}");
    println!("deadlock: engine_ring ... ok");

    if reports {
        let output = run("other_thread_awake", Mode::One);
        assert!(output.contains("CHILD early Err(Empty)"), "{output}");
        assert!(output.contains("CHILD late Ok(\"deadlock 1\")"), "{output}");
        println!("deadlock: other_thread_awake ... ok");
    }
}
