//! The Savina benches as smarm handler actors (`smarm::Actor`): a struct
//! per actor, one `handle` per message, no stack of its own. The root
//! process plays Savina's main actor where one is needed, spawning actors
//! round-robin over the workers and hearing their results on a channel.
//! An actor that spawns in its turn (fib's calls) uses `Ctx::spawn`, which
//! keeps the child on its own worker, as `tokio::spawn` inside a task and
//! `erlang:spawn` do.

use std::sync::Arc;
use std::time::{Duration, Instant};

use smarm::{channel, Actor, Addr, Ctx, Runtime, Sender};
use smarm_benches::savina::{computation, fib, Bench, Colour, Neighbours, Params};

/// Runs `bench` once on `workers` workers; the time excludes the
/// runtime's start.
pub fn run(bench: Bench, params: Params, workers: usize) -> Duration {
    let timed = move || {
        let runtime = smarm::current_runtime().expect("in a process");
        let start = Instant::now();
        match bench {
            Bench::PingPong => ping_pong(&runtime, params.pings),
            Bench::Counting => counting(&runtime, params.count),
            Bench::ThreadRing => thread_ring(&runtime, params.ring, params.hops),
            Bench::ForkJoinCreate => fork_join_create(&runtime, params.create),
            Bench::ForkJoinThroughput => {
                fork_join_throughput(&runtime, params.throughput_actors, params.throughput_messages)
            }
            Bench::Fib => {
                let (to_root, result) = channel();
                let root = FibCall { n: params.fib, parent: Parent::Root(to_root), sum: 0, waiting: 2 };
                runtime.spawn_actor(root).expect("spawn the root call");
                assert_eq!(result.recv().expect("the root call reports"), fib(params.fib), "fib");
            }
            Bench::Chameneos => chameneos(&runtime, params.chameneos, params.meetings),
            Bench::Big => big(&runtime, params.big_actors, params.big_pings),
        }
        start.elapsed()
    };
    if workers == 1 {
        smarm::run(timed)
    } else {
        let engine = smarm::Engine::builder().workers(workers).build().expect("engine starts");
        engine.block_on(timed).expect("engine runs")
    }
}

// ------------------------------------------------------------ ping-pong

struct Pong;

impl Actor for Pong {
    type Msg = Addr<Ping>;
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, ping: Addr<Ping>) {
        let _ = ping.send(());
    }
}

struct Ping {
    pong: Addr<Pong>,
    left: u64,
    pongs: u64,
    done: Sender<u64>,
}

impl Actor for Ping {
    type Msg = ();
    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        let _ = self.pong.send(ctx.addr());
    }
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, (): ()) {
        self.pongs += 1;
        self.left -= 1;
        if self.left == 0 {
            let _ = self.done.try_send(self.pongs);
            ctx.stop_self();
        } else {
            let _ = self.pong.send(ctx.addr());
        }
    }
}

fn ping_pong(runtime: &Runtime, pings: u64) {
    let pong = runtime.spawn_actor(Pong).expect("spawn pong");
    let (done, finished) = channel();
    runtime.spawn_actor(Ping { pong: pong.clone(), left: pings, pongs: 0, done }).expect("spawn ping");
    assert_eq!(finished.recv().expect("ping reports"), pings, "ping-pong: pongs received");
    pong.stop().expect("pong alive");
}

// ------------------------------------------------------------- counting

enum Count {
    Increment,
    Total(Addr<Producer>),
}

struct Counter {
    total: u64,
}

impl Actor for Counter {
    type Msg = Count;
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, message: Count) {
        match message {
            Count::Increment => self.total += 1,
            Count::Total(producer) => {
                let _ = producer.send(self.total);
                ctx.stop_self();
            }
        }
    }
}

/// Sends the increments, then asks for the total and reports it.
struct Producer {
    counter: Addr<Counter>,
    count: u64,
    done: Sender<u64>,
}

impl Actor for Producer {
    type Msg = u64;
    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        for _ in 0..self.count {
            let _ = self.counter.send(Count::Increment);
        }
        let _ = self.counter.send(Count::Total(ctx.addr()));
    }
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, total: u64) {
        let _ = self.done.try_send(total);
        ctx.stop_self();
    }
}

fn counting(runtime: &Runtime, count: u64) {
    let counter = runtime.spawn_actor(Counter { total: 0 }).expect("spawn counter");
    let (done, total) = channel();
    runtime.spawn_actor(Producer { counter, count, done }).expect("spawn producer");
    assert_eq!(total.recv().expect("producer reports"), count, "counting: total");
}

