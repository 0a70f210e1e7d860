//! The Savina benches as smarm processes and channels: each actor is a
//! process with one inbox (`smarm::channel`), blocking in `recv`. The root
//! process plays Savina's main actor (it sets up, injects work where
//! Savina's main does, and waits for the result). The processes the root
//! starts are spawned through the runtime handle, round-robin over the
//! workers, as tokio's `block_on` puts its spawns on the shared queue; a
//! process that spawns in its turn (fib's calls) uses `smarm::spawn`, which
//! keeps the child on the caller's worker, as `tokio::spawn` inside a task
//! and `erlang:spawn` do.

use std::sync::Arc;
use std::time::{Duration, Instant};

use smarm::{channel, Receiver, Sender};
use smarm_benches::savina::{computation, fib, Bench, Colour, Neighbours, Params};

/// Runs `bench` once on `workers` workers (the one-worker `smarm::run`, or
/// the `Engine`); the time excludes the runtime's start.
pub fn run(bench: Bench, params: Params, workers: usize) -> Duration {
    let timed = move || {
        let start = Instant::now();
        match bench {
            Bench::PingPong => ping_pong(params.pings),
            Bench::Counting => counting(params.count),
            Bench::ThreadRing => thread_ring(params.ring, params.hops),
            Bench::ForkJoinCreate => fork_join_create(params.create),
            Bench::ForkJoinThroughput => {
                fork_join_throughput(params.throughput_actors, params.throughput_messages)
            }
            Bench::Fib => {
                let (to_root, result) = channel();
                spawn(move || fib_node(params.fib, to_root));
                assert_eq!(result.recv().expect("the root call reports"), fib(params.fib), "fib");
            }
            Bench::Chameneos => chameneos(params.chameneos, params.meetings),
            Bench::Big => big(params.big_actors, params.big_pings),
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

/// Spawns `body` on the next worker; it runs detached.
fn spawn(body: impl FnOnce() + Send + 'static) {
    let runtime = smarm::current_runtime().expect("in a process");
    runtime.spawn(body).expect("the slab grows");
}

/// The pinger and the ponger are both spawned (in that order onto the
/// workers, as the other implementations place them); the root hears the
/// pinger's count.
fn ping_pong(pings: u64) {
    let (to_pong, pong_inbox) = channel::<()>();
    let (to_ping, ping_inbox) = channel::<()>();
    spawn(move || {
        while pong_inbox.recv().is_ok() {
            let _ = to_ping.send(());
        }
    });
    let (done, finished) = channel();
    spawn(move || {
        let mut pongs = 0;
        for _ in 0..pings {
            to_pong.send(()).expect("pong alive");
            ping_inbox.recv().expect("pong answers");
            pongs += 1;
        }
        let _ = done.send(pongs);
    });
    assert_eq!(finished.recv().expect("ping reports"), pings, "ping-pong: pongs received");
}

enum Count {
    Increment,
    Total(Sender<u64>),
}

fn counting(count: u64) {
    let (to_counter, inbox) = channel();
    spawn(move || {
        let mut total = 0;
        while let Ok(message) = inbox.recv() {
            match message {
                Count::Increment => total += 1,
                Count::Total(reply) => {
                    let _ = reply.send(total);
                }
            }
        }
    });
    let (done, finished) = channel();
    spawn(move || {
        for _ in 0..count {
            to_counter.send(Count::Increment).expect("counter alive");
        }
        let (reply, total) = channel();
        to_counter.send(Count::Total(reply)).expect("counter alive");
        let _ = done.send(total.recv().expect("counter answers"));
    });
    assert_eq!(finished.recv().expect("producer reports"), count, "counting: total");
}

/// A ring member passes the token on, one hop more, until it has made
/// `hops`; then it reports, and its exit closes the ring behind it.
fn thread_ring(ring: usize, hops: u64) {
    let (done, finished) = channel();
    let (senders, receivers): (Vec<Sender<u64>>, Vec<Receiver<u64>>) = (0..ring).map(|_| channel()).unzip();
    let first = senders[0].clone();
    for (index, inbox) in receivers.into_iter().enumerate() {
        let next = senders[(index + 1) % ring].clone();
        let done = done.clone();
        spawn(move || {
            while let Ok(token) = inbox.recv() {
                if token == hops {
                    let _ = done.send(token);
                    return;
                }
                if next.send(token + 1).is_err() {
                    return;
                }
            }
        });
    }
    drop(senders);
    first.send(0).expect("ring alive");
    drop(first);
    assert_eq!(finished.recv().expect("a member reports"), hops, "thread ring: hops");
}

fn fork_join_create(actors: u64) {
    let (done, finished) = channel::<()>();
    for _ in 0..actors {
        let (to_worker, inbox) = channel::<f64>();
        let done = done.clone();
        spawn(move || {
            computation(inbox.recv().expect("the message comes"));
            let _ = done.send(());
        });
        to_worker.send(37.2).expect("worker alive");
    }
    drop(done);
    let created = std::iter::from_fn(|| finished.recv().ok()).count() as u64;
    assert_eq!(created, actors, "fork-join create: workers that reported");
}

fn fork_join_throughput(actors: usize, messages: u64) {
    let (done, finished) = channel::<u64>();
    let workers: Vec<Sender<f64>> = (0..actors)
        .map(|_| {
            let (to_worker, inbox) = channel::<f64>();
            let done = done.clone();
            spawn(move || {
                let mut handled = 0;
                while handled < messages {
                    computation(inbox.recv().expect("the messages come"));
                    handled += 1;
                }
                let _ = done.send(handled);
            });
            to_worker
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

fn fib_node(n: u32, parent: Sender<u64>) {
    if n <= 2 {
        let _ = parent.send(1);
        return;
    }
    let (to_me, results) = channel();
    let second = to_me.clone();
    // On the caller's worker: a call tree placed round-robin is explored
    // breadth first (tens of thousands of calls alive at once on two
    // workers, against about 70 on one), and smarm does not steal.
    smarm::spawn(move || fib_node(n - 1, to_me)).expect("the slab grows");
    smarm::spawn(move || fib_node(n - 2, second)).expect("the slab grows");
    let sum = results.recv().expect("a child reports") + results.recv().expect("a child reports");
    let _ = parent.send(sum);
}

enum Meet {
    Partner(Sender<Meet>, Colour),
    Change(Colour),
    Stop,
}

/// The broker pairs requests; once the meetings are done it tells each
/// chameneo that asks to stop. The first of a pair hears of the second
/// and tells it the colour they both take.
fn chameneos(count: usize, meetings: u64) {
    let (to_mall, requests) = channel::<(Sender<Meet>, Colour)>();
    spawn(move || {
        let (mut left, mut stopped, mut waiting) = (meetings, 0, None::<Sender<Meet>>);
        while stopped < count {
            let Ok((from, colour)) = requests.recv() else { return };
            if left == 0 {
                let _ = from.send(Meet::Stop);
                stopped += 1;
            } else if let Some(first) = waiting.take() {
                let _ = first.send(Meet::Partner(from, colour));
                left -= 1;
            } else {
                waiting = Some(from);
            }
        }
    });
    let (done, finished) = channel::<u64>();
    for index in 0..count {
        let (mall, done) = (to_mall.clone(), done.clone());
        spawn(move || {
            let (me, inbox) = channel();
            let (mut colour, mut met) = (Colour::of(index), 0);
            loop {
                mall.send((me.clone(), colour)).expect("mall alive");
                match inbox.recv().expect("the mall answers") {
                    Meet::Partner(other, theirs) => {
                        colour = colour.complement(theirs);
                        let _ = other.send(Meet::Change(colour));
                        met += 1;
                    }
                    Meet::Change(new) => {
                        colour = new;
                        met += 1;
                    }
                    Meet::Stop => break,
                }
            }
            let _ = done.send(met);
        });
    }
    drop(done);
    let met: u64 = std::iter::from_fn(|| finished.recv().ok()).sum();
    assert_eq!(met, 2 * meetings, "chameneos: meetings counted by both sides");
}

enum Big {
    Ping(usize),
    Pong,
    Stop,
}

/// Each actor pings a random other and waits for its pong, answering the
/// pings it gets meanwhile; after its pings it reports and keeps answering
/// until told to stop.
fn big(actors: usize, pings: u64) {
    let (senders, receivers): (Vec<Sender<Big>>, Vec<Receiver<Big>>) = (0..actors).map(|_| channel()).unzip();
    let peers = Arc::new(senders);
    let (done, finished) = channel::<u64>();
    for (me, inbox) in receivers.into_iter().enumerate() {
        let (peers, done) = (peers.clone(), done.clone());
        spawn(move || {
            let answer = |message| match message {
                Big::Ping(from) => {
                    let _ = peers[from].send(Big::Pong);
                    false
                }
                Big::Pong => true,
                Big::Stop => panic!("big: stopped before its pings were done"),
            };
            let mut neighbours = Neighbours::new(me, peers.len());
            let mut pongs = 0;
            for _ in 0..pings {
                peers[neighbours.next_index()].send(Big::Ping(me)).expect("peer alive");
                while !answer(inbox.recv().expect("peers alive")) {}
                pongs += 1;
            }
            let _ = done.send(pongs);
            while let Ok(message) = inbox.recv() {
                match message {
                    Big::Stop => return,
                    other => {
                        answer(other);
                    }
                }
            }
        });
    }
    drop(done);
    let mut pongs = 0;
    for _ in 0..actors {
        pongs += finished.recv().expect("every actor reports");
    }
    for peer in peers.iter() {
        let _ = peer.send(Big::Stop);
    }
    assert_eq!(pongs, actors as u64 * pings, "big: pongs received");
}
