//! Supervisors through the public API: which children each strategy
//! cycles and in which order, restart policies, restart intensity, ordered
//! shutdown and nesting — traced, on one worker, four workers and four
//! threads.

mod common;
use common::*;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use smarm::{
    Child, ChildInfo, ChildSpec, ExitReason, ExitSignal, Receiver, Restart, Sender, Shutdown, SpawnError,
    StartError, Strategy, Supervisor, SupervisorError, SupervisorRef,
};

/// What the test tells a child to do.
#[derive(Debug)]
enum Cmd {
    Crash,
    Exit,
}

/// The children under test. Each instance records `start NAME` (in the
/// supervisor process, at every start), `crash NAME` / `exit NAME` when told
/// to end, and `stop NAME` when it is stopped. Each instance also announces
/// itself on `started` once it runs, so the test can wait for a restart to
/// finish (a child stopped before it ever ran would record nothing).
#[derive(Clone)]
struct Kids {
    trace: Trace,
    commands: Arc<Mutex<HashMap<String, Sender<Cmd>>>>,
    started: Sender<String>,
    workers: usize,
    placed: Arc<AtomicUsize>,
}

impl Kids {
    fn new(workers: usize) -> (Kids, Receiver<String>) {
        let (started, started_rx) = smarm::channel();
        let kids = Kids {
            trace: Trace::default(),
            commands: Arc::default(),
            started,
            workers,
            placed: Arc::default(),
        };
        (kids, started_rx)
    }

    /// A worker child: spread round-robin over the workers.
    fn spec(&self, name: &str) -> ChildSpec {
        let kids = self.clone();
        let name = name.to_string();
        ChildSpec::new(name.clone(), move || {
            record(&kids.trace, format!("start {name}"));
            let (tx, rx) = smarm::channel::<Cmd>();
            kids.commands.lock().unwrap().insert(name.clone(), tx);
            let worker = kids.placed.fetch_add(1, Ordering::Relaxed) % kids.workers;
            let (trace, me, started) = (kids.trace.clone(), name.clone(), kids.started.clone());
            smarm::spawn_on(worker, move || child_body(trace, me, started, rx))
        })
    }

    /// A child supervisor named `name`, rebuilt by `build` at every start.
    fn sub(&self, name: &str, build: impl Fn(&Kids) -> Supervisor + Send + 'static) -> ChildSpec {
        let kids = self.clone();
        let name = name.to_string();
        ChildSpec::supervisor(name.clone(), move || {
            record(&kids.trace, format!("start {name}"));
            let _ = kids.started.send(name.clone());
            build(&kids)
        })
    }

    /// Starts a supervisor with `strategy` over the children `names`, in
    /// order, and waits until every one has started.
    fn start(&self, strategy: Strategy, names: &[&str], started: &Receiver<String>) -> SupervisorRef {
        let sup = names
            .iter()
            .fold(Supervisor::new().strategy(strategy), |sup, name| sup.child(self.spec(name)))
            .start()
            .unwrap();
        await_starts(started, names);
        sup
    }

    fn tell(&self, name: &str, cmd: Cmd) {
        let tx = self.commands.lock().unwrap().get(name).cloned().expect("no such child");
        tx.send(cmd).unwrap();
    }

    /// Takes the trace so far.
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.trace.lock().unwrap())
    }
}

/// Records `stop NAME` when dropped while still armed: when the process is
/// stopped rather than told to end.
struct OnStop {
    trace: Trace,
    name: String,
    armed: bool,
}

impl Drop for OnStop {
    fn drop(&mut self) {
        if self.armed {
            record(&self.trace, format!("stop {}", self.name));
        }
    }
}

fn child_body(trace: Trace, name: String, started: Sender<String>, commands: Receiver<Cmd>) {
    let mut guard = OnStop { trace: trace.clone(), name: name.clone(), armed: true };
    let _ = started.send(name.clone());
    let command = commands.recv();
    guard.armed = false;
    match command {
        Ok(Cmd::Crash) => {
            record(&trace, format!("crash {name}"));
            panic!("{name} crashed on purpose");
        }
        Ok(Cmd::Exit) => record(&trace, format!("exit {name}")),
        Err(_) => {}
    }
}