// ---------------------------------------------------------- thread ring

enum Ring {
    Next(Addr<Member>),
    Token(u64),
}

struct Member {
    next: Option<Addr<Member>>,
    hops: u64,
    done: Sender<u64>,
}

impl Actor for Member {
    type Msg = Ring;
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, message: Ring) {
        match message {
            Ring::Next(next) => self.next = Some(next),
            Ring::Token(token) if token == self.hops => {
                let _ = self.done.try_send(token);
            }
            Ring::Token(token) => {
                let next = self.next.as_ref().expect("the ring is closed before the token starts");
                let _ = next.send(Ring::Token(token + 1));
            }
        }
    }
}

/// Built backwards, each member spawned knowing its successor; the first
/// learns its successor by message, then gets the token (the same sender,
/// so in that order).
fn thread_ring(runtime: &Runtime, ring: usize, hops: u64) {
    let (done, finished) = channel();
    let member = |next| Member { next, hops, done: done.clone() };
    let first = runtime.spawn_actor(member(None)).expect("spawn member");
    let mut members = vec![first.clone()];
    let mut next = first.clone();
    for _ in 1..ring {
        next = runtime.spawn_actor(member(Some(next))).expect("spawn member");
        members.push(next.clone());
    }
    first.send(Ring::Next(next)).expect("first alive");
    first.send(Ring::Token(0)).expect("first alive");
    assert_eq!(finished.recv().expect("a member reports"), hops, "thread ring: hops");
    for member in members {
        member.stop().expect("member alive");
    }
}

// ------------------------------------------------------------ fork-join

/// Does `messages` computations, then reports how many and stops.
struct Worker {
    left: u64,
    handled: u64,
    done: Sender<u64>,
}

impl Actor for Worker {
    type Msg = f64;
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, theta: f64) {
        computation(theta);
        self.handled += 1;
        self.left -= 1;
        if self.left == 0 {
            let _ = self.done.try_send(self.handled);
            ctx.stop_self();
        }
    }
}

fn fork_join_create(runtime: &Runtime, actors: u64) {
    let (done, finished) = channel();
    for _ in 0..actors {
        let worker = Worker { left: 1, handled: 0, done: done.clone() };
        runtime.spawn_actor(worker).expect("spawn worker").send(37.2).expect("worker alive");
    }
    drop(done);
    let created: u64 = std::iter::from_fn(|| finished.recv().ok()).sum();
    assert_eq!(created, actors, "fork-join create: workers that reported");
}

fn fork_join_throughput(runtime: &Runtime, actors: usize, messages: u64) {
    let (done, finished) = channel();
    let workers: Vec<Addr<Worker>> = (0..actors)
        .map(|_| {
            let worker = Worker { left: messages, handled: 0, done: done.clone() };
            runtime.spawn_actor(worker).expect("spawn worker")
        })
        .collect();
    drop(done);
    for _ in 0..messages {
        for worker in &workers {
            worker.send(37.2).expect("worker alive");
        }
    }
    let handled: u64 = std::iter::from_fn(|| finished.recv().ok()).sum();
    assert_eq!(handled, actors as u64 * messages, "fork-join throughput: messages handled");
}

// ------------------------------------------------------------------ fib

enum Parent {
    Root(Sender<u64>),
    Call(Addr<FibCall>),
}

/// One call: a leaf reports 1; any other spawns its two sub-calls (on its
/// own worker) and reports their sum.
struct FibCall {
    n: u32,
    parent: Parent,
    sum: u64,
    waiting: u8,
}

impl FibCall {
    fn report(&self, ctx: &mut Ctx<'_, Self>, value: u64) {
        let _ = match &self.parent {
            Parent::Root(root) => root.try_send(value).is_ok(),
            Parent::Call(call) => call.send(value).is_ok(),
        };
        ctx.stop_self();
    }
}

impl Actor for FibCall {
    type Msg = u64;
    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        if self.n <= 2 {
            self.report(ctx, 1);
            return;
        }
        for n in [self.n - 1, self.n - 2] {
            let call = FibCall { n, parent: Parent::Call(ctx.addr()), sum: 0, waiting: 2 };
            ctx.spawn(call).expect("the slab grows");
        }
    }
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, value: u64) {
        self.sum += value;
        self.waiting -= 1;
        if self.waiting == 0 {
            self.report(ctx, self.sum);
        }
    }
}

// ------------------------------------------------------------ chameneos

