//! Handler actors: placement, delivery and its order, the pass and its
//! budgets, lifecycle, panics, and the one system they share with
//! processes (monitors, links, the registry, supervisors). Pass-level
//! guarantees are checked on a `Stepper` (one pass of every worker per
//! tick) with 1 and 4 workers; behaviour on one worker, four workers on
//! one thread and the four-thread Engine.

mod common;
use common::{ms, Drive};

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use smarm::{Actor, ActorAddress, ActorSendError, Addr, Config, Ctx, ExitReason, Pid, Stepper};

/// Parks (in short sleeps) until `cond` holds; panics after ten seconds.
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let start = smarm::now().unwrap();
    while !cond() {
        assert!(smarm::now().unwrap() - start < Duration::from_secs(10), "gave up waiting until {what}");
        smarm::sleep(ms(1));
    }
}

fn stepper(workers: usize, tune: impl FnOnce(&mut Config)) -> Stepper {
    let mut config = Config { worker_count: workers, ..Config::default() };
    tune(&mut config);
    Stepper::new(config).expect("runtime builds")
}

/// Ticks until nothing is left to do (at most 10,000 rounds).
fn settle(s: &mut Stepper) {
    for _ in 0..10_000 {
        if !s.try_tick() {
            return;
        }
    }
    panic!("the runtime never settled");
}

/// Records every message with the worker that handled it, and where it
/// started.
#[derive(Default, Clone)]
struct Log {
    started_on: Arc<Mutex<Vec<usize>>>,
    seen: Arc<Mutex<Vec<(u32, u64)>>>,
    stopped: Arc<Mutex<Vec<ExitReason>>>,
}

struct Recorder {
    log: Log,
}

impl Actor for Recorder {
    type Msg = (u32, u64);
    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        self.log.started_on.lock().unwrap().push(ctx.worker());
    }
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, msg: (u32, u64)) {
        self.log.seen.lock().unwrap().push(msg);
    }
    fn on_stop(&mut self, _ctx: &mut Ctx<'_, Self>, reason: &ExitReason) {
        self.log.stopped.lock().unwrap().push(reason.clone());
    }
}

fn recorder(rt: &smarm::Runtime, worker: usize) -> (Addr<Recorder>, Log) {
    let log = Log::default();
    (rt.spawn_actor_on(worker, Recorder { log: log.clone() }).unwrap(), log)
}

/// Checks that each sender's messages arrived in order and all arrived.
fn assert_fifo(seen: &[(u32, u64)], senders: u32, per_sender: u64) {
    let mut next = vec![0u64; senders as usize];
    for &(sender, seq) in seen {
        assert_eq!(seq, next[sender as usize], "sender {sender}: message {seq} out of order");
        next[sender as usize] += 1;
    }
    assert!(next.iter().all(|&n| n == per_sender), "every message in is a message out: {next:?}");
}

// ------------------------------------------------------------------ the pass

fn advances_every_worker_once(workers: usize) {
    let mut s = stepper(workers, |_| {});
    let rt = s.runtime().clone();
    let actors: Vec<_> = (0..workers).map(|w| recorder(&rt, w)).collect();
    settle(&mut s);
    for (w, (_, log)) in actors.iter().enumerate() {
        assert_eq!(*log.started_on.lock().unwrap(), vec![w], "installed on its worker");
    }
    let passes: Vec<u64> = (0..workers).map(|w| rt.stats(w).unwrap().passes).collect();
    for (addr, _) in &actors {
        addr.send((0, 0)).unwrap();
    }
    assert!(s.try_tick());
    for (w, (_, log)) in actors.iter().enumerate() {
        assert_eq!(log.seen.lock().unwrap().len(), 1, "worker {w} handled its message in its one pass");
        assert_eq!(rt.stats(w).unwrap().passes, passes[w] + 1, "worker {w} made exactly one pass");
    }
    for (addr, _) in &actors {
        addr.stop().unwrap();
    }
    settle(&mut s);
    assert_eq!(rt.live(), 0);
}

#[test]
fn single_thread_host_advances_every_worker_once() {
    advances_every_worker_once(1);
    advances_every_worker_once(4);
}

/// An actor a process spawns on its own worker is installed, in the same
/// pass, before the mail the process sent it right after: the actor starts
/// and handles all of it in the pass that follows the process's turn,
/// every message once and in order (none waits a pass for the install).
#[test]
fn a_process_s_mail_to_the_actor_it_just_spawned_is_handled_in_the_same_pass() {
    // Under the 256 messages an actor handles per pass.
    const SENT: u64 = 40;
    for workers in [1, 4] {
        let mut s = stepper(workers, |_| {});
        let rt = s.runtime().clone();
        let log = Log::default();
        let l = log.clone();
        let process = rt
            .spawn_on(workers - 1, move || {
                let actor = smarm::spawn_actor(Recorder { log: l }).unwrap();
                for seq in 0..SENT {
                    actor.send((0, seq)).unwrap();
                }
                actor
            })
            .unwrap();
        assert!(s.try_tick());
        assert_eq!(
            *log.started_on.lock().unwrap(),
            vec![workers - 1],
            "{workers} workers: started on the process's worker"
        );
        assert_fifo(&log.seen.lock().unwrap(), 1, SENT);
        let actor = process.join().unwrap();
        actor.stop().unwrap();
        settle(&mut s);
        assert_eq!(rt.live(), 0);
    }
}

/// A process's mail to an actor of its own worker keeps its order across
/// the actor's install: what it sent while the actor was not installed
/// yet is staged and delivered by the pass that installs it, what it
/// sends after a yield goes straight into the mailbox, behind it.
#[test]
fn a_process_s_mail_keeps_its_order_from_staged_to_straight_into_the_mailbox() {
    const SENT: u64 = 40;
    const BATCHES: u64 = 5;
    let mut s = stepper(1, |_| {});
    let rt = s.runtime().clone();
    let log = Log::default();
    let l = log.clone();
    let process = rt
        .spawn_on(0, move || {
            let actor = smarm::spawn_actor(Recorder { log: l }).unwrap();
            for batch in 0..BATCHES {
                for seq in batch * SENT..(batch + 1) * SENT {
                    actor.send((0, seq)).unwrap();
                }
                smarm::yield_now();
            }
            actor
        })
        .unwrap();
    let mut process = process;
    let actor = loop {
        match process.try_join() {
            Ok(done) => break done.unwrap(),
            Err(pending) => process = pending,
        }
        assert!(s.try_tick(), "the process stalled");
    };
    settle(&mut s);
    assert_fifo(&log.seen.lock().unwrap(), 1, BATCHES * SENT);
    actor.stop().unwrap();
    settle(&mut s);
    assert_eq!(rt.live(), 0);
}

fn round_robin(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let log = Log::default();
        // The root process took the first round-robin turn? No: it was
        // spawned on worker 0 explicitly; the counter starts here.
        let addrs: Vec<_> =
            (0..2 * workers).map(|_| rt.spawn_actor(Recorder { log: log.clone() }).unwrap()).collect();
        wait_until("all started", || log.started_on.lock().unwrap().len() == addrs.len());
        let mut placed: Vec<usize> = log.started_on.lock().unwrap().clone();
        placed.sort_unstable();
        let expected: Vec<usize> = (0..2 * workers).map(|i| i % workers).collect::<Vec<_>>();
        let mut expected_sorted = expected.clone();
        expected_sorted.sort_unstable();
        assert_eq!(placed, expected_sorted, "two actors per worker");
        for a in &addrs {
            a.stop().unwrap();
        }
    });
}
drive_tests!(round_robin => external_spawns_distribute_round_robin_1, external_spawns_distribute_round_robin_4, external_spawns_distribute_round_robin_engine);

