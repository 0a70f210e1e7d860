//! The services around handler actors: inboxes and asks for code outside
//! the actors, the external sender, administration, statistics,
//! extensions, the remote-sink seam and the process listing — on one
//! worker, four workers on one thread and the four-thread Engine.

mod common;
use common::{ms, Drive};

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use smarm::actor::{Disconnected, InboxRecvError};
use smarm::{
    Actor, ActorAddress, ActorSendError, ActorStatus, Addr, Config, Ctx, ExitReason, RemoteEnvelope,
    RemoteSink, ReplyTo, RuntimeExtension, SpawnInfo, Stepper, WorkerCtx, WorkerExtension,
};

fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(10), "gave up waiting until {what}");
        match smarm::self_pid() {
            Some(_) => smarm::sleep(ms(1)),
            None => std::thread::sleep(ms(1)),
        }
    }
}

/// Joins `thread` without blocking the worker when called from a process
/// (a single-threaded host drives every worker from that same thread).
fn join_thread<T>(thread: std::thread::JoinHandle<T>) -> T {
    wait_until("the thread finished", || thread.is_finished());
    thread.join().unwrap()
}

/// A minimal executor: polls `f` on this thread, sleeping between wakes.
fn block_on<F: Future>(f: F) -> F::Output {
    struct ThreadWaker(std::thread::Thread);
    impl Wake for ThreadWaker {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        match f.as_mut().poll(&mut cx) {
            Poll::Ready(v) => return v,
            Poll::Pending => std::thread::park(),
        }
    }
}

/// Counts its drops.
struct Counted(Arc<AtomicUsize>);
impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Answers questions; can be told to sit on the next one, to stop, or to
/// panic.
struct Oracle {
    held: Vec<ReplyTo<Counted>>,
    drops: Arc<AtomicUsize>,
}

enum Q {
    Double(u64, ReplyTo<u64>),
    Hold(ReplyTo<Counted>),
    Release,
    Stop(ReplyTo<u64>),
    Panic(ReplyTo<u64>),
    Forward(u64, smarm::InboxAddr<u64>),
}

impl Actor for Oracle {
    type Msg = Q;
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, q: Q) {
        match q {
            Q::Double(n, reply) => {
                let _ = reply.send(2 * n);
            }
            Q::Hold(reply) => self.held.push(reply),
            Q::Release => {
                for reply in self.held.drain(..) {
                    // The asker gave up: the reply comes back and is dropped.
                    assert!(reply.send(Counted(self.drops.clone())).is_err());
                }
            }
            Q::Stop(_reply) => ctx.stop_self(),
            Q::Panic(_reply) => panic!("oracle panics"),
            Q::Forward(n, to) => to.send(n).unwrap(),
        }
    }
}

fn oracle(rt: &smarm::Runtime, worker: usize) -> (Addr<Oracle>, Arc<AtomicUsize>) {
    let drops = Arc::new(AtomicUsize::new(0));
    (rt.spawn_actor_on(worker, Oracle { held: vec![], drops: drops.clone() }).unwrap(), drops)
}

// ------------------------------------------------------------------ inbox

fn inbox_everywhere(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let (o, _) = oracle(&rt, workers - 1);
        // Parking inside a process.
        let inbox = rt.new_inbox::<u64>();
        // Kept alive so the inbox stays connected once the oracle drops its copy.
        let _keep = inbox.addr();
        o.send(Q::Forward(5, inbox.addr())).unwrap();
        assert_eq!(inbox.recv().unwrap(), 5);
        assert_eq!(inbox.try_recv(), Err(smarm::actor::InboxTryRecvError::Empty));
        assert_eq!(inbox.recv_timeout(ms(20)), Err(InboxRecvError::Timeout));
        // Through the untyped address (the inbox registry).
        let address = inbox.address();
        address.send(6u64).unwrap();
        assert!(matches!(address.send("no"), Err(ActorSendError::WrongType("no"))));
        assert_eq!(inbox.recv().unwrap(), 6);
        // Blocking an OS thread that drives no worker.
        let rt2 = rt.clone();
        let o2 = o.clone();
        let thread = std::thread::spawn(move || {
            let inbox = rt2.new_inbox::<u64>();
            let _keep = inbox.addr();
            o2.send(Q::Forward(7, inbox.addr())).unwrap();
            let got = inbox.recv().unwrap();
            let timed_out = inbox.recv_timeout(ms(20));
            // Awaited from async code.
            o2.send(Q::Forward(8, inbox.addr())).unwrap();
            let awaited = block_on(inbox.recv_async()).unwrap();
            (got, timed_out, awaited)
        });
        let (got, timed_out, awaited) = join_thread(thread);
        assert_eq!((got, timed_out, awaited), (7, Err(InboxRecvError::Timeout), 8));
        // Dropped: unregistered; later sends get the message back.
        let addr = inbox.addr();
        drop(inbox);
        assert!(matches!(addr.send(9), Err(ActorSendError::NoActor(9))));
        assert!(matches!(address.send(9u64), Err(ActorSendError::NoActor(9))));
        o.stop().unwrap();
    });
}
drive_tests!(inbox_everywhere => inbox_receives_in_processes_threads_and_async_1, inbox_receives_in_processes_threads_and_async_4, inbox_receives_in_processes_threads_and_async_engine);

