//! gen_server through the public API: call/cast ordering, typed errors for
//! dead servers, call timeouts, info channels, Down arms watched from a
//! handler (the worker-pool pattern), the arm priority order, terminate,
//! panicking handlers, and servers under a supervisor — on one worker, four
//! workers and four threads.

mod common;
use common::*;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use smarm::{
    CallError, ChildSpec, Down, ExitReason, GenServer, NoProc, Pid, Receiver, Sender, Server, ServerCtx,
    ServerRef, Supervisor, TerminateReason, Watcher,
};

/// A server that logs what it handles into a shared trace.
struct Logger {
    trace: Trace,
    count: u64,
}

enum Call {
    /// Replies with the count of messages handled so far.
    Count,
    /// Sleeps, then replies.
    Slow(Duration),
    /// Panics.
    Panic,
    /// Monitors the pid (through the watcher kept from `init`).
    Watch(Pid),
}

enum Cast {
    Log(String),
    /// Says so on the sender, then blocks the server until the receiver
    /// yields (or closes).
    Gate(Sender<()>, Receiver<()>),
}

impl Logger {
    fn new(trace: &Trace) -> Logger {
        Logger { trace: trace.clone(), count: 0 }
    }
}

/// Logger plus the watcher it keeps from `init`.
struct Watching {
    inner: Logger,
    watcher: Option<Watcher>,
    /// Appended to the `terminate` record, to tell servers apart.
    tag: &'static str,
}

impl GenServer for Watching {
    type Call = Call;
    type Reply = u64;
    type Cast = Cast;
    type Info = String;

    fn init(&mut self, ctx: &ServerCtx) {
        self.watcher = Some(ctx.watcher());
        record(&self.inner.trace, "init");
    }

    fn handle_call(&mut self, request: Call) -> u64 {
        self.inner.count += 1;
        match request {
            Call::Count => {}
            Call::Slow(d) => {
                smarm::sleep(d);
                record(&self.inner.trace, "slow done");
            }
            Call::Panic => panic!("handler panicked on purpose"),
            Call::Watch(pid) => {
                self.watcher.as_ref().unwrap().monitor(pid).unwrap();
            }
        }
        self.inner.count
    }

    fn handle_cast(&mut self, message: Cast) {
        self.inner.count += 1;
        match message {
            Cast::Log(s) => record(&self.inner.trace, format!("cast {s}")),
            Cast::Gate(entered, gate) => {
                record(&self.inner.trace, "gate");
                let _ = entered.send(());
                let _ = gate.recv();
            }
        }
    }

    fn handle_info(&mut self, info: String) {
        self.inner.count += 1;
        record(&self.inner.trace, format!("info {info}"));
    }

    fn handle_down(&mut self, _ctx: &ServerCtx, down: Down) {
        self.inner.count += 1;
        record(&self.inner.trace, format!("down {:?}", down.reason));
    }

    fn terminate(&mut self, reason: TerminateReason) {
        record(&self.inner.trace, format!("terminate {reason:?}{}", self.tag));
    }
}

fn watching(trace: &Trace) -> Server<Watching> {
    tagged(trace, "")
}

fn tagged(trace: &Trace, tag: &'static str) -> Server<Watching> {
    Server::new(Watching { inner: Logger::new(trace), watcher: None, tag })
}

fn take(trace: &Trace) -> Vec<String> {
    std::mem::take(&mut *trace.lock().unwrap())
}

fn strings(events: &[&str]) -> Vec<String> {
    events.iter().map(|e| e.to_string()).collect()
}