/// Spawns a child on its first message and reports the child's worker.
struct Parent {
    child_log: Log,
    child: Option<Addr<Recorder>>,
}

impl Actor for Parent {
    type Msg = ();
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, _: ()) {
        let child = ctx.spawn(Recorder { log: self.child_log.clone() }).unwrap();
        // Sent before the child is installed: held, not lost.
        child.send((0, 0)).unwrap();
        self.child = Some(child);
    }
    fn on_stop(&mut self, _ctx: &mut Ctx<'_, Self>, _reason: &ExitReason) {
        if let Some(child) = self.child.take() {
            let _ = child.stop();
        }
    }
}

fn ctx_spawn(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let target = workers - 1;
        let log = Log::default();
        let parent = rt.spawn_actor_on(target, Parent { child_log: log.clone(), child: None }).unwrap();
        parent.send(()).unwrap();
        wait_until("child handled its first message", || log.seen.lock().unwrap().len() == 1);
        assert_eq!(*log.started_on.lock().unwrap(), vec![target], "child on its parent's worker");
        // From a process: on the process's worker.
        let log2 = Log::default();
        let l2 = log2.clone();
        let w = smarm::spawn_on(target, move || {
            let a = smarm::spawn_actor(Recorder { log: l2 }).unwrap();
            a.send((0, 1)).unwrap();
            a
        })
        .unwrap()
        .join()
        .unwrap();
        wait_until("process-spawned actor handled", || log2.seen.lock().unwrap().len() == 1);
        assert_eq!(*log2.started_on.lock().unwrap(), vec![target], "actor on the spawning process's worker");
        parent.stop().unwrap();
        w.stop().unwrap();
        wait_until("all ended", || smarm::current_runtime().unwrap().live() == 1);
    });
}
drive_tests!(ctx_spawn => ctx_spawn_places_child_on_parents_worker_1, ctx_spawn_places_child_on_parents_worker_4, ctx_spawn_places_child_on_parents_worker_engine);

/// Sends `count` sequenced messages to `target` when told to.
struct Sender {
    id: u32,
    target: Addr<Recorder>,
    count: u64,
}

impl Actor for Sender {
    type Msg = ();
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, _: ()) {
        for seq in 0..self.count {
            self.target.send((self.id, seq)).unwrap();
        }
        ctx.stop_self();
    }
}

fn cross_worker_fifo(drive: Drive) {
    const PER: u64 = 2_000;
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let (target, log) = recorder(&rt, workers - 1);
        // Actors on every worker (same worker as the target included), a
        // process, and a plain thread with no worker at all.
        let mut id = 0;
        for w in 0..workers {
            let s = rt.spawn_actor_on(w, Sender { id, target: target.clone(), count: PER }).unwrap();
            s.send(()).unwrap();
            id += 1;
        }
        let t = target.clone();
        let pid = id;
        smarm::spawn_on(0, move || {
            for seq in 0..PER {
                t.send((pid, seq)).unwrap();
            }
        })
        .unwrap();
        id += 1;
        let t = target.clone();
        let tid = id;
        let thread = std::thread::spawn(move || {
            for seq in 0..PER {
                t.send((tid, seq)).unwrap();
            }
        });
        id += 1;
        let expected = (id as u64 * PER) as usize;
        wait_until("every message handled", || log.seen.lock().unwrap().len() == expected);
        thread.join().unwrap();
        assert_fifo(&log.seen.lock().unwrap(), id, PER);
        target.stop().unwrap();
    });
}
drive_tests!(cross_worker_fifo => cross_worker_delivery_and_fifo_hold_1, cross_worker_delivery_and_fifo_hold_4, cross_worker_delivery_and_fifo_hold_engine);

/// On each message: sends one to `next` (same worker) and one to itself,
/// counting its own messages.
struct Relay {
    next: Option<Addr<Recorder>>,
    handled: Arc<AtomicU64>,
    forward: bool,
}

impl Actor for Relay {
    type Msg = u64;
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, n: u64) {
        self.handled.fetch_add(1, Ordering::SeqCst);
        if self.forward {
            if let Some(next) = &self.next {
                next.send((0, n)).unwrap();
            }
            if n > 0 {
                ctx.addr().send(n - 1).unwrap();
            }
        }
    }
}

#[test]
fn same_worker_sends_run_later_in_the_pass_and_self_sends_next_pass() {
    for workers in [1, 4] {
        let mut s = stepper(workers, |_| {});
        let rt = s.runtime().clone();
        let (b, log) = recorder(&rt, 0);
        let handled = Arc::new(AtomicU64::new(0));
        let a = rt
            .spawn_actor_on(0, Relay { next: Some(b.clone()), handled: handled.clone(), forward: true })
            .unwrap();
        settle(&mut s);
        a.send(3).unwrap();
        s.try_tick();
        // A handled its one message; its send to B went straight into B's
        // mailbox and B ran later in the same pass; its send to itself is
        // staged for the next pass.
        assert_eq!(handled.load(Ordering::SeqCst), 1);
        assert_eq!(*log.seen.lock().unwrap(), vec![(0, 3)], "B ran in A's pass");
        s.try_tick();
        assert_eq!(handled.load(Ordering::SeqCst), 2, "A's self-send is one message per pass");
        assert_eq!(log.seen.lock().unwrap().len(), 2);
        settle(&mut s);
        assert_eq!(handled.load(Ordering::SeqCst), 4);
        assert_eq!(*log.seen.lock().unwrap(), vec![(0, 3), (0, 2), (0, 1), (0, 0)]);
        assert!(rt.actor_stats(0).unwrap().local_sends >= 6, "same-worker sends went through pending_local");
        a.stop().unwrap();
        b.stop().unwrap();
        settle(&mut s);
        assert_eq!(rt.live(), 0);
    }
}

/// Two actors of one worker that bounce a message forever, tracing when
/// each handler begins and ends.
struct Bouncer {
    name: &'static str,
    peer: Option<Addr<Bouncer>>,
    trace: Arc<std::sync::Mutex<Vec<String>>>,
}

enum Bounce {
    Peer(Addr<Bouncer>),
    Ball(u64),
}

impl Actor for Bouncer {
    type Msg = Bounce;
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, msg: Bounce) {
        match msg {
            Bounce::Peer(peer) => self.peer = Some(peer),
            Bounce::Ball(n) => {
                self.trace.lock().unwrap().push(format!("{} begins {n}", self.name));
                if let Some(peer) = &self.peer {
                    peer.send(Bounce::Ball(n + 1)).unwrap();
                }
                self.trace.lock().unwrap().push(format!("{} ends {n}", self.name));
            }
        }
    }
}