/// Tries to wait on an inbox inside its handler.
struct Impatient {
    result: Arc<Mutex<Option<InboxRecvError>>>,
}

impl Actor for Impatient {
    type Msg = ();
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, _: ()) {
        let inbox = ctx.runtime().new_inbox::<u8>();
        *self.result.lock().unwrap() = inbox.recv().err();
        ctx.stop_self();
    }
}

#[test]
fn waiting_inside_a_handler_is_refused() {
    let mut s = Stepper::new(Config::default()).unwrap();
    let rt = s.runtime().clone();
    let result = Arc::new(Mutex::new(None));
    rt.spawn_actor(Impatient { result: result.clone() }).unwrap().send(()).unwrap();
    while s.try_tick() {}
    assert_eq!(*result.lock().unwrap(), Some(InboxRecvError::NotInProcess));
}

// -------------------------------------------------------------------- ask

fn asks(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let (o, drops) = oracle(&rt, workers - 1);
        // From a process (parks), with and without a timeout.
        assert_eq!(rt.ask(&o, |r| Q::Double(21, r)).wait().unwrap(), 42);
        assert_eq!(rt.ask(&o, |r| Q::Double(2, r)).wait_timeout(ms(1_000)).unwrap(), 4);
        // From a thread, and awaited.
        let (rt2, o2) = (rt.clone(), o.clone());
        let from_thread = join_thread(std::thread::spawn(move || {
            let waited = rt2.ask(&o2, |r| Q::Double(3, r)).wait().unwrap();
            let awaited = block_on(rt2.ask(&o2, |r| Q::Double(4, r))).unwrap();
            (waited, awaited)
        }));
        assert_eq!(from_thread, (6, 8));
        // A reply that never comes: the timeout; the late reply is dropped.
        let late = rt.ask(&o, Q::Hold).wait_timeout(ms(20));
        assert_eq!(late.err(), Some(InboxRecvError::Timeout));
        o.send(Q::Release).unwrap();
        wait_until("the late reply was dropped", || drops.load(Ordering::SeqCst) == 1);
        // A target that stops without replying, one that panics, a dead one.
        assert_eq!(
            rt.ask(&o, Q::Stop).wait().err(),
            Some(InboxRecvError::Disconnected(Disconnected::NoReply))
        );
        wait_until("stopped", || !o.is_alive());
        assert_eq!(rt.ask(&o, |r| Q::Double(1, r)).wait().err(), Some(InboxRecvError::NoActor));
        let (p, _) = oracle(&rt, 0);
        let err = rt.ask(&p, Q::Panic).wait().unwrap_err();
        assert!(matches!(err, InboxRecvError::Disconnected(_)), "{err:?}");
    });
}
drive_tests!(asks => ask_from_processes_threads_and_async_1, ask_from_processes_threads_and_async_4, ask_from_processes_threads_and_async_engine);

// ------------------------------------------------------- external sender

/// Records `(thread, seq)` pairs.
struct Sink {
    seen: Arc<Mutex<Vec<(u32, u64)>>>,
}

impl Actor for Sink {
    type Msg = (u32, u64);
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, m: (u32, u64)) {
        self.seen.lock().unwrap().push(m);
    }
}