/// Pairs requests; once the meetings are done, tells each chameneo that
/// asks to stop.
struct Mall {
    left: u64,
    waiting: Option<Addr<Chameneo>>,
}

impl Actor for Mall {
    type Msg = (Addr<Chameneo>, Colour);
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, (from, colour): (Addr<Chameneo>, Colour)) {
        if self.left == 0 {
            let _ = from.send(Meet::Stop);
        } else if let Some(first) = self.waiting.take() {
            let _ = first.send(Meet::Partner(from, colour));
            self.left -= 1;
        } else {
            self.waiting = Some(from);
        }
    }
}

enum Meet {
    Partner(Addr<Chameneo>, Colour),
    Change(Colour),
    Stop,
}

/// Asks the mall for a partner; the first of a pair tells the second the
/// colour they both take.
struct Chameneo {
    mall: Addr<Mall>,
    colour: Colour,
    met: u64,
    done: Sender<u64>,
}

impl Actor for Chameneo {
    type Msg = Meet;
    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        let _ = self.mall.send((ctx.addr(), self.colour));
    }
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, message: Meet) {
        match message {
            Meet::Partner(other, theirs) => {
                self.colour = self.colour.complement(theirs);
                let _ = other.send(Meet::Change(self.colour));
            }
            Meet::Change(colour) => self.colour = colour,
            Meet::Stop => {
                let _ = self.done.try_send(self.met);
                ctx.stop_self();
                return;
            }
        }
        self.met += 1;
        let _ = self.mall.send((ctx.addr(), self.colour));
    }
}

fn chameneos(runtime: &Runtime, count: usize, meetings: u64) {
    let mall = runtime.spawn_actor(Mall { left: meetings, waiting: None }).expect("spawn mall");
    let (done, finished) = channel();
    for index in 0..count {
        let chameneo = Chameneo { mall: mall.clone(), colour: Colour::of(index), met: 0, done: done.clone() };
        runtime.spawn_actor(chameneo).expect("spawn chameneo");
    }
    drop(done);
    let met: u64 = std::iter::from_fn(|| finished.recv().ok()).sum();
    mall.stop().expect("mall alive");
    assert_eq!(met, 2 * meetings, "chameneos: meetings counted by both sides");
}

// ------------------------------------------------------------------ big

enum Big {
    Peers(Arc<Vec<Addr<BigActor>>>),
    Ping(usize),
    Pong,
}

/// Pings a random other, one at a time, answering pings meanwhile (those
/// that come before it knows its peers wait in `early`).
struct BigActor {
    me: usize,
    peers: Option<Arc<Vec<Addr<BigActor>>>>,
    early: Vec<usize>,
    neighbours: Neighbours,
    left: u64,
    pongs: u64,
    done: Sender<u64>,
}

impl BigActor {
    fn ping_next(&mut self) {
        let peers = self.peers.as_ref().expect("peers known");
        let _ = peers[self.neighbours.next_index()].send(Big::Ping(self.me));
    }
}

impl Actor for BigActor {
    type Msg = Big;
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, message: Big) {
        match message {
            Big::Peers(peers) => {
                for from in self.early.drain(..) {
                    let _ = peers[from].send(Big::Pong);
                }
                self.peers = Some(peers);
                self.ping_next();
            }
            Big::Ping(from) => match &self.peers {
                Some(peers) => {
                    let _ = peers[from].send(Big::Pong);
                }
                None => self.early.push(from),
            },
            Big::Pong => {
                self.pongs += 1;
                self.left -= 1;
                if self.left == 0 {
                    let _ = self.done.try_send(self.pongs);
                } else {
                    self.ping_next();
                }
            }
        }
    }
}

fn big(runtime: &Runtime, actors: usize, pings: u64) {
    let (done, finished) = channel();
    let peers: Vec<Addr<BigActor>> = (0..actors)
        .map(|me| {
            let actor = BigActor {
                me,
                peers: None,
                early: Vec::new(),
                neighbours: Neighbours::new(me, actors),
                left: pings,
                pongs: 0,
                done: done.clone(),
            };
            runtime.spawn_actor(actor).expect("spawn actor")
        })
        .collect();
    let peers = Arc::new(peers);
    for peer in peers.iter() {
        peer.send(Big::Peers(peers.clone())).expect("actor alive");
    }
    let mut pongs = 0;
    for _ in 0..actors {
        pongs += finished.recv().expect("every actor reports");
    }
    for peer in peers.iter() {
        peer.stop().expect("actor alive");
    }
    assert_eq!(pongs, actors as u64 * pings, "big: pongs received");
}