fn call_cast_order(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let trace = Trace::default();
        let server = watching(&trace).on_worker(next_worker(workers)).start().unwrap();
        server.cast(Cast::Log("a".into())).unwrap();
        server.cast(Cast::Log("b".into())).unwrap();
        // A call is answered after the casts sent before it.
        assert_eq!(server.call(Call::Count), Ok(3));
        server.cast(Cast::Log("c".into())).unwrap();
        assert_eq!(server.call(Call::Count), Ok(5));
        assert_eq!(take(&trace), strings(&["init", "cast a", "cast b", "cast c"]));

        // Several clients: each one's messages stay in its send order.
        let clients: Vec<_> = (0..3)
            .map(|c| {
                let server = server.clone();
                smarm::spawn_on((c + 1) % workers, move || {
                    for i in 0..50 {
                        server.cast(Cast::Log(format!("{c}.{i}"))).unwrap();
                    }
                    server.call(Call::Count).unwrap();
                })
                .unwrap()
            })
            .collect();
        for client in clients {
            client.join().unwrap();
        }
        let events = take(&trace);
        assert_eq!(events.len(), 150);
        for c in 0..3 {
            let mine: Vec<_> =
                events.iter().filter(|e| e.starts_with(&format!("cast {c}."))).cloned().collect();
            let expected: Vec<_> = (0..50).map(|i| format!("cast {c}.{i}")).collect();
            assert_eq!(mine, expected, "client {c}'s casts reordered");
        }
        assert_eq!(server.call(Call::Count), Ok(5 + 150 + 3 + 1));
        server.stop().unwrap();
    });
}

drive_tests!(call_cast_order => calls_and_casts_are_handled_in_send_order, calls_and_casts_are_handled_in_send_order_on_4_workers, calls_and_casts_are_handled_in_send_order_on_4_threads);

fn dead_server(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let trace = Trace::default();
        let server = watching(&trace).on_worker(next_worker(workers)).start().unwrap();
        let pid = server.pid();
        let watch = smarm::monitor(pid);
        assert_eq!(server.call(Call::Count), Ok(1));
        server.stop().unwrap();
        // stop() returned after terminate ran and the server died.
        assert_eq!(take(&trace), strings(&["init", "terminate Requested"]));
        assert_eq!(watch.rx.recv().unwrap().reason, ExitReason::Normal);
        assert_eq!(server.call(Call::Count), Err(CallError::NoProc(pid)));
        assert_eq!(server.call_timeout(Call::Count, ms(10)), Err(CallError::NoProc(pid)));
        assert_eq!(server.cast(Cast::Log("late".into())), Err(NoProc(pid)));
        assert_eq!(server.stop(), Err(NoProc(pid)));
        // The errors say what happened.
        assert!(CallError::NoProc(pid).to_string().contains("exited"));
    });
}

drive_tests!(dead_server => a_call_to_a_dead_server_is_a_typed_error, a_call_to_a_dead_server_is_a_typed_error_on_4_workers, a_call_to_a_dead_server_is_a_typed_error_on_4_threads);

fn call_timeout(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let trace = Trace::default();
        let server = watching(&trace).on_worker(next_worker(workers)).start().unwrap();
        assert_eq!(server.call_timeout(Call::Slow(ms(100)), ms(5)), Err(CallError::Timeout));
        // The request is still handled; its late reply is dropped, and the
        // server carries on.
        assert_eq!(server.call(Call::Count), Ok(2));
        assert_eq!(take(&trace), strings(&["init", "slow done"]));
        assert_eq!(server.call_timeout(Call::Count, Duration::from_secs(5)), Ok(3));
        server.stop().unwrap();
    });
}

drive_tests!(call_timeout => call_timeout_gives_up_and_the_late_reply_is_harmless, call_timeout_gives_up_and_the_late_reply_is_harmless_on_4_workers, call_timeout_gives_up_and_the_late_reply_is_harmless_on_4_threads);

fn infos(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let trace = Trace::default();
        let (first_tx, first) = smarm::channel::<String>();
        let (second_tx, second) = smarm::channel::<String>();
        let server = watching(&trace)
            .with_info(first)
            .with_info(second)
            .on_worker(next_worker(workers))
            .start()
            .unwrap();
        first_tx.send("one".into()).unwrap();
        second_tx.send("two".into()).unwrap();
        // Sent before the call, and infos rank above the inbox: handled
        // before it.
        assert_eq!(server.call(Call::Count), Ok(3));
        assert_eq!(take(&trace), strings(&["init", "info one", "info two"]));

        // A closed info channel is dropped silently; the server keeps
        // serving the other arms (a closed arm left in the set would be
        // ready forever and starve everything after it).
        drop(first_tx);
        second_tx.send("three".into()).unwrap();
        assert_eq!(server.call(Call::Count), Ok(5));
        drop(second_tx);
        server.cast(Cast::Log("still here".into())).unwrap();
        assert_eq!(server.call(Call::Count), Ok(7));
        assert_eq!(take(&trace), strings(&["info three", "cast still here"]));
        server.stop().unwrap();
    });
}