fn external_sender(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let seen = Arc::new(Mutex::new(vec![]));
        let sink = rt.spawn_actor_on(workers - 1, Sink { seen: seen.clone() }).unwrap();
        let ext = rt.external_sender();
        let before = rt.external_sends();
        let threads: Vec<_> = (0..3u32)
            .map(|t| {
                let (ext, sink) = (ext.clone(), sink.clone());
                std::thread::spawn(move || {
                    for seq in 0..1_000 {
                        if seq % 2 == 0 {
                            ext.send(&sink, (t, seq)).unwrap();
                        } else {
                            ext.send_to(&sink.address(), (t, seq)).unwrap();
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            join_thread(t);
        }
        wait_until("all arrived", || seen.lock().unwrap().len() == 3_000);
        let mut next = [0u64; 3];
        for &(t, seq) in seen.lock().unwrap().iter() {
            assert_eq!(seq, next[t as usize], "per-sender FIFO");
            next[t as usize] += 1;
        }
        assert_eq!(rt.external_sends() - before, 3_000, "every external send counted");
        sink.stop().unwrap();
    });
}
drive_tests!(external_sender => external_sender_keeps_per_thread_order_1, external_sender_keeps_per_thread_order_4, external_sender_keeps_per_thread_order_engine);

// ------------------------------------------------------------------ admin

/// A counter whose state admin commands read and replace.
struct Tally {
    n: u64,
    parent_of: Option<Addr<Sink>>,
}

impl Actor for Tally {
    type Msg = u64;
    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        // A child, so the listing shows a parent.
        self.parent_of = Some(ctx.spawn(Sink { seen: Arc::default() }).unwrap());
    }
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, n: u64) {
        self.n += n;
    }
    fn on_stop(&mut self, _ctx: &mut Ctx<'_, Self>, _reason: &ExitReason) {
        if let Some(child) = self.parent_of.take() {
            let _ = child.stop();
        }
    }
}

fn admin(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let t = rt.spawn_actor_on(workers - 1, Tally { n: 0, parent_of: None }).unwrap();
        t.send(5).unwrap();
        wait_until("handled", || rt.with_state(&t, |s: &mut Tally| s.n).wait().unwrap() == Some(5));
        // Replace the state.
        assert_eq!(
            rt.with_state(&t, |s: &mut Tally| std::mem::replace(&mut s.n, 100)).wait().unwrap(),
            Some(5)
        );
        // Suspend: mail waits, then resume.
        assert!(rt.suspend(t.pid()).wait().unwrap());
        t.send(1).unwrap();
        wait_until("queued while suspended", || {
            rt.inspect(t.pid())
                .wait()
                .unwrap()
                .is_some_and(|i| i.mailbox_depth == 1 && i.status == ActorStatus::Suspended)
        });
        assert!(rt.resume(t.pid()).wait().unwrap());
        wait_until("handled after resume", || {
            rt.with_state(&t, |s: &mut Tally| s.n).wait().unwrap() == Some(101)
        });
        // The listing, from every worker at once.
        let actors = rt.list_actors().wait().unwrap();
        assert_eq!(actors.len(), 2, "{actors:?}");
        let tally = actors.iter().find(|a| a.pid == t.pid()).unwrap();
        let child = actors.iter().find(|a| a.pid != t.pid()).unwrap();
        assert!(tally.type_name.ends_with("Tally"));
        assert_eq!(tally.worker, workers - 1);
        assert_eq!(tally.parent, smarm::self_pid(), "spawned by this process");
        assert_eq!(tally.handled, 2);
        assert_eq!(tally.status, ActorStatus::Idle);
        assert_eq!(tally.last_message, "u64");
        assert_eq!(child.parent, Some(t.pid()));
        assert!(child.type_name.ends_with("Sink"));
        // Stop ahead of the mail.
        for n in 0..10 {
            t.send(n).unwrap();
        }
        rt.stop_actor(t.pid(), ExitReason::Other("admin".into())).unwrap();
        let m = smarm::monitor(t.pid());
        assert_eq!(m.rx.recv().unwrap().reason, ExitReason::Other("admin".into()));
        assert!(rt.inspect(t.pid()).wait().unwrap().is_none());
        wait_until("child stopped", || rt.live() == 1);
        assert!(rt.list_actors().wait().unwrap().is_empty());
        assert!(!rt.suspend(t.pid()).wait().unwrap(), "a dead actor is not found");
    });
}
drive_tests!(admin => admin_inspects_suspends_replaces_lists_and_stops_1, admin_inspects_suspends_replaces_lists_and_stops_4, admin_inspects_suspends_replaces_lists_and_stops_engine);

