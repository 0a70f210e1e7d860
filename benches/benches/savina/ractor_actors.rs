//! The Savina benches as ractor actors on tokio (`current_thread` for one
//! worker, `multi_thread` for more): an actor type per role, messages by
//! `cast`. The `block_on` future plays Savina's main actor, hearing
//! results on a tokio channel.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use smarm_benches::savina::{computation, fib, Bench, Colour, Neighbours, Params};
use tokio::sync::mpsc::{unbounded_channel as channel, UnboundedSender as Sender};

type Handled = Result<(), ActorProcessingErr>;

/// Runs `bench` once on `workers` worker threads; the time excludes the
/// runtime's start.
pub fn run(bench: Bench, params: Params, workers: usize) -> Duration {
    let runtime = if workers == 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(workers).enable_all().build()
    };
    runtime.expect("tokio starts").block_on(async move {
        let start = Instant::now();
        match bench {
            Bench::PingPong => ping_pong(params.pings).await,
            Bench::Counting => counting(params.count).await,
            Bench::ThreadRing => thread_ring(params.ring, params.hops).await,
            Bench::ForkJoinCreate => fork_join_create(params.create).await,
            Bench::ForkJoinThroughput => {
                fork_join_throughput(params.throughput_actors, params.throughput_messages).await
            }
            Bench::Fib => {
                let (to_root, mut result) = channel();
                spawn(FibCall, (params.fib, Parent::Root(to_root))).await;
                assert_eq!(result.recv().await.expect("the root call reports"), fib(params.fib), "fib");
            }
            Bench::Chameneos => chameneos(params.chameneos, params.meetings).await,
            Bench::Big => big(params.big_actors, params.big_pings).await,
        }
        start.elapsed()
    })
}

async fn spawn<A: Actor>(actor: A, arguments: A::Arguments) -> ActorRef<A::Msg> {
    let (actor, _handle) = Actor::spawn(None, actor, arguments).await.expect("ractor spawns");
    actor
}

// ------------------------------------------------------------ ping-pong

struct Pong;