/// Waits until the children `names` run (in any order: they may run on
/// different workers; the start order is checked on the trace).
fn await_starts(started: &Receiver<String>, names: &[&str]) {
    let mut got: Vec<String> = names.iter().map(|_| started.recv().unwrap()).collect();
    let mut expected = strings(names);
    got.sort();
    expected.sort();
    assert_eq!(got, expected, "unexpected starts");
}

fn pids(sup: &SupervisorRef) -> Vec<Option<smarm::Pid>> {
    sup.which_children().unwrap().into_iter().map(|c| c.pid).collect()
}

fn all_dead(pids: &[Option<smarm::Pid>]) -> bool {
    let rt = smarm::current_runtime().unwrap();
    pids.iter().flatten().all(|pid| !rt.is_alive(*pid))
}

fn strings(events: &[&str]) -> Vec<String> {
    events.iter().map(|e| e.to_string()).collect()
}

fn one_for_one(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let (kids, started) = Kids::new(workers);
        let sup = kids.start(Strategy::OneForOne, &["a", "b", "c"], &started);
        assert_eq!(kids.take(), strings(&["start a", "start b", "start c"]));
        let before = pids(&sup);
        assert!(before.iter().all(Option::is_some));

        kids.tell("b", Cmd::Crash);
        await_starts(&started, &["b"]);
        assert_eq!(kids.take(), strings(&["crash b", "start b"]));
        let after = pids(&sup);
        assert_eq!((after[0], after[2]), (before[0], before[2]), "a sibling was cycled");
        assert_ne!(after[1], before[1]);

        sup.stop().unwrap();
        assert_eq!(kids.take(), strings(&["stop c", "stop b", "stop a"]));
        assert!(all_dead(&after), "stop returned before the children were dead");
    });
}

drive_tests!(one_for_one => one_for_one_restarts_only_the_dead_child, one_for_one_restarts_only_the_dead_child_on_4_workers, one_for_one_restarts_only_the_dead_child_on_4_threads);

fn one_for_all(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let (kids, started) = Kids::new(workers);
        let sup = kids.start(Strategy::OneForAll, &["a", "b", "c"], &started);
        kids.take();
        let before = pids(&sup);

        kids.tell("b", Cmd::Crash);
        await_starts(&started, &["a", "b", "c"]);
        // Survivors stopped in reverse start order, then all restarted in
        // start order.
        assert_eq!(kids.take(), strings(&["crash b", "stop c", "stop a", "start a", "start b", "start c"]));
        let after = pids(&sup);
        assert!(before.iter().zip(&after).all(|(b, a)| b != a), "a child was not cycled");
        assert!(all_dead(&before));

        sup.stop().unwrap();
        assert_eq!(kids.take(), strings(&["stop c", "stop b", "stop a"]));
    });
}

drive_tests!(one_for_all => one_for_all_cycles_every_child, one_for_all_cycles_every_child_on_4_workers, one_for_all_cycles_every_child_on_4_threads);

fn rest_for_one(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let (kids, started) = Kids::new(workers);
        let sup = kids.start(Strategy::RestForOne, &["a", "b", "c", "d"], &started);
        kids.take();
        let before = pids(&sup);

        kids.tell("b", Cmd::Crash);
        await_starts(&started, &["b", "c", "d"]);
        assert_eq!(kids.take(), strings(&["crash b", "stop d", "stop c", "start b", "start c", "start d"]));
        let after = pids(&sup);
        assert_eq!(after[0], before[0], "a child started before the dead one was cycled");
        assert!(before[1..].iter().zip(&after[1..]).all(|(b, a)| b != a));

        // The last child has no rest: only it restarts.
        kids.tell("d", Cmd::Crash);
        await_starts(&started, &["d"]);
        assert_eq!(kids.take(), strings(&["crash d", "start d"]));

        sup.stop().unwrap();
        assert_eq!(kids.take(), strings(&["stop d", "stop c", "stop b", "stop a"]));
    });
}