drive_tests!(infos => handle_info_serves_static_info_channels, handle_info_serves_static_info_channels_on_4_workers, handle_info_serves_static_info_channels_on_4_threads);

fn priority(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let trace = Trace::default();
        let (info_tx, info) = smarm::channel::<String>();
        let server = watching(&trace).with_info(info).on_worker(next_worker(workers)).start().unwrap();
        let (victim_go, victim_rx) = smarm::channel::<()>();
        let victim = smarm::spawn_on(next_worker(workers), move || {
            let _ = victim_rx.recv();
        })
        .unwrap();
        server.call(Call::Watch(victim.pid())).unwrap();

        // Hold the server inside a handler while one message of each kind
        // arrives, inbox first.
        let (open, gate) = smarm::channel::<()>();
        let (entered_tx, entered) = smarm::channel::<()>();
        server.cast(Cast::Gate(entered_tx, gate)).unwrap();
        entered.recv().unwrap();
        server.cast(Cast::Log("inbox".into())).unwrap();
        info_tx.send("info".into()).unwrap();
        let watch = smarm::monitor(victim.pid());
        drop(victim_go);
        assert_eq!(watch.rx.recv().unwrap().reason, ExitReason::Normal);
        drop(open);
        server.call(Call::Count).unwrap();
        // Downs, then infos, then the inbox.
        assert_eq!(take(&trace), strings(&["init", "gate", "down Normal", "info info", "cast inbox"]));
        server.stop().unwrap();
    });
}

drive_tests!(priority => arms_are_served_downs_then_infos_then_inbox, arms_are_served_downs_then_infos_then_inbox_on_4_workers, arms_are_served_downs_then_infos_then_inbox_on_4_threads);

/// The motivating pattern of gen_server: a pool server that spawns its workers
/// inside a handler, watches them there, and replaces the ones that crash.
struct Pool {
    workers: usize,
    watcher: Option<Watcher>,
    jobs: HashMap<Pid, Sender<bool>>,
    deaths: Vec<(Pid, ExitReason)>,
}

enum PoolCall {
    /// Spawns and watches a worker; replies with its pid.
    Spawn,
    /// Tells a worker to finish (`true`: by crashing).
    Finish(Pid, bool),
    /// The live workers and the deaths seen.
    Status,
}

enum PoolReply {
    Spawned(Pid),
    Done,
    Status(Vec<Pid>, Vec<(Pid, ExitReason)>),
}

impl Pool {
    fn spawn_worker(&mut self, watcher: &Watcher) -> Pid {
        let (tx, rx) = smarm::channel::<bool>();
        let worker = self.jobs.len() % self.workers;
        let handle = smarm::spawn_on(worker, move || {
            if rx.recv() == Ok(true) {
                panic!("worker crashed");
            }
        })
        .unwrap();
        let pid = handle.pid();
        watcher.monitor(pid).unwrap();
        self.jobs.insert(pid, tx);
        pid
    }
}

impl GenServer for Pool {
    type Call = PoolCall;
    type Reply = PoolReply;
    type Cast = ();
    type Info = ();

    fn init(&mut self, ctx: &ServerCtx) {
        self.watcher = Some(ctx.watcher());
    }

    fn handle_call(&mut self, request: PoolCall) -> PoolReply {
        match request {
            PoolCall::Spawn => {
                let watcher = self.watcher.clone().unwrap();
                PoolReply::Spawned(self.spawn_worker(&watcher))
            }
            PoolCall::Finish(pid, crash) => {
                self.jobs[&pid].send(crash).unwrap();
                PoolReply::Done
            }
            PoolCall::Status => {
                let mut live: Vec<Pid> = self.jobs.keys().copied().collect();
                live.sort();
                PoolReply::Status(live, self.deaths.clone())
            }
        }
    }

    fn handle_cast(&mut self, _: ()) {}

    fn handle_down(&mut self, ctx: &ServerCtx, down: Down) {
        self.jobs.remove(&down.pid);
        self.deaths.push((down.pid, down.reason.clone()));
        if down.reason.is_abnormal() {
            // Replace it, watching through the context this time.
            let watcher = ctx.watcher();
            self.spawn_worker(&watcher);
        }
    }
}

