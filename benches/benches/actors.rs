//! Handler actors against the task-based peers.
//!
//! `actor_ping_pong_same_worker` — 100,000 round trips between two actors
//! on one worker:
//! - `smarm/actors`: two handler actors under [`smarm::run`] (one worker);
//! - `tokio/mpsc`: two tasks on a `current_thread` runtime, unbounded
//!   channels;
//! - `ractor/current_thread`: two `ractor` actors on a `current_thread`
//!   tokio runtime.
//!
//! `actor_ping_pong_two_workers` — 10,000 round trips with the ends on two
//! workers: `smarm/engine_actors` (Engine, two workers, one actor on
//! each), `tokio/multi_thread_mpsc` and `ractor/multi_thread` (two tokio
//! worker threads).
//!
//! `skynet_1m_actors` — the skynet tree (a node makes ten children until
//! there are 1,000,000 leaves; each leaf reports its number, parents sum)
//! as handler actors on one worker, against tokio tasks with channels on
//! `current_thread`.
//!
//! `actor_fanout` — one actor sends 1,000,000 messages round-robin to 1,000
//! actors spread over four workers, against one tokio task sending to
//! 1,000 tasks on a four-thread runtime. Throughput is printed.
//!
//! `actor_timer_rearm` — the idle-timeout pattern: an actor handles
//! 100,000 messages (each sent to itself), and at each one cancels its
//! pending timer and sets a new one a second away:
//! - `smarm/send_after_cancel`: `Ctx::cancel_timer` + `Ctx::send_after`
//!   under [`smarm::run`] (one worker; an entry in the worker's table);
//! - `ractor/send_after_abort`: `ActorRef::send_after` (a tokio task per
//!   timer) + `JoinHandle::abort`, on a `current_thread` tokio runtime.
//!
//! One criterion iteration is the whole batch; runtimes start outside the
//! timed region where the peer allows it.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use ractor::{Actor as RactorActor, ActorProcessingErr, ActorRef};
use smarm::{Actor, Addr, Ctx};
use smarm_benches::measure;

mod common;
#[path = "common/fanout.rs"]
mod fanout;

fn same_worker_trips() -> u64 {
    if measure::quick() {
        1_000
    } else {
        100_000
    }
}

fn cross_worker_trips() -> u64 {
    if measure::quick() {
        1_000
    } else {
        10_000
    }
}

// ------------------------------------------------------------- ping-pong

/// Answers every number with the same number.
struct Pong;

impl Actor for Pong {
    type Msg = (u64, Addr<Ping>);
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, (n, back): (u64, Addr<Ping>)) {
        let _ = back.send(black_box(n));
    }
}

/// Sends `trips` numbers one at a time, then reports the time taken.
struct Ping {
    pong: Addr<Pong>,
    trips: u64,
    start: Option<Instant>,
    done: smarm::Sender<Duration>,
}

impl Actor for Ping {
    type Msg = u64;
    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        self.start = Some(Instant::now());
        let _ = self.pong.send((0, ctx.addr()));
    }
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, n: u64) {
        if n + 1 == self.trips {
            let _ = self.done.send(self.start.map_or(Duration::ZERO, |s| s.elapsed()));
            ctx.stop_self();
        } else {
            let _ = self.pong.send((n + 1, ctx.addr()));
        }
    }
}

/// Runs `trips` round trips between a `Ping` on `ping_worker` and a
/// `Pong` on `pong_worker`, from inside a process.
fn smarm_actor_trips(trips: u64, ping_worker: usize, pong_worker: usize) -> Duration {
    let rt = smarm::current_runtime().expect("in a process");
    let pong = rt.spawn_actor_on(pong_worker, Pong).expect("spawn pong");
    let (done, elapsed) = smarm::channel();
    rt.spawn_actor_on(ping_worker, Ping { pong: pong.clone(), trips, start: None, done })
        .expect("spawn ping");
    let elapsed = elapsed.recv().expect("ping reports");
    pong.stop().expect("pong alive");
    elapsed
}

fn smarm_same_worker(iterations: u64) -> Duration {
    smarm::run(move || smarm_actor_trips(iterations * same_worker_trips(), 0, 0))
}

fn smarm_two_workers(iterations: u64) -> Duration {
    let engine = smarm::Engine::builder().workers(2).build().expect("engine starts");
    engine.block_on(move || smarm_actor_trips(iterations * cross_worker_trips(), 0, 1)).expect("engine runs")
}

/// ractor's pong: echoes to the ping actor.
struct RPong;