#[test]
fn a_chain_of_same_worker_sends_runs_in_one_pass_never_recursively_and_bounded() {
    let mut s = stepper(1, |_| {});
    let rt = s.runtime().clone();
    let trace = Arc::new(std::sync::Mutex::new(Vec::new()));
    let a = rt.spawn_actor_on(0, Bouncer { name: "a", peer: None, trace: trace.clone() }).unwrap();
    let b = rt.spawn_actor_on(0, Bouncer { name: "b", peer: None, trace: trace.clone() }).unwrap();
    a.send(Bounce::Peer(b.clone())).unwrap();
    b.send(Bounce::Peer(a.clone())).unwrap();
    settle(&mut s);
    // A process of the same worker counts the passes it gets to run in.
    let turns = Arc::new(AtomicU64::new(0));
    let counter = turns.clone();
    let (stop_tx, stop_rx) = smarm::channel::<()>();
    rt.spawn_on(0, move || {
        while stop_rx.try_recv() == Err(smarm::TryRecvError::Empty) {
            counter.fetch_add(1, Ordering::SeqCst);
            smarm::yield_now();
        }
    })
    .unwrap();
    s.try_tick();
    let before = turns.load(Ordering::SeqCst);
    a.send(Bounce::Ball(0)).unwrap();
    s.try_tick();
    let one_pass: Vec<String> = std::mem::take(&mut *trace.lock().unwrap());
    // Several hops in the one pass, each handler over before the next
    // begins (never recursive), and the pass ended: the chain is bounded.
    assert!(one_pass.len() >= 2 * 8, "the chain ran on within the pass: {} events", one_pass.len());
    assert!(one_pass.len() <= 2 * 70, "the chain is bounded per pass: {} events", one_pass.len());
    for (i, pair) in one_pass.chunks(2).enumerate() {
        let (who, n) = if i % 2 == 0 { ("a", i) } else { ("b", i) };
        assert_eq!(pair, [format!("{who} begins {n}"), format!("{who} ends {n}")], "hop {i}");
    }
    // The bouncing goes on, and the process still gets its turns.
    for _ in 0..5 {
        s.try_tick();
    }
    assert!(turns.load(Ordering::SeqCst) >= before + 5, "the process ran in every pass");
    assert!(!trace.lock().unwrap().is_empty(), "the ball kept bouncing");
    drop(stop_tx);
    a.stop().unwrap();
    b.stop().unwrap();
    settle(&mut s);
    assert_eq!(rt.live(), 0);
}

/// A message that counts its drops.
struct Tracked {
    seq: u64,
    drops: Arc<AtomicUsize>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

/// Records the numbers it is sent.
struct TrackedSink {
    seen: Arc<Mutex<Vec<u64>>>,
}

impl Actor for TrackedSink {
    type Msg = Tracked;
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, msg: Tracked) {
        self.seen.lock().unwrap().push(msg.seq);
    }
}

enum Mix {
    Go,
    Back(Tracked),
}

/// On `Go`, sends from its handler to every kind of same-worker target: an
/// installed actor (straight into its mailbox), itself (staged), a child
/// it has just spawned (not installed yet: staged, then held), and an
/// actor it stops half-way (the messages behind the stop are dropped).
struct Mixer {
    sink: Addr<TrackedSink>,
    stopping: Addr<TrackedSink>,
    child_seen: Arc<Mutex<Vec<u64>>>,
    child: Option<Addr<TrackedSink>>,
    own: Arc<Mutex<Vec<u64>>>,
    drops: Arc<AtomicUsize>,
}

impl Mixer {
    fn tracked(&self, seq: u64) -> Tracked {
        Tracked { seq, drops: self.drops.clone() }
    }
}

impl Actor for Mixer {
    type Msg = Mix;
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, msg: Mix) {
        match msg {
            Mix::Go => {
                for seq in 0..50 {
                    self.sink.send(self.tracked(seq)).map_err(|_| "sink alive").unwrap();
                    ctx.addr().send(Mix::Back(self.tracked(seq))).map_err(|_| "alive").unwrap();
                }
                let child = ctx.spawn(TrackedSink { seen: self.child_seen.clone() }).unwrap();
                for seq in 0..50 {
                    child.send(self.tracked(seq)).map_err(|_| "child alive").unwrap();
                }
                self.child = Some(child);
                for seq in 0..20 {
                    if seq == 10 {
                        self.stopping.stop().unwrap();
                    }
                    self.stopping.send(self.tracked(seq)).map_err(|_| "not ended yet").unwrap();
                }
            }
            Mix::Back(tracked) => self.own.lock().unwrap().push(tracked.seq),
        }
    }
}

#[test]
fn same_worker_sends_from_a_handler_keep_order_and_drop_once() {
    for workers in [1, 4] {
        let mut s = stepper(workers, |_| {});
        let rt = s.runtime().clone();
        let drops = Arc::new(AtomicUsize::new(0));
        let [sink_seen, stopping_seen, child_seen, own] =
            std::array::from_fn(|_| Arc::new(Mutex::new(Vec::new())));
        let sink = rt.spawn_actor_on(0, TrackedSink { seen: sink_seen.clone() }).unwrap();
        let stopping = rt.spawn_actor_on(0, TrackedSink { seen: stopping_seen.clone() }).unwrap();
        let mixer = rt
            .spawn_actor_on(
                0,
                Mixer {
                    sink: sink.clone(),
                    stopping: stopping.clone(),
                    child_seen: child_seen.clone(),
                    child: None,
                    own: own.clone(),
                    drops: drops.clone(),
                },
            )
            .unwrap();
        settle(&mut s);
        mixer.send(Mix::Go).map_err(|_| "mixer alive").unwrap();
        settle(&mut s);
        let all: Vec<u64> = (0..50).collect();
        assert_eq!(*sink_seen.lock().unwrap(), all, "to an installed actor: in order, once each");
        assert_eq!(*own.lock().unwrap(), all, "to itself: in order, once each");
        assert_eq!(*child_seen.lock().unwrap(), all, "to a fresh child: in order, once each");
        assert_eq!(*stopping_seen.lock().unwrap(), (0..10).collect::<Vec<u64>>(), "none behind the stop");
        assert!(!stopping.is_alive());
        assert_eq!(rt.actor_stats(0).unwrap().dropped, 10, "the ten behind the stop, counted");
        assert_eq!(drops.load(Ordering::SeqCst), 50 + 50 + 50 + 20, "every message dropped once");
        mixer.stop().unwrap();
        sink.stop().unwrap();
        settle(&mut s);
        assert_eq!(rt.live(), 1, "the child is left");
        rt.stop_all();
        settle(&mut s);
        assert_eq!(rt.live(), 0);
    }
}

#[test]
fn transfer_backlog_is_consumed_across_multiple_passes() {
    for workers in [1, 4] {
        let mut s = stepper(workers, |c| c.worker_ingress_budget = 4);
        let rt = s.runtime().clone();
        let (a, log) = recorder(&rt, workers - 1);
        settle(&mut s);
        for seq in 0..10 {
            a.send((0, seq)).unwrap();
        }
        let mut counts = vec![];
        for _ in 0..3 {
            s.try_tick();
            counts.push(log.seen.lock().unwrap().len());
        }
        assert_eq!(counts, vec![4, 8, 10], "four envelopes per drain");
        // Statistics go out at the next idle pass.
        s.try_tick();
        assert_eq!(
            rt.actor_stats(workers - 1).unwrap().transfers_in,
            10,
            "every message came through the transfer queue"
        );
        a.stop().unwrap();
        settle(&mut s);
    }
}