fn worker_pool(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let pool = Server::new(Pool { workers, watcher: None, jobs: HashMap::new(), deaths: Vec::new() })
            .on_worker(next_worker(workers))
            .start()
            .unwrap();
        let spawned: Vec<Pid> = (0..3)
            .map(|_| match pool.call(PoolCall::Spawn).unwrap() {
                PoolReply::Spawned(pid) => pid,
                _ => unreachable!(),
            })
            .collect();
        let watches: Vec<_> = spawned.iter().map(|&pid| smarm::monitor(pid)).collect();
        assert!(matches!(pool.call(PoolCall::Finish(spawned[1], true)), Ok(PoolReply::Done)));
        assert!(matches!(pool.call(PoolCall::Finish(spawned[0], false)), Ok(PoolReply::Done)));
        for w in &watches[..2] {
            w.rx.recv().unwrap();
        }
        // The pool's Downs were delivered before ours, and Downs outrank
        // calls: the status reflects both deaths.
        let PoolReply::Status(live, deaths) = pool.call(PoolCall::Status).unwrap() else { unreachable!() };
        assert_eq!(deaths.len(), 2, "{deaths:?}");
        let crashed = ExitReason::Panicked("worker crashed".into());
        assert!(deaths.contains(&(spawned[1], crashed)));
        assert!(deaths.contains(&(spawned[0], ExitReason::Normal)));
        // The crashed worker was replaced; the one that finished was not.
        assert_eq!(live.len(), 2);
        assert!(live.contains(&spawned[2]));
        let replacement = *live.iter().find(|&&p| p != spawned[2]).unwrap();
        assert!(!spawned.contains(&replacement));

        // The replacement is watched too.
        let watch = smarm::monitor(replacement);
        pool.call(PoolCall::Finish(replacement, true)).unwrap();
        watch.rx.recv().unwrap();
        let PoolReply::Status(live, deaths) = pool.call(PoolCall::Status).unwrap() else { unreachable!() };
        assert_eq!((live.len(), deaths.len()), (2, 3));
        for pid in live {
            pool.call(PoolCall::Finish(pid, false)).unwrap();
        }
        pool.stop().unwrap();
    });
}

drive_tests!(worker_pool => handle_down_sees_workers_spawned_and_watched_in_a_handler, handle_down_sees_workers_spawned_and_watched_in_a_handler_on_4_workers, handle_down_sees_workers_spawned_and_watched_in_a_handler_on_4_threads);

fn terminate(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let trace = Trace::default();
        // stop(): after the messages already queued.
        let server = watching(&trace).on_worker(next_worker(workers)).start().unwrap();
        server.cast(Cast::Log("queued".into())).unwrap();
        server.stop().unwrap();
        assert_eq!(take(&trace), strings(&["init", "cast queued", "terminate Requested"]));

        // The last reference dropped.
        let server = watching(&trace).on_worker(next_worker(workers)).start().unwrap();
        let watch = smarm::monitor(server.pid());
        drop(server);
        assert_eq!(watch.rx.recv().unwrap().reason, ExitReason::Normal);
        assert_eq!(take(&trace), strings(&["init", "terminate Dropped"]));

        // request_stop: the server unwinds, and terminate still runs.
        let server = watching(&trace).on_worker(next_worker(workers)).start().unwrap();
        server.call(Call::Count).unwrap();
        let watch = smarm::monitor(server.pid());
        smarm::request_stop(server.pid()).unwrap();
        assert_eq!(watch.rx.recv().unwrap().reason, ExitReason::Stopped);
        assert_eq!(take(&trace), strings(&["init", "terminate Unwinding"]));
        assert_eq!(server.call(Call::Count), Err(CallError::NoProc(server.pid())));
    });
}

drive_tests!(terminate => terminate_runs_however_the_server_ends, terminate_runs_however_the_server_ends_on_4_workers, terminate_runs_however_the_server_ends_on_4_threads);