impl RactorActor for RPong {
    type Msg = (u64, ActorRef<u64>);
    type State = ();
    type Arguments = ();
    async fn pre_start(&self, _: ActorRef<Self::Msg>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
    async fn handle(
        &self,
        _: ActorRef<Self::Msg>,
        (n, back): Self::Msg,
        _: &mut (),
    ) -> Result<(), ActorProcessingErr> {
        let _ = back.cast(black_box(n));
        Ok(())
    }
}

/// ractor's ping: `trips` round trips, then reports the time.
struct RPing;

struct RPingState {
    pong: ActorRef<(u64, ActorRef<u64>)>,
    trips: u64,
    start: Instant,
    done: Option<tokio::sync::oneshot::Sender<Duration>>,
}

impl RactorActor for RPing {
    type Msg = u64;
    type State = RPingState;
    type Arguments = (ActorRef<(u64, ActorRef<u64>)>, u64, tokio::sync::oneshot::Sender<Duration>);
    async fn pre_start(
        &self,
        myself: ActorRef<u64>,
        (pong, trips, done): Self::Arguments,
    ) -> Result<RPingState, ActorProcessingErr> {
        let _ = pong.cast((0, myself));
        Ok(RPingState { pong, trips, start: Instant::now(), done: Some(done) })
    }
    async fn handle(
        &self,
        myself: ActorRef<u64>,
        n: u64,
        state: &mut RPingState,
    ) -> Result<(), ActorProcessingErr> {
        if n + 1 == state.trips {
            if let Some(done) = state.done.take() {
                let _ = done.send(state.start.elapsed());
            }
            myself.stop(None);
        } else {
            let _ = state.pong.cast((n + 1, myself));
        }
        Ok(())
    }
}

fn ractor_ping_pong(runtime: &tokio::runtime::Runtime, trips: u64) -> Duration {
    runtime.block_on(async move {
        let (pong, pong_handle) = RPong::spawn(None, RPong, ()).await.expect("spawn pong");
        let (done, elapsed) = tokio::sync::oneshot::channel();
        let (_ping, ping_handle) =
            RPing::spawn(None, RPing, (pong.clone(), trips, done)).await.expect("spawn ping");
        let elapsed = elapsed.await.expect("ping reports");
        ping_handle.await.expect("ping ends");
        pong.stop(None);
        pong_handle.await.expect("pong ends");
        elapsed
    })
}

fn ping_pong(criterion: &mut Criterion) {
    let mut group = criterion.benchmark_group("actor_ping_pong_same_worker");
    common::short_iterations(&mut group);
    group.bench_function("smarm/actors", |b| b.iter_custom(smarm_same_worker));
    let current = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio starts");
    group.bench_function("tokio/mpsc", |b| {
        b.iter_custom(|i| common::tokio_ping_pong(&current, i * same_worker_trips()))
    });
    group.bench_function("ractor/current_thread", |b| {
        b.iter_custom(|i| ractor_ping_pong(&current, i * same_worker_trips()))
    });
    group.finish();

    let mut group = criterion.benchmark_group("actor_ping_pong_two_workers");
    common::short_iterations(&mut group);
    group.bench_function("smarm/engine_actors", |b| b.iter_custom(smarm_two_workers));
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio starts");
    group.bench_function("tokio/multi_thread_mpsc", |b| {
        b.iter_custom(|i| common::tokio_ping_pong(&multi, i * cross_worker_trips()))
    });
    group.bench_function("ractor/multi_thread", |b| {
        b.iter_custom(|i| ractor_ping_pong(&multi, i * cross_worker_trips()))
    });
    group.finish();
}

// ---------------------------------------------------------------- skynet

const FAN_OUT: u64 = 10;

fn skynet_leaves() -> u64 {
    if measure::quick() {
        1_000
    } else {
        1_000_000
    }
}

/// Where a skynet node reports its sum.
enum Parent {
    Node(Addr<Node>),
    Root(smarm::Sender<u64>),
}

/// A skynet node: a leaf reports its number at once; an inner node spawns
/// ten children on its worker and reports their sum.
struct Node {
    first: u64,
    leaves: u64,
    parent: Option<Parent>,
    sum: u64,
    waiting: u64,
}

impl Node {
    fn report(&mut self, ctx: &mut Ctx<'_, Self>, value: u64) {
        match self.parent.take() {
            Some(Parent::Node(parent)) => {
                let _ = parent.send(value);
            }
            Some(Parent::Root(root)) => {
                let _ = root.send(value);
            }
            None => {}
        }
        ctx.stop_self();
    }
}

impl Actor for Node {
    type Msg = u64;
    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        if self.leaves == 1 {
            let first = self.first;
            self.report(ctx, first);
            return;
        }
        let share = self.leaves / FAN_OUT;
        let me = ctx.addr();
        for child in 0..FAN_OUT {
            let node = Node {
                first: self.first + child * share,
                leaves: share,
                parent: Some(Parent::Node(me.clone())),
                sum: 0,
                waiting: 0,
            };
            ctx.spawn(node).expect("the slab grows with the tree");
        }
        self.waiting = FAN_OUT;
    }
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, value: u64) {
        self.sum += value;
        self.waiting -= 1;
        if self.waiting == 0 {
            let sum = self.sum;
            self.report(ctx, sum);
        }
    }
}