drive_tests!(rest_for_one => rest_for_one_cycles_the_children_started_after, rest_for_one_cycles_the_children_started_after_on_4_workers, rest_for_one_cycles_the_children_started_after_on_4_threads);

fn restart_policies(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let (kids, started) = Kids::new(workers);
        let sup = Supervisor::new()
            .intensity(10, Duration::from_secs(60))
            .child(kids.spec("perm"))
            .child(kids.spec("trans").restart(Restart::Transient))
            .child(kids.spec("temp").restart(Restart::Temporary))
            .start()
            .unwrap();
        await_starts(&started, &["perm", "trans", "temp"]);
        kids.take();

        // Permanent: restarted even after a normal exit.
        kids.tell("perm", Cmd::Exit);
        await_starts(&started, &["perm"]);
        assert_eq!(kids.take(), strings(&["exit perm", "start perm"]));

        // Transient: restarted after a crash...
        kids.tell("trans", Cmd::Crash);
        await_starts(&started, &["trans"]);
        assert_eq!(kids.take(), strings(&["crash trans", "start trans"]));

        // ...but not after a normal exit: it stays listed, not running.
        let trans = sup.child_pid("trans").unwrap().unwrap();
        let watch = smarm::monitor(trans);
        kids.tell("trans", Cmd::Exit);
        assert_eq!(watch.rx.recv().unwrap().reason, ExitReason::Normal);
        // The supervisor's Down was queued before ours, and it serves Downs
        // before requests: the answer reflects the exit.
        let children = sup.which_children().unwrap();
        assert_eq!(children[1], ChildInfo { name: "trans".into(), pid: None, restart: Restart::Transient });

        // Temporary: never restarted, even after a crash, and forgotten.
        let temp = sup.child_pid("temp").unwrap().unwrap();
        let watch = smarm::monitor(temp);
        kids.tell("temp", Cmd::Crash);
        assert!(watch.rx.recv().unwrap().reason.is_abnormal());
        let names: Vec<String> = sup.which_children().unwrap().into_iter().map(|c| c.name).collect();
        assert_eq!(names, strings(&["perm", "trans"]));
        assert_eq!(kids.take(), strings(&["exit trans", "crash temp"]));
        assert_eq!(started.try_recv(), Err(smarm::TryRecvError::Empty), "something restarted");

        sup.stop().unwrap();
        assert_eq!(kids.take(), strings(&["stop perm"]));
    });
}

drive_tests!(restart_policies => restart_policy_decides_whether_anything_restarts, restart_policy_decides_whether_anything_restarts_on_4_workers, restart_policy_decides_whether_anything_restarts_on_4_threads);

fn intensity(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let (kids, started) = Kids::new(workers);
        let sup = Supervisor::new()
            .strategy(Strategy::OneForOne)
            .intensity(2, Duration::from_secs(60))
            .child(kids.spec("a"))
            .child(kids.spec("b"))
            .child(kids.spec("c"))
            .start()
            .unwrap();
        await_starts(&started, &["a", "b", "c"]);
        kids.take();
        let watch = smarm::monitor(sup.pid());
        for _ in 0..2 {
            kids.tell("b", Cmd::Crash);
            await_starts(&started, &["b"]);
        }
        let last = pids(&sup);
        kids.tell("b", Cmd::Crash);
        // The third restart within the window is one too many: the
        // supervisor shuts its children down and dies abnormally.
        let down = watch.rx.recv().unwrap();
        assert!(down.reason.is_abnormal(), "{:?}", down.reason);
        match &down.reason {
            ExitReason::Panicked(message) => assert!(message.contains("intensity"), "{message}"),
            other => panic!("unexpected reason {other:?}"),
        }
        assert_eq!(
            kids.take(),
            strings(&["crash b", "start b", "crash b", "start b", "crash b", "stop c", "stop a"])
        );
        assert!(all_dead(&last));
        assert_eq!(started.try_recv(), Err(smarm::TryRecvError::Empty));
        assert_eq!(sup.which_children(), Err(SupervisorError::NoProc(sup.pid())));
        assert_eq!(sup.stop(), Err(SupervisorError::NoProc(sup.pid())));
    });
}