#[test]
fn aggregate_admin_is_not_stuck_behind_a_transfer_backlog() {
    for workers in [1, 4] {
        let mut s =
            Stepper::new(Config { worker_count: workers, worker_ingress_budget: 4, ..Config::default() })
                .unwrap();
        let rt = s.runtime().clone();
        let seen = Arc::new(Mutex::new(vec![]));
        let sinks: Vec<_> =
            (0..workers).map(|w| rt.spawn_actor_on(w, Sink { seen: seen.clone() }).unwrap()).collect();
        while s.try_tick() {}
        for sink in &sinks {
            for seq in 0..200 {
                sink.send((0, seq)).unwrap();
            }
        }
        let listing = rt.list_actors();
        s.try_tick();
        let actors = listing.try_get().expect("every worker answered in its first pass");
        assert_eq!(actors.len(), workers);
        assert!(seen.lock().unwrap().len() <= 4 * workers, "while the backlog moves four at a time");
        for sink in &sinks {
            sink.stop().unwrap();
        }
        while s.try_tick() {}
    }
}

// ------------------------------------------------------------- statistics

/// Sends to a local peer, a remote peer and an inbox on each message.
struct Chatter {
    local: Addr<Sink>,
    remote: Addr<Sink>,
    inbox: smarm::InboxAddr<u64>,
}

impl Actor for Chatter {
    type Msg = ();
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, _: ()) {
        self.local.send((0, 0)).unwrap();
        self.remote.send((0, 0)).unwrap();
        self.inbox.send(ctx.worker() as u64).unwrap();
        let info = ctx.system_info();
        assert_eq!(info.worker, ctx.worker());
        assert_eq!(info.worker_count, ctx.runtime().worker_count());
        assert!(info.total_actors >= 1);
        assert!(info.uptime > Duration::ZERO);
    }
}

#[test]
fn stats_report_real_worker_ids_and_count_every_kind_of_send() {
    let mut s = Stepper::new(Config { worker_count: 4, ..Config::default() }).unwrap();
    let rt = s.runtime().clone();
    let seen = Arc::new(Mutex::new(vec![]));
    let local = rt.spawn_actor_on(2, Sink { seen: seen.clone() }).unwrap();
    let remote = rt.spawn_actor_on(3, Sink { seen: seen.clone() }).unwrap();
    let inbox = rt.new_inbox::<u64>();
    let chatter = rt
        .spawn_actor_on(2, Chatter { local: local.clone(), remote: remote.clone(), inbox: inbox.addr() })
        .unwrap();
    while s.try_tick() {}
    for _ in 0..3 {
        chatter.send(()).unwrap();
    }
    while s.try_tick() {}
    assert_eq!(inbox.try_recv(), Ok(2), "the handler ran on worker 2");
    let w2 = rt.worker_stats(2).unwrap();
    assert_eq!(w2.worker, 2);
    assert_eq!(w2.actors.actors, 2);
    assert_eq!((w2.actors.local_sends, w2.actors.cross_sends, w2.actors.inbox_sends), (3, 3, 3));
    assert_eq!(w2.actors.handled, 6, "three chats and three local arrivals");
    assert!(w2.actors.pass_time > Duration::ZERO);
    let w3 = rt.worker_stats(3).unwrap();
    assert_eq!((w3.actors.actors, w3.actors.handled, w3.actors.transfers_in), (1, 3, 3));
    for w in [0, 1] {
        assert_eq!(rt.worker_stats(w).unwrap().actors.actors, 0, "nothing lives on worker {w}");
    }
    // Mismatches, panics, drops and stops.
    chatter.address().send("wrong").unwrap_err();
    ActorAddress::from_pid(&rt, chatter.pid()).send(1u8).unwrap();
    rt.suspend(local.pid());
    while s.try_tick() {}
    local.send((1, 1)).unwrap();
    local.send((1, 2)).unwrap();
    while s.try_tick() {}
    assert_eq!(
        rt.worker_stats(2).unwrap().actors.mailbox_depth,
        2,
        "the suspended actor's mail waits, counted"
    );
    rt.stop_actor(local.pid(), ExitReason::Normal).unwrap();
    while s.try_tick() {}
    let w2 = rt.worker_stats(2).unwrap();
    assert_eq!(w2.actors.type_mismatches, 2, "refused at the call, and at delivery");
    assert_eq!(w2.actors.dropped, 2, "the suspended actor's two messages");
    assert_eq!(w2.actors.stopped, 1);
    assert_eq!(w2.actors.actors, 1);
    assert_eq!(w2.actors.mailbox_depth, 0, "dropped with the stopped actor");
    chatter.stop().unwrap();
    remote.stop().unwrap();
    while s.try_tick() {}
    assert_eq!(rt.worker_stats(2).unwrap().actors.stopped, 2);
    assert_eq!(rt.live(), 0);
}