#[test]
fn budget_delayed_spawn_retains_messages_and_stops() {
    for workers in [1, 4] {
        let mut s = stepper(workers, |c| c.worker_ingress_budget = 1);
        let rt = s.runtime().clone();
        let logs: Vec<_> = (0..3).map(|_| recorder(&rt, 0)).collect();
        // The third install waits two passes behind the others; messages
        // and a stop sent to it now are held, then delivered in order.
        let (third, log) = &logs[2];
        for seq in 0..5 {
            third.send((0, seq)).unwrap();
        }
        third.stop().unwrap();
        settle(&mut s);
        assert_eq!(*log.seen.lock().unwrap(), (0..5).map(|i| (0, i)).collect::<Vec<_>>());
        assert_eq!(*log.stopped.lock().unwrap(), vec![ExitReason::Stopped]);
        assert!(!third.is_alive());
        assert_eq!(rt.actor_stats(0).unwrap().dropped, 0, "nothing dropped");
        for (a, _) in &logs[..2] {
            a.stop().unwrap();
        }
        settle(&mut s);
        assert_eq!(rt.live(), 0);
    }
}

#[test]
fn spawn_and_admin_drains_are_not_blocked_by_transfer_backlog() {
    for workers in [1, 4] {
        let mut s = stepper(workers, |c| c.worker_ingress_budget = 4);
        let rt = s.runtime().clone();
        let (a, a_log) = recorder(&rt, 0);
        settle(&mut s);
        for seq in 0..100 {
            a.send((0, seq)).unwrap();
        }
        let (b, b_log) = recorder(&rt, 0);
        let inspected = rt.inspect(a.pid());
        s.try_tick();
        assert_eq!(b_log.started_on.lock().unwrap().len(), 1, "the spawn was drained in the first pass");
        let found =
            inspected.try_get().expect("the admin command ran in the first pass").expect("a is alive");
        assert_eq!(found.pid, a.pid());
        assert_ne!(found.status, smarm::ActorStatus::Starting);
        assert!(found.type_name.ends_with("Recorder"));
        assert_eq!(
            (found.mailbox_depth, found.handled),
            (0, 0),
            "inspected while the backlog still waits in the transfer queue"
        );
        assert_eq!(a_log.seen.lock().unwrap().len(), 4, "while the backlog moves four at a time");
        a.stop().unwrap();
        b.stop().unwrap();
        settle(&mut s);
        assert_eq!(a_log.seen.lock().unwrap().len(), 100);
    }
}

/// Sends itself a message on every message, forever.
struct Hot {
    handled: Arc<AtomicU64>,
}

impl Actor for Hot {
    type Msg = ();
    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        for _ in 0..100 {
            ctx.addr().send(()).unwrap();
        }
    }
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, _: ()) {
        self.handled.fetch_add(1, Ordering::SeqCst);
        ctx.addr().send(()).unwrap();
    }
}

#[test]
fn hot_actor_does_not_starve_a_cold_one() {
    for workers in [1, 4] {
        let mut s = stepper(workers, |c| c.actor_message_budget = 8);
        let rt = s.runtime().clone();
        let handled = Arc::new(AtomicU64::new(0));
        let hot = rt.spawn_actor_on(0, Hot { handled: handled.clone() }).unwrap();
        let (cold, log) = recorder(&rt, 0);
        for _ in 0..5 {
            s.try_tick();
        }
        let before = handled.load(Ordering::SeqCst);
        cold.send((0, 0)).unwrap();
        s.try_tick();
        s.try_tick();
        assert_eq!(log.seen.lock().unwrap().len(), 1, "the cold actor's message handled within two passes");
        let per_pass = (handled.load(Ordering::SeqCst) - before) / 2;
        assert!(per_pass <= 8, "the hot actor is capped at the budget: {per_pass} per pass");
        assert!(per_pass > 0);
        hot.stop().unwrap();
        cold.stop().unwrap();
        // The hot actor's stop waits behind its own endless backlog: stop it
        // outright instead.
        rt.request_stop(hot.pid()).unwrap();
        settle(&mut s);
        assert_eq!(rt.live(), 0);
    }
}

/// Counts what it handles.
struct Tally {
    handled: Arc<AtomicU64>,
}

impl Actor for Tally {
    type Msg = u64;
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, _: u64) {
        self.handled.fetch_add(1, Ordering::SeqCst);
    }
}

/// With the default budgets, an actor fed from outside its worker handles
/// in each pass everything that pass took in for it: a long stream waits
/// in the worker's transfer lane, a chain the sender already built, and
/// does not pile up in the actor's mailbox (which would grow every pass
/// by what the pass took in beyond what the actor handled).
#[test]
fn a_lone_actor_handles_each_pass_s_ingress_in_that_pass() {
    const SENT: u64 = 1_000;
    let ingress = Config::default().worker_ingress_budget as u64;
    assert!(ingress > 0 && ingress < SENT, "the stream spans several passes");
    let mut s = stepper(2, |_| {});
    let rt = s.runtime().clone();
    let handled = Arc::new(AtomicU64::new(0));
    let tally = rt.spawn_actor_on(1, Tally { handled: handled.clone() }).unwrap();
    settle(&mut s);
    // From this thread, outside every worker: each send goes into worker
    // 1's transfer lane at once.
    for n in 0..SENT {
        tally.send(n).unwrap();
    }
    assert_eq!(handled.load(Ordering::SeqCst), 0);
    for pass in 1..=SENT.div_ceil(ingress) {
        s.try_tick();
        assert_eq!(
            handled.load(Ordering::SeqCst),
            (pass * ingress).min(SENT),
            "after pass {pass}: the actor handled all the pass took in"
        );
    }
    tally.stop().unwrap();
    settle(&mut s);
    assert_eq!(rt.live(), 0);
}

// ------------------------------------------------------------ lifecycle

/// Panics on a message equal to 13.
struct Fragile {
    handled: Arc<AtomicU64>,
}

impl Actor for Fragile {
    type Msg = u64;
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, n: u64) {
        assert_ne!(n, 13, "unlucky number");
        self.handled.fetch_add(1, Ordering::SeqCst);
    }
}

fn panic_isolation(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let h1 = Arc::new(AtomicU64::new(0));
        let h2 = Arc::new(AtomicU64::new(0));
        let bad = rt.spawn_actor_on(0, Fragile { handled: h1.clone() }).unwrap();
        let good = rt.spawn_actor_on(workers - 1, Fragile { handled: h2.clone() }).unwrap();
        let watch = smarm::monitor(bad.pid());
        for n in [1, 13, 2, 3] {
            bad.send(n).unwrap();
        }
        let down = watch.rx.recv().unwrap();
        assert_eq!(down.pid, bad.pid());
        match down.reason {
            ExitReason::Panicked(m) => assert!(m.contains("unlucky number"), "{m}"),
            other => panic!("expected a panic, got {other:?}"),
        }
        assert_eq!(h1.load(Ordering::SeqCst), 1, "the messages after the panic were not handled");
        for n in 0..10 {
            good.send(n).unwrap();
        }
        wait_until("the other actor goes on", || h2.load(Ordering::SeqCst) == 10);
        assert!(
            matches!(bad.send(4), Err(ActorSendError::NoActor(4))),
            "a send to the dead actor hands the message back"
        );
        let stats = rt.actor_stats(0).unwrap();
        assert_eq!(stats.panics, 1);
        assert_eq!(stats.dropped, 2, "two messages were left in the poisoned mailbox");
        good.stop().unwrap();
    });
}
drive_tests!(panic_isolation => panic_on_one_worker_does_not_stop_another_1, panic_on_one_worker_does_not_stop_another_4, panic_on_one_worker_does_not_stop_another_engine);