drive_tests!(intensity => intensity_exceeded_stops_the_supervisor_abnormally, intensity_exceeded_stops_the_supervisor_abnormally_on_4_workers, intensity_exceeded_stops_the_supervisor_abnormally_on_4_threads);

fn ordered_shutdown(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let (kids, started) = Kids::new(workers);
        let build = |kids: &Kids| {
            Supervisor::new()
                .child(kids.spec("a"))
                .child(kids.spec("b"))
                .child(kids.spec("c"))
                .child(kids.spec("d"))
        };
        let sup = build(&kids).start().unwrap();
        await_starts(&started, &["a", "b", "c", "d"]);
        kids.take();
        let children = pids(&sup);
        let watch = smarm::monitor(sup.pid());
        sup.stop().unwrap();
        // stop() returned after the whole shutdown: nothing left to wait for.
        assert_eq!(kids.take(), strings(&["stop d", "stop c", "stop b", "stop a"]));
        assert!(all_dead(&children));
        assert_eq!(watch.rx.recv().unwrap().reason, ExitReason::Normal);

        // Dropping the last reference does the same ordered shutdown.
        let sup = build(&kids).start().unwrap();
        await_starts(&started, &["a", "b", "c", "d"]);
        kids.take();
        let second = sup.clone();
        let watch = smarm::monitor(sup.pid());
        drop(sup);
        smarm::sleep(ms(1));
        assert!(kids.take().is_empty(), "shut down while a reference was left");
        drop(second);
        assert_eq!(watch.rx.recv().unwrap().reason, ExitReason::Normal);
        assert_eq!(kids.take(), strings(&["stop d", "stop c", "stop b", "stop a"]));
    });
}

drive_tests!(ordered_shutdown => ordered_shutdown_stops_children_in_reverse_start_order, ordered_shutdown_stops_children_in_reverse_start_order_on_4_workers, ordered_shutdown_stops_children_in_reverse_start_order_on_4_threads);

fn nested(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let (kids, started) = Kids::new(workers);
        let top = Supervisor::new()
            .strategy(Strategy::OneForOne)
            .child(kids.spec("a"))
            .child(kids.sub("sub", |kids| {
                Supervisor::new()
                    .strategy(Strategy::OneForAll)
                    .intensity(1, Duration::from_secs(60))
                    .child(kids.spec("x"))
                    .child(kids.spec("y"))
            }))
            .child(kids.spec("c"))
            .start()
            .unwrap();
        await_starts(&started, &["a", "sub", "x", "y", "c"]);
        assert_eq!(kids.take(), strings(&["start a", "start sub", "start x", "start y", "start c"]));

        // The inner supervisor handles its own child's crash.
        let sub = top.child_pid("sub").unwrap().unwrap();
        kids.tell("x", Cmd::Crash);
        await_starts(&started, &["x", "y"]);
        assert_eq!(kids.take(), strings(&["crash x", "stop y", "start x", "start y"]));
        assert_eq!(top.child_pid("sub").unwrap(), Some(sub));

        // A second crash exceeds its intensity: it shuts down and dies, and
        // the outer supervisor restarts it (and with it, its children).
        let watch = smarm::monitor(sub);
        kids.tell("y", Cmd::Crash);
        await_starts(&started, &["sub", "x", "y"]);
        assert!(matches!(watch.rx.recv().unwrap().reason, ExitReason::Panicked(_)));
        assert_eq!(kids.take(), strings(&["crash y", "stop x", "start sub", "start x", "start y"]));
        let new_sub = top.child_pid("sub").unwrap().unwrap();
        assert_ne!(new_sub, sub);

        // Ordered shutdown goes depth-first, in reverse start order.
        top.stop().unwrap();
        assert_eq!(kids.take(), strings(&["stop c", "stop y", "stop x", "stop a"]));
        assert!(!smarm::current_runtime().unwrap().is_alive(new_sub));
    });
}

drive_tests!(nested => nested_supervisors_restart_and_shut_down_depth_first, nested_supervisors_restart_and_shut_down_depth_first_on_4_workers, nested_supervisors_restart_and_shut_down_depth_first_on_4_threads);