#[test]
fn restarts_and_panics_are_counted_where_they_happen() {
    smarm::run_with(Config { worker_count: 2, ..Config::default() }, || {
        let rt = smarm::current_runtime().unwrap();
        let sup = smarm::Supervisor::new()
            .child(smarm::ChildSpec::new("o", || {
                let rt = smarm::current_runtime().unwrap();
                rt.spawn_actor_on(1, Oracle { held: vec![], drops: Arc::default() })
            }))
            .start()
            .unwrap();
        let first = sup.child_pid("o").unwrap().unwrap();
        // A panicking handler on worker 1, counted there.
        let addr: Addr<Oracle> =
            rt.spawn_actor_on(1, Oracle { held: vec![], drops: Arc::default() }).unwrap();
        assert!(rt.ask(&addr, Q::Panic).wait().is_err());
        wait_until("panic counted", || rt.actor_stats(1).unwrap().panics == 1);
        // Kill the supervised child: one restart, counted on the
        // supervisor's worker (0).
        rt.exit(first, first, ExitReason::Killed).unwrap();
        wait_until("restarted", || sup.child_pid("o").unwrap().is_some_and(|p| p != first));
        assert_eq!(rt.actor_stats(0).unwrap().restarts, 1);
        assert_eq!(rt.actor_stats(1).unwrap().restarts, 0);
        sup.stop().unwrap();
    });
}

// ------------------------------------------------------------- extensions

#[derive(Default)]
struct Recording {
    spawned: Mutex<Vec<SpawnInfo>>,
    died: Mutex<Vec<(smarm::Pid, ExitReason)>>,
    ticks: Arc<Mutex<Vec<(usize, usize)>>>,
    made: AtomicUsize,
}

struct PerWorker {
    worker: usize,
    serial: usize,
    ticks: Arc<Mutex<Vec<(usize, usize)>>>,
    pending: u32,
}

impl WorkerExtension for PerWorker {
    fn has_pending_work(&self) -> bool {
        self.pending > 0
    }
    fn on_tick(&mut self, ctx: &mut WorkerCtx<'_>) -> bool {
        assert_eq!(ctx.worker(), self.worker, "ticked on its own worker");
        assert_eq!(smarm::current_worker(), Some(self.worker));
        self.ticks.lock().unwrap().push((self.worker, self.serial));
        if self.pending > 0 {
            self.pending -= 1;
            return true;
        }
        false
    }
}

impl RuntimeExtension for Recording {
    fn on_spawn(&self, info: &SpawnInfo) {
        self.spawned.lock().unwrap().push(info.clone());
    }
    fn on_actor_death(&self, pid: smarm::Pid, reason: &ExitReason) {
        self.died.lock().unwrap().push((pid, reason.clone()));
    }
    fn create_worker_extension(&self, worker: usize) -> Option<Box<dyn WorkerExtension>> {
        let serial = self.made.fetch_add(1, Ordering::SeqCst);
        Some(Box::new(PerWorker { worker, serial, ticks: self.ticks.clone(), pending: 3 }))
    }
}