fn total(leaves: u64) -> u64 {
    leaves * (leaves - 1) / 2
}

fn smarm_skynet(iterations: u64) -> Duration {
    let leaves = skynet_leaves();
    smarm::run(move || {
        let rt = smarm::current_runtime().expect("in a process");
        let start = Instant::now();
        for _ in 0..iterations {
            let (to_root, result) = smarm::channel();
            let root = Node {
                first: 0,
                leaves: black_box(leaves),
                parent: Some(Parent::Root(to_root)),
                sum: 0,
                waiting: 0,
            };
            rt.spawn_actor(root).expect("spawn the tree");
            assert_eq!(result.recv().expect("the tree reports"), total(leaves));
        }
        start.elapsed()
    })
}

fn skynet(criterion: &mut Criterion) {
    let mut group = criterion.benchmark_group("skynet_1m_actors");
    common::long_iterations(&mut group, 10, Duration::from_secs(10));
    group.bench_function("smarm/actors", |b| b.iter_custom(smarm_skynet));
    let current = tokio::runtime::Builder::new_current_thread().build().expect("tokio starts");
    group.bench_function("tokio/tasks", |b| {
        b.iter_custom(|i| common::tokio_skynet(&current, i, skynet_leaves()))
    });
    group.finish();
}

// ---------------------------------------------------------------- fanout

const SINKS: usize = 1_000;

fn fanout_messages() -> u64 {
    if measure::quick() {
        10_000
    } else {
        1_000_000
    }
}

fn smarm_fanout(iterations: u64) -> Duration {
    use fanout::{Fan, Sink};
    let engine = smarm::Engine::builder().workers(4).build().expect("engine starts");
    engine
        .block_on(move || {
            let rt = smarm::current_runtime().expect("in a process");
            let messages = fanout_messages();
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                let (done, finished) = smarm::channel();
                let sinks: Vec<_> = (0..SINKS)
                    .map(|_| {
                        rt.spawn_actor(Sink { expect: messages / SINKS as u64, got: 0, done: done.clone() })
                            .expect("spawn sink")
                    })
                    .collect();
                let fan = rt.spawn_actor_on(0, Fan { sinks: sinks.clone(), messages }).expect("spawn fan");
                let start = Instant::now();
                fan.send(()).expect("fan alive");
                for _ in 0..SINKS {
                    finished.recv().expect("every sink reports");
                }
                total += start.elapsed();
                for sink in &sinks {
                    sink.stop().expect("sink alive");
                }
            }
            total
        })
        .expect("engine runs")
}

fn tokio_fanout(runtime: &tokio::runtime::Runtime, iterations: u64) -> Duration {
    let messages = fanout_messages();
    runtime.block_on(async move {
        let mut total = Duration::ZERO;
        for _ in 0..iterations {
            let (done, mut finished) = tokio::sync::mpsc::unbounded_channel::<()>();
            let mut senders = Vec::with_capacity(SINKS);
            for _ in 0..SINKS {
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
                let done = done.clone();
                let expect = messages / SINKS as u64;
                tokio::spawn(async move {
                    let mut got = 0;
                    while let Some(value) = rx.recv().await {
                        black_box(value);
                        got += 1;
                        if got == expect {
                            let _ = done.send(());
                            break;
                        }
                    }
                });
                senders.push(tx);
            }
            let start = Instant::now();
            tokio::spawn(async move {
                for i in 0..messages {
                    let _ = senders[i as usize % SINKS].send(black_box(i));
                }
            });
            for _ in 0..SINKS {
                finished.recv().await.expect("every sink reports");
            }
            total += start.elapsed();
        }
        total
    })
}

fn fanout(criterion: &mut Criterion) {
    let mut group = criterion.benchmark_group("actor_fanout");
    common::long_iterations(&mut group, 10, Duration::from_secs(10));
    group.bench_function("smarm/actors_4_workers", |b| b.iter_custom(smarm_fanout));
    let multi = tokio::runtime::Builder::new_multi_thread().worker_threads(4).build().expect("tokio starts");
    group.bench_function("tokio/tasks_4_threads", |b| b.iter_custom(|i| tokio_fanout(&multi, i)));
    group.finish();
}