fn dynamic_children(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let (kids, started) = Kids::new(workers);
        let sup = Supervisor::new().child(kids.spec("a")).start().unwrap();
        await_starts(&started, &["a"]);

        // Added children go after the existing ones, restart like them, and
        // names stay unique.
        let b = sup.start_child(kids.spec("b")).unwrap();
        await_starts(&started, &["b"]);
        assert_eq!(sup.child_pid("b").unwrap(), Some(b));
        assert_eq!(sup.start_child(kids.spec("b")), Err(SupervisorError::DuplicateName("b".into())));
        kids.tell("b", Cmd::Crash);
        await_starts(&started, &["b"]);

        // A supervisor started under another one, once (Temporary).
        let inner = Supervisor::new().child(kids.spec("x")).start_under(&sup, "inner").unwrap();
        await_starts(&started, &["x"]);
        let names: Vec<String> = sup.which_children().unwrap().into_iter().map(|c| c.name).collect();
        assert_eq!(names, strings(&["a", "b", "inner"]));
        assert_eq!(sup.child_pid("inner").unwrap(), Some(inner.pid()));

        // A failing child start fails the whole start, naming the child, and
        // the children already started are stopped again.
        kids.take();
        let failing = Supervisor::new()
            .child(kids.spec("p"))
            .child(ChildSpec::new("broken", || Err::<smarm::JoinHandle, _>(SpawnError::Full)))
            .child(kids.spec("never"))
            .start();
        assert_eq!(
            failing.unwrap_err(),
            SupervisorError::ChildStart {
                child: "broken".into(),
                error: StartError::Spawn(SpawnError::Full)
            }
        );
        // `p` was started and stopped again (perhaps before it ever ran);
        // `never` was never started.
        let events = kids.take();
        assert_eq!(events[0], "start p", "{events:?}");
        assert!(events[1..].iter().all(|e| e == "stop p"), "{events:?}");
        while let Ok(name) = started.try_recv() {
            assert_eq!(name, "p");
        }
        assert_eq!(
            Supervisor::new().child(kids.spec("q")).child(kids.spec("q")).start().unwrap_err(),
            SupervisorError::DuplicateName("q".into())
        );

        kids.take();
        sup.stop().unwrap();
        assert_eq!(kids.take(), strings(&["stop x", "stop b", "stop a"]));
        assert_eq!(inner.which_children(), Err(SupervisorError::NoProc(inner.pid())));
    });
}

drive_tests!(dynamic_children => children_added_at_run_time_and_start_failures, children_added_at_run_time_and_start_failures_on_4_workers, children_added_at_run_time_and_start_failures_on_4_threads);

/// Whether the trace holds `event`.
fn traced(trace: &Trace, event: &str) -> bool {
    trace.lock().unwrap().iter().any(|e| e == event)
}

/// A child whose graceful stop does nothing, so a `Shutdown::Timeout`
/// kills it. Its cleanup (run as the kill unwinds it) waits until `stop a`
/// is traced, or 50 ms, and then traces `cleaned b`.
fn unstoppable_b(kids: &Kids) -> ChildSpec {
    let kids = kids.clone();
    ChildSpec::new("b", move || {
        let (trace, started) = (kids.trace.clone(), kids.started.clone());
        let worker = kids.placed.fetch_add(1, Ordering::Relaxed) % kids.workers;
        let handle = smarm::spawn_on(worker, move || {
            struct Cleanup(Trace);
            impl Drop for Cleanup {
                fn drop(&mut self) {
                    let deadline = smarm::now().unwrap() + ms(50);
                    while !traced(&self.0, "stop a") && smarm::now().unwrap() < deadline {
                        smarm::yield_now();
                    }
                    record(&self.0, "cleaned b");
                }
            }
            let _cleanup = Cleanup(trace);
            let _ = started.send("b".to_string());
            loop {
                smarm::sleep(Duration::from_secs(60));
            }
        })?;
        Ok::<_, StartError>(Child::with_stop(handle.pid(), || {}))
    })
}