/// Monitors a pid it is sent and reports the `Down`.
struct Watcher {
    downs: Arc<Mutex<Vec<smarm::Down>>>,
}

impl Actor for Watcher {
    type Msg = Pid;
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, pid: Pid) {
        ctx.monitor(pid);
    }
    fn handle_down(&mut self, ctx: &mut Ctx<'_, Self>, down: smarm::Down) {
        self.downs.lock().unwrap().push(down);
        ctx.stop_self();
    }
}

fn death_crosses_workers(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let downs = Arc::new(Mutex::new(vec![]));
        let watcher = rt.spawn_actor_on(workers - 1, Watcher { downs: downs.clone() }).unwrap();
        let (target, _) = recorder(&rt, 0);
        watcher.send(target.pid()).unwrap();
        // Let the monitor be set before the target ends.
        wait_until("monitor set", || rt.actor_stats(workers - 1).unwrap().handled >= 1);
        target.stop().unwrap();
        wait_until("down delivered", || !downs.lock().unwrap().is_empty());
        let down = downs.lock().unwrap()[0].clone();
        assert_eq!(down.pid, target.pid());
        assert_eq!(down.reason, ExitReason::Stopped);
        // A process watching an actor, across workers.
        let (other, _) = recorder(&rt, workers - 1);
        let m = smarm::monitor(other.pid());
        other.stop().unwrap();
        assert_eq!(m.rx.recv().unwrap().reason, ExitReason::Stopped);
        wait_until("watcher ended", || !watcher.is_alive());
    });
}
drive_tests!(death_crosses_workers => death_notification_crosses_workers_1, death_notification_crosses_workers_4, death_notification_crosses_workers_engine);

/// Checks that no two handlers of it ever overlap.
struct Exclusive {
    inside: Arc<AtomicBool>,
    handled: Arc<AtomicU64>,
}

impl Actor for Exclusive {
    type Msg = u64;
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, _: u64) {
        assert!(!self.inside.swap(true, Ordering::SeqCst), "two threads in one actor");
        std::hint::spin_loop();
        self.handled.fetch_add(1, Ordering::SeqCst);
        self.inside.store(false, Ordering::SeqCst);
    }
}

struct Spammer {
    target: Addr<Exclusive>,
}

impl Actor for Spammer {
    type Msg = u64;
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, n: u64) {
        for i in 0..n {
            self.target.send(i).unwrap();
        }
        ctx.stop_self();
    }
}

#[test]
fn single_writer_under_4_threads() {
    Drive::Threads(4).run(|| {
        let rt = smarm::current_runtime().unwrap();
        let handled = Arc::new(AtomicU64::new(0));
        let target = rt
            .spawn_actor_on(
                0,
                Exclusive { inside: Arc::new(AtomicBool::new(false)), handled: handled.clone() },
            )
            .unwrap();
        for w in 0..4 {
            rt.spawn_actor_on(w, Spammer { target: target.clone() }).unwrap().send(20_000).unwrap();
        }
        wait_until("all handled", || handled.load(Ordering::SeqCst) == 80_000);
        assert_eq!(rt.actor_stats(0).unwrap().panics, 0);
        target.stop().unwrap();
    });
}

// ----------------------------------------------- one system with processes

/// Says when it is dropped, through a channel and a count.
struct Noisy {
    dropped: Arc<AtomicU64>,
    tell: smarm::Sender<&'static str>,
}

impl Drop for Noisy {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, Ordering::SeqCst);
        let _ = self.tell.send("dropped");
    }
}

/// A process's message that an actor of its own worker refuses for its
/// type is counted and dropped once, in the process, and its destructor
/// may send.
#[test]
fn a_process_s_refused_message_is_dropped_once_and_its_destructor_may_send() {
    let mut s = stepper(1, |_| {});
    let rt = s.runtime().clone();
    let (a, log) = recorder(&rt, 0);
    settle(&mut s);
    let dropped = Arc::new(AtomicU64::new(0));
    let d = dropped.clone();
    let pid = a.pid();
    let process = rt
        .spawn_on(0, move || {
            let (tell, heard) = smarm::channel();
            let blind = ActorAddress::from_pid(&smarm::current_runtime().unwrap(), pid);
            blind.send(Noisy { dropped: d, tell }).unwrap();
            heard.try_recv().ok()
        })
        .unwrap();
    settle(&mut s);
    assert_eq!(process.join().unwrap(), Some("dropped"), "dropped before the send returned");
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    assert_eq!(rt.actor_stats(0).unwrap().type_mismatches, 1);
    assert!(log.seen.lock().unwrap().is_empty());
    a.stop().unwrap();
    settle(&mut s);
}

#[test]
fn untyped_addresses_refuse_the_wrong_type_and_count_it() {
    let mut s = stepper(1, |_| {});
    let rt = s.runtime().clone();
    let (a, log) = recorder(&rt, 0);
    settle(&mut s);
    let typed = a.address();
    assert_eq!(typed.accepts(), Some(std::any::type_name::<(u32, u64)>()));
    match typed.send("not a tuple") {
        Err(ActorSendError::WrongType(m)) => assert_eq!(m, "not a tuple"),
        other => panic!("expected WrongType, got {other:?}"),
    }
    typed.send((7u32, 1u64)).unwrap();
    let blind = ActorAddress::from_pid(&rt, a.pid());
    blind.send(5u8).unwrap();
    settle(&mut s);
    assert_eq!(*log.seen.lock().unwrap(), vec![(7, 1)]);
    assert_eq!(rt.actor_stats(0).unwrap().type_mismatches, 2, "one refused at the call, one at delivery");
    // A process's pid is no actor.
    let p = rt.spawn(|| ()).unwrap();
    assert!(matches!(ActorAddress::from_pid(&rt, p.pid()).send(1u8), Err(ActorSendError::NoActor(1))));
    a.stop().unwrap();
    settle(&mut s);
    p.join().unwrap();
}

/// Traps exits and records them; links to the pid it is sent.
struct Trapper {
    exits: Arc<Mutex<Vec<smarm::ExitSignal>>>,
}

impl Actor for Trapper {
    type Msg = Pid;
    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        ctx.trap_exit(true);
    }
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, peer: Pid) {
        ctx.link(peer).unwrap();
    }
    fn handle_exit(&mut self, _ctx: &mut Ctx<'_, Self>, signal: smarm::ExitSignal) {
        self.exits.lock().unwrap().push(signal);
    }
}

/// Links to the pid it is sent, without trapping.
struct Linked {
    log: Log,
}

impl Actor for Linked {
    type Msg = Pid;
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, peer: Pid) {
        ctx.link(peer).unwrap();
    }
    fn on_stop(&mut self, _ctx: &mut Ctx<'_, Self>, reason: &ExitReason) {
        self.log.stopped.lock().unwrap().push(reason.clone());
    }
}

