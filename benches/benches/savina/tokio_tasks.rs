//! The Savina benches as tokio tasks and unbounded mpsc channels: each
//! actor a spawned task with one inbox, `current_thread` for one worker,
//! `multi_thread` for more. The `block_on` future plays Savina's main
//! actor (it sets up, injects work where Savina's main does, and waits for
//! the result).

use std::sync::Arc;
use std::time::{Duration, Instant};

use smarm_benches::savina::{computation, fib, Bench, Colour, Neighbours, Params};
use tokio::sync::mpsc::{
    unbounded_channel as channel, UnboundedReceiver as Receiver, UnboundedSender as Sender,
};

/// Runs `bench` once on `workers` worker threads; the time excludes the
/// runtime's start.
pub fn run(bench: Bench, params: Params, workers: usize) -> Duration {
    let runtime = if workers == 1 {
        tokio::runtime::Builder::new_current_thread().build()
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(workers).build()
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
                tokio::spawn(fib_node(params.fib, to_root));
                assert_eq!(result.recv().await.expect("the root call reports"), fib(params.fib), "fib");
            }
            Bench::Chameneos => chameneos(params.chameneos, params.meetings).await,
            Bench::Big => big(params.big_actors, params.big_pings).await,
        }
        start.elapsed()
    })
}

/// The pinger and the ponger are both spawned tasks; the `block_on`
/// future (not on a worker thread of `multi_thread`) hears the count.
async fn ping_pong(pings: u64) {
    let (to_pong, mut pong_inbox) = channel::<()>();
    let (to_ping, mut ping_inbox) = channel::<()>();
    tokio::spawn(async move {
        while pong_inbox.recv().await.is_some() {
            let _ = to_ping.send(());
        }
    });
    let (done, mut finished) = channel();
    tokio::spawn(async move {
        let mut pongs = 0;
        for _ in 0..pings {
            to_pong.send(()).expect("pong alive");
            ping_inbox.recv().await.expect("pong answers");
            pongs += 1;
        }
        let _ = done.send(pongs);
    });
    assert_eq!(finished.recv().await.expect("ping reports"), pings, "ping-pong: pongs received");
}

enum Count {
    Increment,
    Total(Sender<u64>),
}

async fn counting(count: u64) {
    let (to_counter, mut inbox) = channel();
    tokio::spawn(async move {
        let mut total = 0;
        while let Some(message) = inbox.recv().await {
            match message {
                Count::Increment => total += 1,
                Count::Total(reply) => {
                    let _ = reply.send(total);
                }
            }
        }
    });
    let (done, mut finished) = channel();
    tokio::spawn(async move {
        for _ in 0..count {
            to_counter.send(Count::Increment).expect("counter alive");
        }
        let (reply, mut total) = channel();
        to_counter.send(Count::Total(reply)).expect("counter alive");
        let _ = done.send(total.recv().await.expect("counter answers"));
    });
    assert_eq!(finished.recv().await.expect("producer reports"), count, "counting: total");
}

async fn thread_ring(ring: usize, hops: u64) {
    let (done, mut finished) = channel();
    let (senders, receivers): (Vec<Sender<u64>>, Vec<Receiver<u64>>) = (0..ring).map(|_| channel()).unzip();
    let first = senders[0].clone();
    for (index, mut inbox) in receivers.into_iter().enumerate() {
        let next = senders[(index + 1) % ring].clone();
        let done = done.clone();
        tokio::spawn(async move {
            while let Some(token) = inbox.recv().await {
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
    assert_eq!(finished.recv().await.expect("a member reports"), hops, "thread ring: hops");
}

async fn fork_join_create(actors: u64) {
    let (done, mut finished) = channel::<()>();
    for _ in 0..actors {
        let (to_worker, mut inbox) = channel::<f64>();
        let done = done.clone();
        tokio::spawn(async move {
            computation(inbox.recv().await.expect("the message comes"));
            let _ = done.send(());
        });
        to_worker.send(37.2).expect("worker alive");
    }
    drop(done);
    let mut created = 0;
    while finished.recv().await.is_some() {
        created += 1;
    }
    assert_eq!(created, actors, "fork-join create: workers that reported");
}

async fn fork_join_throughput(actors: usize, messages: u64) {
    let (done, mut finished) = channel::<u64>();
    let workers: Vec<Sender<f64>> = (0..actors)
        .map(|_| {
            let (to_worker, mut inbox) = channel::<f64>();
            let done = done.clone();
            tokio::spawn(async move {
                let mut handled = 0;
                while handled < messages {
                    computation(inbox.recv().await.expect("the messages come"));
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
    let mut handled = 0;
    while let Some(count) = finished.recv().await {
        handled += count;
    }
    assert_eq!(handled, actors as u64 * messages, "fork-join throughput: messages handled");
}

/// A boxed future: an async fn cannot spawn itself.
fn fib_node(n: u32, parent: Sender<u64>) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    Box::pin(async move {
        if n <= 2 {
            let _ = parent.send(1);
            return;
        }
        let (to_me, mut results) = channel();
        tokio::spawn(fib_node(n - 1, to_me.clone()));
        tokio::spawn(fib_node(n - 2, to_me));
        let sum =
            results.recv().await.expect("a child reports") + results.recv().await.expect("a child reports");
        let _ = parent.send(sum);
    })
}

enum Meet {
    Partner(Sender<Meet>, Colour),
    Change(Colour),
    Stop,
}

async fn chameneos(count: usize, meetings: u64) {
    let (to_mall, mut requests) = channel::<(Sender<Meet>, Colour)>();
    tokio::spawn(async move {
        let (mut left, mut stopped, mut waiting) = (meetings, 0, None::<Sender<Meet>>);
        while stopped < count {
            let Some((from, colour)) = requests.recv().await else { return };
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
    let (done, mut finished) = channel::<u64>();
    for index in 0..count {
        let (mall, done) = (to_mall.clone(), done.clone());
        tokio::spawn(async move {
            let (me, mut inbox) = channel();
            let (mut colour, mut met) = (Colour::of(index), 0);
            loop {
                mall.send((me.clone(), colour)).expect("mall alive");
                match inbox.recv().await.expect("the mall answers") {
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
    let mut met = 0;
    while let Some(count) = finished.recv().await {
        met += count;
    }
    assert_eq!(met, 2 * meetings, "chameneos: meetings counted by both sides");
}

enum Big {
    Ping(usize),
    Pong,
    Stop,
}

async fn big(actors: usize, pings: u64) {
    let (senders, receivers): (Vec<Sender<Big>>, Vec<Receiver<Big>>) = (0..actors).map(|_| channel()).unzip();
    let peers = Arc::new(senders);
    let (done, mut finished) = channel::<u64>();
    for (me, mut inbox) in receivers.into_iter().enumerate() {
        let (peers, done) = (peers.clone(), done.clone());
        tokio::spawn(async move {
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
                while !answer(inbox.recv().await.expect("peers alive")) {}
                pongs += 1;
            }
            let _ = done.send(pongs);
            while let Some(message) = inbox.recv().await {
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
        pongs += finished.recv().await.expect("every actor reports");
    }
    for peer in peers.iter() {
        let _ = peer.send(Big::Stop);
    }
    assert_eq!(pongs, actors as u64 * pings, "big: pongs received");
}