impl Actor for Pong {
    type Msg = ActorRef<()>;
    type State = ();
    type Arguments = ();
    async fn pre_start(&self, _: ActorRef<Self::Msg>, (): ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
    async fn handle(&self, _: ActorRef<Self::Msg>, ping: ActorRef<()>, _: &mut ()) -> Handled {
        let _ = ping.cast(());
        Ok(())
    }
}

struct Ping;

struct PingState {
    pong: ActorRef<ActorRef<()>>,
    left: u64,
    pongs: u64,
    done: Sender<u64>,
}

impl Actor for Ping {
    type Msg = ();
    type State = PingState;
    type Arguments = (ActorRef<ActorRef<()>>, u64, Sender<u64>);
    async fn pre_start(
        &self,
        myself: ActorRef<()>,
        (pong, left, done): Self::Arguments,
    ) -> Result<PingState, ActorProcessingErr> {
        let _ = pong.cast(myself);
        Ok(PingState { pong, left, pongs: 0, done })
    }
    async fn handle(&self, myself: ActorRef<()>, (): (), state: &mut PingState) -> Handled {
        state.pongs += 1;
        state.left -= 1;
        if state.left == 0 {
            let _ = state.done.send(state.pongs);
            myself.stop(None);
        } else {
            let _ = state.pong.cast(myself);
        }
        Ok(())
    }
}

async fn ping_pong(pings: u64) {
    let pong = spawn(Pong, ()).await;
    let (done, mut finished) = channel();
    spawn(Ping, (pong.clone(), pings, done)).await;
    assert_eq!(finished.recv().await.expect("ping reports"), pings, "ping-pong: pongs received");
    pong.stop(None);
}

// ------------------------------------------------------------- counting

enum Count {
    Increment,
    Total(ActorRef<u64>),
}

struct Counter;

impl Actor for Counter {
    type Msg = Count;
    type State = u64;
    type Arguments = ();
    async fn pre_start(&self, _: ActorRef<Count>, (): ()) -> Result<u64, ActorProcessingErr> {
        Ok(0)
    }
    async fn handle(&self, myself: ActorRef<Count>, message: Count, total: &mut u64) -> Handled {
        match message {
            Count::Increment => *total += 1,
            Count::Total(producer) => {
                let _ = producer.cast(*total);
                myself.stop(None);
            }
        }
        Ok(())
    }
}

/// Sends the increments, then asks for the total and reports it.
struct Producer;

impl Actor for Producer {
    type Msg = u64;
    type State = Sender<u64>;
    type Arguments = (ActorRef<Count>, u64, Sender<u64>);
    async fn pre_start(
        &self,
        myself: ActorRef<u64>,
        (counter, count, done): Self::Arguments,
    ) -> Result<Sender<u64>, ActorProcessingErr> {
        for _ in 0..count {
            let _ = counter.cast(Count::Increment);
        }
        let _ = counter.cast(Count::Total(myself));
        Ok(done)
    }
    async fn handle(&self, myself: ActorRef<u64>, total: u64, done: &mut Sender<u64>) -> Handled {
        let _ = done.send(total);
        myself.stop(None);
        Ok(())
    }
}

async fn counting(count: u64) {
    let counter = spawn(Counter, ()).await;
    let (done, mut total) = channel();
    spawn(Producer, (counter, count, done)).await;
    assert_eq!(total.recv().await.expect("producer reports"), count, "counting: total");
}

// ---------------------------------------------------------- thread ring

enum Ring {
    Next(ActorRef<Ring>),
    Token(u64),
}

struct Member;

struct MemberState {
    next: Option<ActorRef<Ring>>,
    hops: u64,
    done: Sender<u64>,
}

impl Actor for Member {
    type Msg = Ring;
    type State = MemberState;
    type Arguments = MemberState;
    async fn pre_start(
        &self,
        _: ActorRef<Ring>,
        state: MemberState,
    ) -> Result<MemberState, ActorProcessingErr> {
        Ok(state)
    }
    async fn handle(&self, _: ActorRef<Ring>, message: Ring, state: &mut MemberState) -> Handled {
        match message {
            Ring::Next(next) => state.next = Some(next),
            Ring::Token(token) if token == state.hops => {
                let _ = state.done.send(token);
            }
            Ring::Token(token) => {
                let next = state.next.as_ref().expect("the ring is closed before the token starts");
                let _ = next.cast(Ring::Token(token + 1));
            }
        }
        Ok(())
    }
}

async fn thread_ring(ring: usize, hops: u64) {
    let (done, mut finished) = channel();
    let member = |next| MemberState { next, hops, done: done.clone() };
    let first = spawn(Member, member(None)).await;
    let mut members = vec![first.clone()];
    let mut next = first.clone();
    for _ in 1..ring {
        next = spawn(Member, member(Some(next))).await;
        members.push(next.clone());
    }
    first.cast(Ring::Next(next)).expect("first alive");
    first.cast(Ring::Token(0)).expect("first alive");
    assert_eq!(finished.recv().await.expect("a member reports"), hops, "thread ring: hops");
    for member in members {
        member.stop(None);
    }
}

// ------------------------------------------------------------ fork-join

/// Does `left` computations, then reports how many and stops.
struct Worker;

struct WorkerState {
    left: u64,
    handled: u64,
    done: Sender<u64>,
}

impl Actor for Worker {
    type Msg = f64;
    type State = WorkerState;
    type Arguments = (u64, Sender<u64>);
    async fn pre_start(
        &self,
        _: ActorRef<f64>,
        (left, done): (u64, Sender<u64>),
    ) -> Result<WorkerState, ActorProcessingErr> {
        Ok(WorkerState { left, handled: 0, done })
    }
    async fn handle(&self, myself: ActorRef<f64>, theta: f64, state: &mut WorkerState) -> Handled {
        computation(theta);
        state.handled += 1;
        state.left -= 1;
        if state.left == 0 {
            let _ = state.done.send(state.handled);
            myself.stop(None);
        }
        Ok(())
    }
}

async fn fork_join_create(actors: u64) {
    let (done, mut finished) = channel();
    for _ in 0..actors {
        spawn(Worker, (1, done.clone())).await.cast(37.2).expect("worker alive");
    }
    drop(done);
    let mut created = 0;
    while let Some(count) = finished.recv().await {
        created += count;
    }
    assert_eq!(created, actors, "fork-join create: workers that reported");
}

async fn fork_join_throughput(actors: usize, messages: u64) {
    let (done, mut finished) = channel();
    let mut workers = Vec::with_capacity(actors);
    for _ in 0..actors {
        workers.push(spawn(Worker, (messages, done.clone())).await);
    }
    drop(done);
    for _ in 0..messages {
        for worker in &workers {
            worker.cast(37.2).expect("worker alive");
        }
    }
    let mut handled = 0;
    while let Some(count) = finished.recv().await {
        handled += count;
    }
    assert_eq!(handled, actors as u64 * messages, "fork-join throughput: messages handled");
}

// ------------------------------------------------------------------ fib

enum Parent {
    Root(Sender<u64>),
    Call(ActorRef<FibMessage>),
}

enum FibMessage {
    /// Sent to itself from `pre_start`, so that spawning the sub-calls
    /// does not hold up the parent's `spawn`.
    Start,
    Result(u64),
}

/// One call: a leaf reports 1; any other spawns its two sub-calls and
/// reports their sum.
struct FibCall;

struct FibState {
    n: u32,
    parent: Parent,
    sum: u64,
    waiting: u8,
}

impl FibState {
    fn report(&self, myself: &ActorRef<FibMessage>, value: u64) {
        let _ = match &self.parent {
            Parent::Root(root) => root.send(value).is_ok(),
            Parent::Call(call) => call.cast(FibMessage::Result(value)).is_ok(),
        };
        myself.stop(None);
    }
}

impl Actor for FibCall {
    type Msg = FibMessage;
    type State = FibState;
    type Arguments = (u32, Parent);
    async fn pre_start(
        &self,
        myself: ActorRef<FibMessage>,
        (n, parent): (u32, Parent),
    ) -> Result<FibState, ActorProcessingErr> {
        let _ = myself.cast(FibMessage::Start);
        Ok(FibState { n, parent, sum: 0, waiting: 2 })
    }
    async fn handle(
        &self,
        myself: ActorRef<FibMessage>,
        message: FibMessage,
        state: &mut FibState,
    ) -> Handled {
        match message {
            FibMessage::Start if state.n <= 2 => state.report(&myself, 1),
            FibMessage::Start => {
                for n in [state.n - 1, state.n - 2] {
                    spawn(FibCall, (n, Parent::Call(myself.clone()))).await;
                }
            }
            FibMessage::Result(value) => {
                state.sum += value;
                state.waiting -= 1;
                if state.waiting == 0 {
                    state.report(&myself, state.sum);
                }
            }
        }
        Ok(())
    }
}

// ------------------------------------------------------------ chameneos

type Request = (ActorRef<Meet>, Colour);

/// Pairs requests; once the meetings are done, tells each chameneo that
/// asks to stop.
struct Mall;

impl Actor for Mall {
    type Msg = Request;
    type State = (u64, Option<ActorRef<Meet>>);
    type Arguments = u64;
    async fn pre_start(&self, _: ActorRef<Request>, left: u64) -> Result<Self::State, ActorProcessingErr> {
        Ok((left, None))
    }
    async fn handle(
        &self,
        _: ActorRef<Request>,
        (from, colour): Request,
        state: &mut Self::State,
    ) -> Handled {
        let (left, waiting) = state;
        if *left == 0 {
            let _ = from.cast(Meet::Stop);
        } else if let Some(first) = waiting.take() {
            let _ = first.cast(Meet::Partner(from, colour));
            *left -= 1;
        } else {
            *waiting = Some(from);
        }
        Ok(())
    }
}

enum Meet {
    Partner(ActorRef<Meet>, Colour),
    Change(Colour),
    Stop,
}

/// Asks the mall for a partner; the first of a pair tells the second the
/// colour they both take.
struct Chameneo;

struct ChameneoState {
    mall: ActorRef<Request>,
    colour: Colour,
    met: u64,
    done: Sender<u64>,
}

impl Actor for Chameneo {
    type Msg = Meet;
    type State = ChameneoState;
    type Arguments = ChameneoState;
    async fn pre_start(
        &self,
        myself: ActorRef<Meet>,
        state: ChameneoState,
    ) -> Result<ChameneoState, ActorProcessingErr> {
        let _ = state.mall.cast((myself, state.colour));
        Ok(state)
    }
    async fn handle(&self, myself: ActorRef<Meet>, message: Meet, state: &mut ChameneoState) -> Handled {
        match message {
            Meet::Partner(other, theirs) => {
                state.colour = state.colour.complement(theirs);
                let _ = other.cast(Meet::Change(state.colour));
            }
            Meet::Change(colour) => state.colour = colour,
            Meet::Stop => {
                let _ = state.done.send(state.met);
                myself.stop(None);
                return Ok(());
            }
        }
        state.met += 1;
        let _ = state.mall.cast((myself, state.colour));
        Ok(())
    }
}

async fn chameneos(count: usize, meetings: u64) {
    let mall = spawn(Mall, meetings).await;
    let (done, mut finished) = channel();
    for index in 0..count {
        let state =
            ChameneoState { mall: mall.clone(), colour: Colour::of(index), met: 0, done: done.clone() };
        spawn(Chameneo, state).await;
    }
    drop(done);
    let mut met = 0;
    while let Some(count) = finished.recv().await {
        met += count;
    }
    mall.stop(None);
    assert_eq!(met, 2 * meetings, "chameneos: meetings counted by both sides");
}

// ------------------------------------------------------------------ big

enum Big {
    Peers(Arc<Vec<ActorRef<Big>>>),
    Ping(usize),
    Pong,
}

/// Pings a random other, one at a time, answering pings meanwhile (those
/// that come before it knows its peers wait in `early`).
struct BigActor;

struct BigState {
    me: usize,
    peers: Option<Arc<Vec<ActorRef<Big>>>>,
    early: Vec<usize>,
    neighbours: Neighbours,
    left: u64,
    pongs: u64,
    done: Sender<u64>,
}

impl BigState {
    fn ping_next(&mut self) {
        let peers = self.peers.as_ref().expect("peers known");
        let _ = peers[self.neighbours.next_index()].cast(Big::Ping(self.me));
    }
}

impl Actor for BigActor {
    type Msg = Big;
    type State = BigState;
    type Arguments = BigState;
    async fn pre_start(&self, _: ActorRef<Big>, state: BigState) -> Result<BigState, ActorProcessingErr> {
        Ok(state)
    }
    async fn handle(&self, _: ActorRef<Big>, message: Big, state: &mut BigState) -> Handled {
        match message {
            Big::Peers(peers) => {
                for from in state.early.drain(..) {
                    let _ = peers[from].cast(Big::Pong);
                }
                state.peers = Some(peers);
                state.ping_next();
            }
            Big::Ping(from) => match &state.peers {
                Some(peers) => {
                    let _ = peers[from].cast(Big::Pong);
                }
                None => state.early.push(from),
            },
            Big::Pong => {
                state.pongs += 1;
                state.left -= 1;
                if state.left == 0 {
                    let _ = state.done.send(state.pongs);
                } else {
                    state.ping_next();
                }
            }
        }
        Ok(())
    }
}

async fn big(actors: usize, pings: u64) {
    let (done, mut finished) = channel();
    let mut peers = Vec::with_capacity(actors);
    for me in 0..actors {
        let state = BigState {
            me,
            peers: None,
            early: Vec::new(),
            neighbours: Neighbours::new(me, actors),
            left: pings,
            pongs: 0,
            done: done.clone(),
        };
        peers.push(spawn(BigActor, state).await);
    }
    let peers = Arc::new(peers);
    for peer in peers.iter() {
        peer.cast(Big::Peers(peers.clone())).expect("actor alive");
    }
    let mut pongs = 0;
    for _ in 0..actors {
        pongs += finished.recv().await.expect("every actor reports");
    }
    for peer in peers.iter() {
        peer.stop(None);
    }
    assert_eq!(pongs, actors as u64 * pings, "big: pongs received");
}