fn links_both_ways(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        // A process that panics takes a linked actor down with it.
        let (go_tx, go_rx) = smarm::channel::<()>();
        let doomed = smarm::spawn_on(workers - 1, move || {
            go_rx.recv().unwrap();
            panic!("doomed");
        })
        .unwrap();
        let log = Log::default();
        let linked = rt.spawn_actor_on(0, Linked { log: log.clone() }).unwrap();
        linked.send(doomed.pid()).unwrap();
        wait_until("linked", || rt.actor_stats(0).unwrap().handled >= 1);
        // A trapping actor is told instead.
        let exits = Arc::new(Mutex::new(vec![]));
        let trapper = rt.spawn_actor_on(workers - 1, Trapper { exits: exits.clone() }).unwrap();
        trapper.send(doomed.pid()).unwrap();
        // (On one worker both link messages count on worker 0.)
        let links_here = if workers == 1 { 2 } else { 1 };
        wait_until("trapper linked", || rt.actor_stats(workers - 1).unwrap().handled >= links_here);
        go_tx.send(()).unwrap();
        assert!(doomed.join().is_err());
        wait_until("linked actor ended", || !linked.is_alive());
        match &log.stopped.lock().unwrap()[..] {
            [ExitReason::Linked { peer, .. }] => assert_eq!(*peer, doomed_pid(&exits)),
            other => panic!("expected one Linked stop, got {other:?}"),
        }
        wait_until("trapper told", || exits.lock().unwrap().len() == 1);
        assert!(trapper.is_alive(), "a trapping actor survives");
        // An actor that panics takes a linked process down.
        let fragile = rt.spawn_actor_on(0, Fragile { handled: Arc::new(AtomicU64::new(0)) }).unwrap();
        let fp = fragile.pid();
        let (linked_tx, linked_rx) = smarm::channel::<()>();
        let victim = smarm::spawn_on(workers - 1, move || {
            smarm::link(fp).unwrap();
            linked_tx.send(()).unwrap();
            loop {
                smarm::sleep(ms(1));
            }
        })
        .unwrap();
        linked_rx.recv().unwrap();
        fragile.send(13).unwrap();
        let err = victim.join().unwrap_err();
        assert!(format!("{err:?}").contains("Linked"), "{err:?}");
        trapper.stop().unwrap();
    });
}

fn doomed_pid(exits: &Arc<Mutex<Vec<smarm::ExitSignal>>>) -> Pid {
    let start = std::time::Instant::now();
    loop {
        if let Some(e) = exits.lock().unwrap().first() {
            return e.from;
        }
        assert!(start.elapsed() < Duration::from_secs(10));
        smarm::sleep(ms(1));
    }
}
drive_tests!(links_both_ways => links_cross_actors_and_processes_1, links_cross_actors_and_processes_4, links_cross_actors_and_processes_engine);

/// Registers itself under a name on start.
struct Named {
    name: &'static str,
    log: Log,
}

impl Actor for Named {
    type Msg = (u32, u64);
    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        ctx.register(self.name).unwrap();
    }
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, msg: (u32, u64)) {
        self.log.seen.lock().unwrap().push(msg);
    }
}

fn registry_names_actors(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let log = Log::default();
        let a = rt.spawn_actor_on(workers - 1, Named { name: "kv", log: log.clone() }).unwrap();
        wait_until("registered", || smarm::whereis("kv").is_some());
        let pid = smarm::whereis("kv").unwrap();
        assert_eq!(pid, a.pid());
        ActorAddress::from_pid(&rt, pid).send((1u32, 2u64)).unwrap();
        wait_until("handled", || log.seen.lock().unwrap().len() == 1);
        a.stop().unwrap();
        wait_until("name released at death", || smarm::whereis("kv").is_none());
    });
}
drive_tests!(registry_names_actors => registry_names_actors_1, registry_names_actors_4, registry_names_actors_engine);

fn supervisor_restarts_actors(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let starts = Arc::new(AtomicUsize::new(0));
        let s2 = starts.clone();
        let sup = smarm::Supervisor::new()
            .child(smarm::ChildSpec::new("fragile", move || {
                s2.fetch_add(1, Ordering::SeqCst);
                let rt = smarm::current_runtime().unwrap();
                rt.spawn_actor_on(workers - 1, Fragile { handled: Arc::new(AtomicU64::new(0)) })
            }))
            .start()
            .unwrap();
        let first = sup.child_pid("fragile").unwrap().unwrap();
        let rt = smarm::current_runtime().unwrap();
        ActorAddress::from_pid(&rt, first).send(13u64).unwrap();
        wait_until("restarted", || starts.load(Ordering::SeqCst) == 2);
        let second = sup.child_pid("fragile").unwrap().unwrap();
        assert_ne!(first, second, "a new actor took the crashed one's place");
        assert!(rt.is_alive(second));
        // Stopping the supervisor stops its actor child gracefully.
        sup.stop().unwrap();
        wait_until("child stopped", || !rt.is_alive(second));
    });
}
drive_tests!(supervisor_restarts_actors => supervisor_restarts_a_crashed_actor_1, supervisor_restarts_a_crashed_actor_4, supervisor_restarts_a_crashed_actor_engine);

/// Stops itself on the first message; what follows is dropped and counted.
struct OneShot;

impl Actor for OneShot {
    type Msg = u64;
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, _: u64) {
        ctx.stop_self();
    }
}

#[test]
fn stop_self_discards_the_rest_and_counts_it() {
    for workers in [1, 4] {
        let mut s = stepper(workers, |_| {});
        let rt = s.runtime().clone();
        let a = rt.spawn_actor_on(0, OneShot).unwrap();
        for n in 0..5 {
            a.send(n).unwrap();
        }
        let m = rt.monitor(a.pid());
        settle(&mut s);
        assert_eq!(m.rx.try_recv().unwrap().reason, ExitReason::Normal);
        let stats = rt.actor_stats(0).unwrap();
        assert_eq!((stats.handled, stats.dropped, stats.stopped, stats.actors), (1, 4, 1, 0));
        assert!(matches!(a.send(9), Err(ActorSendError::NoActor(9))));
        assert_eq!(rt.live(), 0);
        assert_eq!(rt.free_slots(), rt.max_processes(), "the slot came back");
    }
}

/// Replies through a bounded channel of one slot: the second reply finds
/// it full, and a handler never parks.
struct Replier {
    out: smarm::Sender<u64>,
    full: Arc<AtomicUsize>,
}

impl Actor for Replier {
    type Msg = u64;
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, n: u64) {
        match self.out.try_send(n) {
            Ok(()) => {}
            Err(smarm::TrySendError::Full(back)) => {
                assert_eq!(back, n, "the message comes back");
                self.full.fetch_add(1, Ordering::SeqCst);
            }
            Err(e) => panic!("{e:?}"),
        }
    }
}

#[test]
fn a_full_bounded_channel_in_a_handler_is_a_typed_error() {
    let mut s = stepper(1, |_| {});
    let rt = s.runtime().clone();
    let (tx, rx) = smarm::bounded::<u64>(1);
    let full = Arc::new(AtomicUsize::new(0));
    let a = rt.spawn_actor(Replier { out: tx, full: full.clone() }).unwrap();
    a.send(1).unwrap();
    a.send(2).unwrap();
    settle(&mut s);
    assert_eq!(full.load(Ordering::SeqCst), 1);
    assert_eq!(rx.try_recv().unwrap(), 1);
    a.stop().unwrap();
    settle(&mut s);
}