#[test]
fn per_worker_extensions_are_distinct() {
    for workers in [1, 4] {
        let mut s = Stepper::new(Config { worker_count: workers, ..Config::default() }).unwrap();
        let rt = s.runtime().clone();
        let ext = Arc::new(Recording::default());
        rt.set_extension(ext.clone()).unwrap();
        assert!(rt.set_extension(ext.clone()).is_err(), "set once");
        // Each worker's extension asks for three more passes: the stepper
        // keeps ticking (no park) until they are done.
        let mut rounds = 0;
        while s.try_tick() {
            rounds += 1;
        }
        assert!(rounds >= 3);
        assert_eq!(ext.made.load(Ordering::SeqCst), workers, "one extension per worker");
        let ticks = ext.ticks.lock().unwrap().clone();
        for w in 0..workers {
            let serials: std::collections::BTreeSet<_> =
                ticks.iter().filter(|t| t.0 == w).map(|t| t.1).collect();
            assert_eq!(serials.len(), 1, "worker {w} always ticks the same extension");
        }
        let all: std::collections::BTreeSet<_> = ticks.iter().map(|t| t.1).collect();
        assert_eq!(all.len(), workers, "no two workers share one");
        // Spawn and death hooks.
        let a = rt.spawn_actor_on(workers - 1, Sink { seen: Arc::default() }).unwrap();
        while s.try_tick() {}
        a.stop().unwrap();
        while s.try_tick() {}
        let spawned = ext.spawned.lock().unwrap().clone();
        assert_eq!(spawned.len(), 1);
        assert_eq!((spawned[0].pid, spawned[0].worker), (a.pid(), workers - 1));
        assert!(spawned[0].type_name.ends_with("Sink"));
        assert_eq!(*ext.died.lock().unwrap(), vec![(a.pid(), ExitReason::Stopped)]);
    }
}

// ------------------------------------------------------------ remote sink

#[derive(Default)]
struct RecordingSink {
    got: Mutex<Vec<(u64, u64, &'static str, u64)>>,
}

impl RemoteSink for RecordingSink {
    fn deliver(&self, envelope: RemoteEnvelope) -> Result<(), RemoteEnvelope> {
        let value = *envelope.payload.downcast_ref::<u64>().unwrap_or(&0);
        self.got.lock().unwrap().push((envelope.node, envelope.id, envelope.type_name, value));
        Ok(())
    }
}

#[test]
fn remote_addresses_go_to_the_sink_or_get_no_route() {
    let s = Stepper::new(Config::default()).unwrap();
    let rt = s.runtime().clone();
    let far = ActorAddress::remote(&rt, 7, 42);
    assert!(far.pid().is_none());
    assert!(matches!(far.send(5u64), Err(ActorSendError::NoRoute(5))), "no sink: the message comes back");
    let sink = Arc::new(RecordingSink::default());
    rt.set_remote_sink(sink.clone()).unwrap();
    far.send(6u64).unwrap();
    assert_eq!(*sink.got.lock().unwrap(), vec![(7, 42, "u64", 6)]);
    // A pid of this runtime that is no actor is not remote.
    let p = rt.spawn(|| ()).unwrap();
    assert!(matches!(ActorAddress::from_pid(&rt, p.pid()).send(1u8), Err(ActorSendError::NoActor(1))));
    drop(s);
}

// ------------------------------------------------------- process listing

fn processes_listed(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let me = smarm::self_pid().unwrap();
        smarm::register("root", me).unwrap();
        let (go_tx, go_rx) = smarm::channel::<()>();
        let busy = smarm::spawn_on(workers - 1, move || {
            let _trap = smarm::trap_exit();
            // Some stack, so the high-water mark is visible.
            let buf = std::hint::black_box([7u8; 16 * 1024]);
            smarm::yield_now();
            let _ = go_rx.recv();
            buf[0]
        })
        .unwrap();
        smarm::link(busy.pid()).unwrap();
        let _m = smarm::monitor(busy.pid());
        let (a, _) = oracle(&rt, 0);
        wait_until("parked", || {
            rt.list_processes()
                .wait()
                .unwrap()
                .iter()
                .any(|p| p.pid == busy.pid() && p.state == smarm::ProcessState::Parked)
        });
        let all = rt.list_processes().wait().unwrap();
        assert!(all.iter().all(|p| p.pid != a.pid()), "actors are listed by list_actors, not here");
        let root = all.iter().find(|p| p.pid == me).unwrap();
        assert_eq!(root.name.as_deref(), Some("root"));
        assert_eq!(root.worker, 0);
        assert_eq!(root.links, vec![busy.pid()]);
        let b = all.iter().find(|p| p.pid == busy.pid()).unwrap();
        assert_eq!(b.worker, workers - 1);
        assert!(b.trapping);
        assert_eq!(b.links, vec![me]);
        assert!(b.monitors >= 2, "a monitor and the link table's hook: {}", b.monitors);
        assert!(b.stack_high_water >= 16 * 1024, "{} bytes", b.stack_high_water);
        go_tx.send(()).unwrap();
        busy.join().unwrap();
        a.stop().unwrap();
    });
}
drive_tests!(processes_listed => list_processes_shows_names_links_monitors_traps_and_stacks_1, list_processes_shows_names_links_monitors_traps_and_stacks_4, list_processes_shows_names_links_monitors_traps_and_stacks_engine);