// ------------------------------------------------------------ timer re-arm

fn rearms() -> u64 {
    if measure::quick() {
        1_000
    } else {
        100_000
    }
}

/// The timer a message pushes back: far enough never to fire in a run.
const IDLE_TIMEOUT: Duration = Duration::from_secs(1);

/// What the re-arming actor is sent.
enum Rearm {
    Next(u64),
    Timeout,
}

/// Handles `messages` messages sent to itself, re-arming its idle timer at
/// each, then reports the time taken.
struct Rearmer {
    messages: u64,
    timer: Option<smarm::actor::TimerRef>,
    start: Option<Instant>,
    done: smarm::Sender<Duration>,
}

impl Actor for Rearmer {
    type Msg = Rearm;
    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        self.start = Some(Instant::now());
        let _ = ctx.addr().send(Rearm::Next(0));
    }
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, msg: Rearm) {
        let Rearm::Next(n) = msg else { return };
        if let Some(timer) = self.timer.take() {
            black_box(ctx.cancel_timer(&timer));
        }
        self.timer = Some(ctx.send_after(IDLE_TIMEOUT, Rearm::Timeout));
        if n + 1 == self.messages {
            let _ = self.done.send(self.start.map_or(Duration::ZERO, |s| s.elapsed()));
            ctx.stop_self();
        } else {
            let _ = ctx.addr().send(Rearm::Next(n + 1));
        }
    }
}

fn smarm_rearm(iterations: u64) -> Duration {
    smarm::run(move || {
        let rt = smarm::current_runtime().expect("in a process");
        let (done, elapsed) = smarm::channel();
        let messages = iterations * rearms();
        rt.spawn_actor(Rearmer { messages, timer: None, start: None, done }).expect("spawn");
        elapsed.recv().expect("the actor reports")
    })
}

/// ractor's re-arming actor.
struct RRearmer;

struct RRearmState {
    messages: u64,
    timer: Option<tokio::task::JoinHandle<Result<(), ractor::MessagingErr<Rearm>>>>,
    start: Instant,
    done: Option<tokio::sync::oneshot::Sender<Duration>>,
}

impl RactorActor for RRearmer {
    type Msg = Rearm;
    type State = RRearmState;
    type Arguments = (u64, tokio::sync::oneshot::Sender<Duration>);
    async fn pre_start(
        &self,
        myself: ActorRef<Rearm>,
        (messages, done): Self::Arguments,
    ) -> Result<RRearmState, ActorProcessingErr> {
        let _ = myself.cast(Rearm::Next(0));
        Ok(RRearmState { messages, timer: None, start: Instant::now(), done: Some(done) })
    }
    async fn handle(
        &self,
        myself: ActorRef<Rearm>,
        msg: Rearm,
        state: &mut RRearmState,
    ) -> Result<(), ActorProcessingErr> {
        let Rearm::Next(n) = msg else { return Ok(()) };
        if let Some(timer) = state.timer.take() {
            timer.abort();
        }
        state.timer = Some(myself.send_after(IDLE_TIMEOUT, || Rearm::Timeout));
        if n + 1 == state.messages {
            if let Some(done) = state.done.take() {
                let _ = done.send(state.start.elapsed());
            }
            if let Some(timer) = state.timer.take() {
                timer.abort();
            }
            myself.stop(None);
        } else {
            let _ = myself.cast(Rearm::Next(n + 1));
        }
        Ok(())
    }
}

fn ractor_rearm(runtime: &tokio::runtime::Runtime, iterations: u64) -> Duration {
    runtime.block_on(async move {
        let (done, elapsed) = tokio::sync::oneshot::channel();
        let (_actor, handle) =
            RRearmer::spawn(None, RRearmer, (iterations * rearms(), done)).await.expect("spawn");
        let elapsed = elapsed.await.expect("the actor reports");
        handle.await.expect("the actor ends");
        elapsed
    })
}

fn timer_rearm(criterion: &mut Criterion) {
    let mut group = criterion.benchmark_group("actor_timer_rearm");
    common::short_iterations(&mut group);
    group.bench_function("smarm/send_after_cancel", |b| b.iter_custom(smarm_rearm));
    let current = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio starts");
    group.bench_function("ractor/send_after_abort", |b| b.iter_custom(|i| ractor_rearm(&current, i)));
    group.finish();
}

criterion_group!(benches, ping_pong, skynet, fanout, timer_rearm);
criterion_main!(benches);