/// Actors in a counted exchange: each forwards what it gets to the next
/// of a ring of partners, `hops` times.
struct Node {
    id: u32,
    peers: Arc<Mutex<Vec<Addr<Node>>>>,
    seen: Arc<Mutex<Vec<u64>>>,
    last: Vec<u64>,
    done: Arc<AtomicU64>,
}

impl Actor for Node {
    /// (origin, seq, hops left)
    type Msg = (u32, u64, u32);
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, (origin, seq, hops): (u32, u64, u32)) {
        // FIFO per (sender, target): messages from one origin through one
        // fixed path arrive in sequence.
        let _ = &self.seen;
        if self.last.len() <= origin as usize {
            self.last.resize(origin as usize + 1, 0);
        }
        assert!(seq + 1 > self.last[origin as usize], "node {}: out of order from {origin}", self.id);
        self.last[origin as usize] = seq + 1;
        if hops == 0 {
            self.done.fetch_add(1, Ordering::SeqCst);
            return;
        }
        let peers = self.peers.lock().unwrap();
        let next = &peers[(self.id as usize + 1) % peers.len()];
        next.send((origin, seq, hops - 1)).unwrap();
    }
}

fn counted_exchange(drive: Drive, actors: u32, per_actor: u64, hops: u32) {
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let peers = Arc::new(Mutex::new(vec![]));
        let done = Arc::new(AtomicU64::new(0));
        let addrs: Vec<_> = (0..actors)
            .map(|id| {
                rt.spawn_actor(Node {
                    id,
                    peers: peers.clone(),
                    seen: Arc::default(),
                    last: vec![],
                    done: done.clone(),
                })
                .unwrap()
            })
            .collect();
        *peers.lock().unwrap() = addrs.clone();
        for (i, a) in addrs.iter().enumerate() {
            for seq in 0..per_actor {
                a.send((i as u32, seq, hops)).unwrap();
            }
        }
        let expected = actors as u64 * per_actor;
        wait_until("every message in is a message out", || done.load(Ordering::SeqCst) == expected);
        assert_eq!(done.load(Ordering::SeqCst), expected);
        let panics: u64 = (0..rt.worker_count()).map(|w| rt.actor_stats(w).unwrap().panics).sum();
        assert_eq!(panics, 0, "no FIFO assertion failed in any handler");
        peers.lock().unwrap().clear();
        for a in &addrs {
            a.stop().unwrap();
        }
        wait_until("all stopped", || rt.live() == 1);
    });
}

fn small_exchange(drive: Drive) {
    counted_exchange(drive, 200, 50, 4);
}
drive_tests!(small_exchange => counted_exchange_keeps_every_message_and_its_order_1, counted_exchange_keeps_every_message_and_its_order_4, counted_exchange_keeps_every_message_and_its_order_engine);

// ------------------------------------------ the pass's guarantees, threaded

/// The pass-level guarantees as a program on the Engine (or any host)
/// sees them: with an ingress budget of 4 a backlog is still consumed in
/// full and in order; a spawn and an admin command sent behind a backlog
/// are served; a hot self-sending actor does not starve a cold one; an
/// actor spawned with messages already waiting gets them all, then the
/// stop queued behind them.
fn pass_guarantees(drive: Drive) {
    let workers = drive.workers();
    let config = Config {
        worker_count: workers,
        worker_ingress_budget: 4,
        actor_message_budget: 8,
        ..Config::default()
    };
    let run = move || {
        let rt = smarm::current_runtime().unwrap();
        let target = workers - 1;
        // A backlog through the transfer queue.
        let (a, a_log) = recorder(&rt, target);
        for seq in 0..1_000 {
            a.send((0, seq)).unwrap();
        }
        // A spawn and an admin command behind it.
        let (b, b_log) = recorder(&rt, target);
        let inspected = rt.inspect(a.pid()).wait().unwrap();
        assert!(inspected.is_some(), "the admin command was served");
        wait_until("spawn served", || b_log.started_on.lock().unwrap().len() == 1);
        wait_until("backlog consumed", || a_log.seen.lock().unwrap().len() == 1_000);
        assert_fifo(&a_log.seen.lock().unwrap(), 1, 1_000);
        // A hot actor next to a cold one.
        let handled = Arc::new(AtomicU64::new(0));
        let hot = rt.spawn_actor_on(target, Hot { handled: handled.clone() }).unwrap();
        wait_until("hot running", || handled.load(Ordering::SeqCst) > 100);
        b.send((0, 0)).unwrap();
        wait_until("the cold actor is served while the hot one runs", || {
            b_log.seen.lock().unwrap().len() == 1
        });
        rt.request_stop(hot.pid()).unwrap();
        // Messages and a stop for an actor not installed yet.
        let (c, c_log) = recorder(&rt, target);
        for seq in 0..50 {
            c.send((0, seq)).unwrap();
        }
        c.stop().unwrap();
        wait_until("c stopped", || !c.is_alive());
        assert_fifo(&c_log.seen.lock().unwrap(), 1, 50);
        assert_eq!(*c_log.stopped.lock().unwrap(), vec![ExitReason::Stopped]);
        a.stop().unwrap();
        b.stop().unwrap();
        wait_until("all ended", || rt.live() == 1);
    };
    match drive {
        Drive::Single(_) => smarm::run_with(config, run),
        Drive::Threads(n) => {
            let engine = smarm::Engine::builder()
                .workers(n)
                .ingress_budget(4)
                .actor_message_budget(8)
                .build()
                .unwrap();
            engine.block_on(run).unwrap()
        }
    }
}
drive_tests!(pass_guarantees => pass_guarantees_hold_1, pass_guarantees_hold_4, pass_guarantees_hold_engine);

#[test]
fn an_idle_worker_with_actors_parks() {
    let engine = smarm::Engine::builder().workers(2).build().unwrap();
    let rt = engine.runtime().clone();
    let (a, log) = recorder(&rt, 1);
    a.send((0, 0)).unwrap();
    let start = std::time::Instant::now();
    while log.seen.lock().unwrap().is_empty() {
        assert!(start.elapsed() < Duration::from_secs(10));
        std::thread::sleep(ms(1));
    }
    // Let the spinner give up, then count passes over a quiet stretch.
    std::thread::sleep(ms(100));
    let before = rt.stats(1).unwrap().passes;
    std::thread::sleep(ms(100));
    let after = rt.stats(1).unwrap().passes;
    assert!(after - before < 10, "an idle worker made {} passes in 100 ms: it busy-loops", after - before);
    // A send wakes it.
    a.send((0, 1)).unwrap();
    let start = std::time::Instant::now();
    while log.seen.lock().unwrap().len() < 2 {
        assert!(start.elapsed() < Duration::from_secs(10), "the send did not wake the parked worker");
        std::thread::sleep(ms(1));
    }
    a.stop().unwrap();
    engine.wait().unwrap();
}

#[test]
fn spawn_errors_are_typed() {
    let mut s = stepper(2, |c| c.max_processes = Some(2));
    let rt = s.runtime().clone();
    assert_eq!(rt.spawn_actor_on(7, OneShot).unwrap_err(), smarm::SpawnError::NoSuchWorker(7));
    assert_eq!(smarm::spawn_actor(OneShot).unwrap_err(), smarm::SpawnError::NotInProcess);
    let a = rt.spawn_actor(OneShot).unwrap();
    let b = rt.spawn_actor(OneShot).unwrap();
    assert_eq!(rt.spawn_actor(OneShot).unwrap_err(), smarm::SpawnError::Full);
    a.send(0).unwrap();
    b.send(0).unwrap();
    settle(&mut s);
    assert_eq!(rt.live(), 0);
    rt.close();
    assert_eq!(rt.spawn_actor(OneShot).unwrap_err(), smarm::SpawnError::Closed);
}