/// The statistics as a threaded program sees them: counted on the worker
/// that did the work, whatever thread drives it.
fn stats_threaded(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let seen = Arc::new(Mutex::new(vec![]));
        let here = workers - 1;
        let there = 0;
        let local = rt.spawn_actor_on(here, Sink { seen: seen.clone() }).unwrap();
        let remote = rt.spawn_actor_on(there, Sink { seen: seen.clone() }).unwrap();
        let inbox = rt.new_inbox::<u64>();
        let chatter = rt
            .spawn_actor_on(
                here,
                Chatter { local: local.clone(), remote: remote.clone(), inbox: inbox.addr() },
            )
            .unwrap();
        for _ in 0..5 {
            chatter.send(()).unwrap();
        }
        for _ in 0..5 {
            assert_eq!(inbox.recv().unwrap(), here as u64, "handled on its own worker");
        }
        wait_until("all arrived", || seen.lock().unwrap().len() == 10);
        wait_until("stats published", || rt.worker_stats(here).unwrap().actors.inbox_sends == 5);
        let s = rt.worker_stats(here).unwrap().actors;
        if here == there {
            // The root's five sends to the chatter are local too.
            assert_eq!((s.local_sends, s.cross_sends), (15, 0));
        } else {
            // Counted on the sender's worker: the root's sends on worker 0.
            assert_eq!((s.local_sends, s.cross_sends), (5, 5));
            assert_eq!(rt.worker_stats(0).unwrap().actors.cross_sends, 5);
            wait_until("transfers published", || rt.worker_stats(there).unwrap().actors.transfers_in >= 5);
        }
        for a in [local.pid(), remote.pid(), chatter.pid()] {
            rt.stop_actor(a, ExitReason::Normal).unwrap();
        }
        wait_until("stopped", || rt.live() == 1);
        // Published at the workers' next idle pass.
        wait_until("three stops counted", || {
            (0..workers).map(|w| rt.worker_stats(w).unwrap().actors.stopped).sum::<u64>() == 3
        });
    });
}
drive_tests!(stats_threaded => stats_count_on_the_worker_that_did_the_work_1, stats_count_on_the_worker_that_did_the_work_4, stats_count_on_the_worker_that_did_the_work_engine);

#[test]
fn per_worker_extensions_are_distinct_on_the_engine() {
    let engine = smarm::Engine::builder().workers(4).build().unwrap();
    let rt = engine.runtime().clone();
    let ext = Arc::new(Recording::default());
    rt.set_extension(ext.clone()).unwrap();
    wait_until("every worker made its extension", || ext.made.load(Ordering::SeqCst) == 4);
    wait_until("every worker ticked", || {
        let ticks = ext.ticks.lock().unwrap();
        (0..4).all(|w| ticks.iter().any(|t| t.0 == w))
    });
    let ticks = ext.ticks.lock().unwrap().clone();
    for w in 0..4 {
        let serials: std::collections::BTreeSet<_> = ticks.iter().filter(|t| t.0 == w).map(|t| t.1).collect();
        assert_eq!(serials.len(), 1, "worker {w} always ticks the same extension");
    }
    let all: std::collections::BTreeSet<_> = ticks.iter().map(|t| t.1).collect();
    assert_eq!(all.len(), 4);
    let a = rt.spawn_actor_on(2, Sink { seen: Arc::default() }).unwrap();
    a.stop().unwrap();
    wait_until("death seen", || ext.died.lock().unwrap().len() == 1);
    assert_eq!(ext.spawned.lock().unwrap()[0].worker, 2);
    engine.wait().unwrap();
}