fn panicking_handler(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let trace = Trace::default();
        let server = watching(&trace).on_worker(next_worker(workers)).start().unwrap();
        let pid = server.pid();
        let watch = smarm::monitor(pid);
        // Hold the server at a gate while two callers queue up: the one that
        // panics it, and one behind it.
        let (open, gate) = smarm::channel::<()>();
        let (entered_tx, entered) = smarm::channel::<()>();
        server.cast(Cast::Gate(entered_tx, gate)).unwrap();
        entered.recv().unwrap();
        let (queued_tx, queued) = smarm::channel::<()>();
        let (results_tx, results) = smarm::channel::<(usize, Result<u64, CallError>)>();
        let callers: Vec<_> = [Call::Panic, Call::Count]
            .into_iter()
            .enumerate()
            .map(|(index, request)| {
                let (server, queued_tx, results_tx) = (server.clone(), queued_tx.clone(), results_tx.clone());
                // On our worker: it runs from the notice to its park in
                // `call` without a switch, so its request is queued once we
                // hear from it.
                smarm::spawn(move || {
                    queued_tx.send(()).unwrap();
                    let _ = results_tx.send((index, server.call(request)));
                })
                .unwrap()
            })
            .collect();
        drop(results_tx);
        for _ in 0..2 {
            queued.recv().unwrap();
        }
        drop(open);
        let reason = watch.rx.recv().unwrap().reason;
        assert_eq!(reason, ExitReason::Panicked("handler panicked on purpose".into()));
        // Neither caller hangs: the one being served and the one queued
        // behind it both learn that the server died.
        let mut got: Vec<_> = std::iter::from_fn(|| results.recv().ok()).collect();
        got.sort_by_key(|(index, _)| *index);
        assert_eq!(got, vec![(0, Err(CallError::Dead(pid))), (1, Err(CallError::Dead(pid)))]);
        for caller in callers {
            caller.join().unwrap();
        }
        assert_eq!(take(&trace), strings(&["init", "gate", "terminate Unwinding"]));
        assert_eq!(server.call(Call::Count), Err(CallError::NoProc(pid)));
    });
}

drive_tests!(panicking_handler => a_panicking_handler_ends_the_server_and_its_callers_get_errors, a_panicking_handler_ends_the_server_and_its_callers_get_errors_on_4_workers, a_panicking_handler_ends_the_server_and_its_callers_get_errors_on_4_threads);

fn supervised(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let trace = Trace::default();
        // A restartable server: the start function builds a fresh one and
        // publishes its reference.
        let current: Arc<Mutex<Option<ServerRef<Watching>>>> = Arc::default();
        let (started_tx, started) = smarm::channel::<()>();
        let spec = {
            let (trace, current) = (trace.clone(), current.clone());
            ChildSpec::new("logger", move || {
                let server = tagged(&trace, " logger").on_worker(1 % workers).start()?;
                *current.lock().unwrap() = Some(server.clone());
                let _ = started_tx.send(());
                Ok::<_, smarm::SpawnError>(server)
            })
        };
        let sup = Supervisor::new().child(spec).start().unwrap();
        started.recv().unwrap();
        let first = current.lock().unwrap().clone().unwrap();
        assert_eq!(first.call(Call::Count), Ok(1));
        assert_eq!(sup.child_pid("logger").unwrap(), Some(first.pid()));

        // It crashes; the supervisor starts a fresh one.
        assert_eq!(first.call(Call::Panic), Err(CallError::Dead(first.pid())));
        started.recv().unwrap();
        let second = current.lock().unwrap().clone().unwrap();
        assert_ne!(second.pid(), first.pid());
        assert_eq!(second.call(Call::Count), Ok(1), "the restarted server has fresh state");

        // A one-shot server started under the supervisor, after it.
        let extra = tagged(&trace, " extra").start_under(&sup, "extra").unwrap();
        assert_eq!(extra.call(Call::Count), Ok(1));
        let names: Vec<String> = sup.which_children().unwrap().into_iter().map(|c| c.name).collect();
        assert_eq!(names, strings(&["logger", "extra"]));
        take(&trace);

        // Ordered shutdown stops the servers gracefully, the later one first.
        sup.stop().unwrap();
        assert_eq!(take(&trace), strings(&["terminate Requested extra", "terminate Requested logger"]));
        assert_eq!(extra.call(Call::Count), Err(CallError::NoProc(extra.pid())));
        assert_eq!(second.call(Call::Count), Err(CallError::NoProc(second.pid())));
    });
}

drive_tests!(supervised => a_supervised_server_is_restarted_and_stopped_gracefully, a_supervised_server_is_restarted_and_stopped_gracefully_on_4_workers, a_supervised_server_is_restarted_and_stopped_gracefully_on_4_threads);