/// The README's example, verbatim in substance.
#[test]
fn readme_counter_example() {
    struct Counter {
        total: u64,
    }
    enum Msg {
        Add(u64),
        Get(smarm::Sender<u64>),
    }
    impl Actor for Counter {
        type Msg = Msg;
        fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, msg: Msg) {
            match msg {
                Msg::Add(n) => self.total += n,
                Msg::Get(reply) => {
                    let _ = reply.send(self.total);
                }
            }
        }
    }
    let total = smarm::run(|| {
        let rt = smarm::current_runtime().unwrap();
        let counter = rt.spawn_actor(Counter { total: 0 }).unwrap();
        for n in 1..=10 {
            counter.send(Msg::Add(n)).unwrap();
        }
        let (tx, rx) = smarm::channel();
        counter.send(Msg::Get(tx)).unwrap();
        let total = rx.recv().unwrap();
        counter.stop().unwrap();
        total
    });
    assert_eq!(total, 55);
}

/// A root that panics while actors and processes live does not leave the
/// host waiting on them: they are stopped and the panic is reported.
#[test]
fn a_panicking_root_stops_the_rest() {
    let result = smarm::try_run_with(Config { worker_count: 2, ..Config::default() }, || {
        let rt = smarm::current_runtime().unwrap();
        let (_a, _) = recorder(&rt, 1);
        let _p = smarm::spawn_on(1, || loop {
            smarm::sleep(ms(5));
        })
        .unwrap();
        panic!("root gives up");
    });
    match result {
        Err(smarm::RunError::Panicked(m)) => assert!(m.contains("root gives up")),
        other => panic!("expected the root's panic, got {other:?}"),
    }
}

/// Sets its flag when it handles anything.
struct Flag {
    handled: Arc<AtomicBool>,
}

impl Actor for Flag {
    type Msg = ();
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, _: ()) {
        self.handled.store(true, Ordering::SeqCst);
    }
}

/// Sends to a same-worker `Flag` and checks, right after the send, that
/// the target did not run inside it.
struct Prober {
    target: Addr<Flag>,
    flag: Arc<AtomicBool>,
    recursed: Arc<AtomicBool>,
    probed: Arc<AtomicU64>,
}

impl Actor for Prober {
    type Msg = ();
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, _: ()) {
        self.flag.store(false, Ordering::SeqCst);
        self.target.send(()).unwrap();
        if self.flag.load(Ordering::SeqCst) {
            self.recursed.store(true, Ordering::SeqCst);
        }
        self.probed.fetch_add(1, Ordering::SeqCst);
    }
}

fn no_recursion(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let w = workers - 1;
        let flag = Arc::new(AtomicBool::new(false));
        let target = rt.spawn_actor_on(w, Flag { handled: flag.clone() }).unwrap();
        let recursed = Arc::new(AtomicBool::new(false));
        let probed = Arc::new(AtomicU64::new(0));
        let prober = rt
            .spawn_actor_on(
                w,
                Prober {
                    target: target.clone(),
                    flag: flag.clone(),
                    recursed: recursed.clone(),
                    probed: probed.clone(),
                },
            )
            .unwrap();
        for _ in 0..100 {
            prober.send(()).unwrap();
        }
        wait_until("probed", || probed.load(Ordering::SeqCst) == 100);
        assert!(!recursed.load(Ordering::SeqCst), "a same-worker send ran its target inside the sender");
        wait_until("delivered later", || flag.load(Ordering::SeqCst));
        prober.stop().unwrap();
        target.stop().unwrap();
    });
}
drive_tests!(no_recursion => same_worker_send_never_runs_the_target_inside_the_sender_1, same_worker_send_never_runs_the_target_inside_the_sender_4, same_worker_send_never_runs_the_target_inside_the_sender_engine);

/// `Engine::shutdown` stops actors as it stops processes: each runs its
/// `on_stop` with `Stopped`, and the engine returns.
#[test]
fn engine_shutdown_stops_actors() {
    let engine = smarm::Engine::builder().workers(4).build().unwrap();
    let rt = engine.runtime().clone();
    let logs: Vec<_> = (0..8).map(|w| recorder(&rt, w % 4)).collect();
    for (a, log) in &logs {
        a.send((0, 0)).unwrap();
        let start = std::time::Instant::now();
        while log.seen.lock().unwrap().is_empty() {
            assert!(start.elapsed() < Duration::from_secs(10));
            std::thread::sleep(ms(1));
        }
    }
    engine.shutdown();
    for (_, log) in &logs {
        assert_eq!(*log.stopped.lock().unwrap(), vec![ExitReason::Stopped]);
    }
    assert_eq!(rt.live(), 0);
}

// ------------------------------------------------------------- causality

/// What the first actor of a causal chain is told.
enum Causal {
    Setup(u32),
    Hello(u32),
}

/// Records the order of `Setup` and `Hello` per trial.
struct Configured {
    seen: Arc<Mutex<Vec<(bool, u32)>>>,
}

impl Actor for Configured {
    type Msg = Causal;
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, msg: Causal) {
        let entry = match msg {
            Causal::Setup(i) => (true, i),
            Causal::Hello(i) => (false, i),
        };
        self.seen.lock().unwrap().push(entry);
    }
}

/// On `i`, says hello to the configured actor.
struct Starter {
    target: Addr<Configured>,
}

impl Actor for Starter {
    type Msg = u32;
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, i: u32) {
        self.target.send(Causal::Hello(i)).unwrap();
    }
}

/// A process sends `Setup` to an actor on its own worker, then `Go` to an
/// actor on another worker whose handler sends `Hello` to the first:
/// `Setup` is handled first in every trial, whether the process waits at
/// once or works a while first.
fn causal_chain(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let b = smarm::spawn_actor(Configured { seen: seen.clone() }).unwrap();
        let rt = smarm::current_runtime().unwrap();
        let c = rt.spawn_actor_on(common::next_worker(workers), Starter { target: b.clone() }).unwrap();
        let trials = 200u32;
        for i in 0..trials {
            b.send(Causal::Setup(i)).unwrap();
            c.send(i).unwrap();
            if i % 2 == 0 {
                // Work a while before waiting, so the hello is back first.
                let start = std::time::Instant::now();
                while start.elapsed() < Duration::from_micros(50) {
                    std::hint::spin_loop();
                }
            }
            wait_until("both handled", || seen.lock().unwrap().len() == 2 * (i as usize + 1));
        }
        let seen = seen.lock().unwrap().clone();
        for (i, pair) in seen.chunks(2).enumerate() {
            assert_eq!(pair, [(true, i as u32), (false, i as u32)], "trial {i}: setup before hello");
        }
        b.stop().unwrap();
        c.stop().unwrap();
    });
}
drive_tests!(causal_chain => setup_then_start_keeps_causal_order_1, setup_then_start_keeps_causal_order_4, setup_then_start_keeps_causal_order_engine);