struct Panicking;

impl WorkerExtension for Panicking {
    fn has_pending_work(&self) -> bool {
        true
    }
    fn on_tick(&mut self, _ctx: &mut WorkerCtx<'_>) -> bool {
        panic!("extension fails");
    }
}

struct MakesPanicking;

impl RuntimeExtension for MakesPanicking {
    fn create_worker_extension(&self, _worker: usize) -> Option<Box<dyn WorkerExtension>> {
        Some(Box::new(Panicking))
    }
}

#[test]
fn a_panicking_extension_leaves_no_current_worker_behind() {
    for workers in [1, 4] {
        let mut s = Stepper::new(Config { worker_count: workers, ..Config::default() }).unwrap();
        s.runtime().set_extension(Arc::new(MakesPanicking)).unwrap();
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.try_tick()));
        assert!(unwound.is_err(), "the extension's panic reaches the stepper's caller");
        // Off every pass again: the thread names no worker and no process.
        assert_eq!(smarm::current_worker(), None);
        assert_eq!(smarm::self_pid(), None);
        drop(s);
        assert_eq!(smarm::current_worker(), None, "no pointer to a freed worker");
    }
}

/// An actor that only exists.
struct Idle;

impl Actor for Idle {
    type Msg = ();
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, _msg: ()) {}
}

/// Admin commands sent at once after a spawn on the caller's own worker
/// (installed at the end of the pass) wait for the install, like mail.
fn admin_right_after_a_local_spawn(drive: Drive) {
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let t = smarm::spawn_actor(Tally { n: 7, parent_of: None }).unwrap();
        assert!(rt.suspend(t.pid()).wait().unwrap(), "suspend finds the new actor");
        assert!(rt.resume(t.pid()).wait().unwrap());
        let u = smarm::spawn_actor(Tally { n: 8, parent_of: None }).unwrap();
        assert_eq!(rt.with_state(&u, |s: &mut Tally| s.n).wait().unwrap(), Some(8));
        let v = smarm::spawn_actor(Idle).unwrap();
        let m = smarm::monitor(v.pid());
        rt.stop_actor(v.pid(), ExitReason::Other("admin".into())).unwrap();
        assert_eq!(m.rx.recv().unwrap().reason, ExitReason::Other("admin".into()));
        for addr in [t.pid(), u.pid()] {
            rt.stop_actor(addr, ExitReason::Stopped).unwrap();
        }
        wait_until("every actor ended", || rt.live() == 1);
    });
}
drive_tests!(admin_right_after_a_local_spawn => admin_right_after_a_local_spawn_is_held_1, admin_right_after_a_local_spawn_is_held_4, admin_right_after_a_local_spawn_is_held_engine);

/// Actors ended from outside their pass (a stop request, an exit signal)
/// leave the published statistics exact once their workers are idle.
fn stats_after_ends_from_outside(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let me = smarm::self_pid().unwrap();
        let total = |f: fn(&smarm::ActorStats) -> u64| {
            (0..workers).map(|w| f(&rt.actor_stats(w).unwrap())).sum::<u64>()
        };
        let mut downs = Vec::new();
        for w in 0..workers {
            let a = rt.spawn_actor_on(w, Idle).unwrap();
            let b = rt.spawn_actor_on(w, Idle).unwrap();
            let c = rt.spawn_actor_on(w, Idle).unwrap();
            wait_until("installed", || rt.inspect(c.pid()).wait().unwrap().is_some());
            downs.extend([a.pid(), b.pid(), c.pid()].map(smarm::monitor));
            rt.request_stop(a.pid()).unwrap();
            rt.exit(me, b.pid(), ExitReason::Killed).unwrap();
            rt.exit(me, c.pid(), ExitReason::Other("gone".into())).unwrap();
        }
        for m in downs {
            m.rx.recv().unwrap();
        }
        let n = 3 * workers as u64;
        wait_until("stats exact on idle workers", || total(|s| s.actors) == 0 && total(|s| s.stopped) == n);
    });
}
drive_tests!(stats_after_ends_from_outside => stats_are_exact_after_ends_from_outside_1, stats_are_exact_after_ends_from_outside_4, stats_are_exact_after_ends_from_outside_engine);