/// OTP waits for the 'DOWN' after killing a child at its shutdown timeout
/// before it stops the next one: the killed child's cleanup finishes before
/// its older sibling is stopped.
fn timeout_kill_awaited(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let (kids, started) = Kids::new(workers);
        let sup = Supervisor::new()
            .child(kids.spec("a"))
            .child(unstoppable_b(&kids).shutdown(Shutdown::Timeout(ms(500))))
            .start()
            .unwrap();
        await_starts(&started, &["a", "b"]);
        kids.take();
        let children = pids(&sup);
        let watch_b = smarm::monitor(children[1].unwrap());
        sup.stop().unwrap();
        assert_eq!(kids.take(), strings(&["cleaned b", "stop a"]), "a was stopped while b still cleaned up");
        assert_eq!(watch_b.rx.recv().unwrap().reason, ExitReason::Killed);
        assert!(all_dead(&children));
    });
}

drive_tests!(timeout_kill_awaited => a_child_killed_at_its_timeout_is_awaited_before_the_next_is_stopped, a_child_killed_at_its_timeout_is_awaited_on_4_workers, a_child_killed_at_its_timeout_is_awaited_on_4_threads);

/// A plain child that traps exits. It traces `signal NAME` when the exit
/// signal arrives and hands the signal over on `signals`; then a
/// `stubborn` one carries on (and traces `stop NAME` when killed), a polite
/// one traces `return NAME` and returns.
fn trapper(kids: &Kids, name: &str, stubborn: bool, signals: Sender<ExitSignal>) -> ChildSpec {
    let kids = kids.clone();
    let name = name.to_string();
    ChildSpec::new(name.clone(), move || {
        let (trace, started, signals, me) =
            (kids.trace.clone(), kids.started.clone(), signals.clone(), name.clone());
        let worker = kids.placed.fetch_add(1, Ordering::Relaxed) % kids.workers;
        smarm::spawn_on(worker, move || {
            let exits = smarm::trap_exit().unwrap();
            let mut guard = OnStop { trace: trace.clone(), name: me.clone(), armed: true };
            let _ = started.send(me.clone());
            let signal = exits.recv().unwrap();
            record(&trace, format!("signal {me}"));
            let _ = signals.send(signal);
            if stubborn {
                loop {
                    smarm::sleep(Duration::from_secs(60));
                }
            }
            guard.armed = false;
            record(&trace, format!("return {me}"));
        })
    })
}

/// OTP shuts a child down with exit(Child, shutdown): a child trapping
/// exits gets the signal as a message and may clean up and end on its own;
/// one that does not end is killed when its timeout expires.
fn trapping_child_shutdown(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let (kids, started) = Kids::new(workers);
        let (signals_tx, signals) = smarm::channel();
        let sup = Supervisor::new()
            .child(
                trapper(&kids, "polite", false, signals_tx.clone()).shutdown(Shutdown::Timeout(ms(10_000))),
            )
            .child(trapper(&kids, "stubborn", true, signals_tx).shutdown(Shutdown::Timeout(ms(100))))
            .start()
            .unwrap();
        await_starts(&started, &["polite", "stubborn"]);
        kids.take();
        let children = pids(&sup);
        let watches: Vec<_> = children.iter().map(|pid| smarm::monitor(pid.unwrap())).collect();
        sup.stop().unwrap();
        assert_eq!(
            kids.take(),
            strings(&["signal stubborn", "stop stubborn", "signal polite", "return polite"]),
            "a trapping child was not sent the shutdown exit signal"
        );
        let shutdown = ExitSignal { from: sup.pid(), reason: ExitReason::Shutdown };
        assert_eq!(signals.try_iter().collect::<Vec<_>>(), vec![shutdown.clone(), shutdown]);
        assert_eq!(watches[0].rx.recv().unwrap().reason, ExitReason::Normal);
        assert_eq!(watches[1].rx.recv().unwrap().reason, ExitReason::Killed);
        assert!(all_dead(&children));
    });
}

drive_tests!(trapping_child_shutdown => a_trapping_child_is_sent_a_shutdown_exit_signal, a_trapping_child_is_sent_a_shutdown_exit_signal_on_4_workers, a_trapping_child_is_sent_a_shutdown_exit_signal_on_4_threads);
