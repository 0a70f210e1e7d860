//! gen_server call round trip: a client process calls a counter server and
//! waits for its reply.
//!
//! - `gen_server_call/smarm/same_worker`: client and server on one worker
//!   under [`smarm::run`];
//! - `gen_server_call/smarm/two_workers`: the multi-threaded
//!   [`smarm::Engine`] with two workers, client on worker 0 and server on
//!   worker 1.
//!
//! One criterion iteration is a batch of calls; the server and runtime are
//! started once per sample, outside the timed region. Each call goes
//! through the server's receive loop, so this measures that loop's cost per
//! message as well as the two channel hops.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use smarm::{GenServer, Server};

/// Calls per iteration on one worker.
const SAME_WORKER_CALLS: u64 = 50_000;
/// Calls per iteration across two workers.
const CROSS_WORKER_CALLS: u64 = 5_000;

/// A counter: a call adds to it and returns the sum.
struct Counter(u64);

impl GenServer for Counter {
    type Call = u64;
    type Reply = u64;
    type Cast = ();
    type Info = ();

    fn handle_call(&mut self, add: u64) -> u64 {
        self.0 += add;
        self.0
    }

    fn handle_cast(&mut self, (): ()) {}
}

/// `calls` calls from the calling process to a server on `server_worker`.
fn calls(calls: u64, server_worker: usize) -> Duration {
    let server = Server::new(Counter(0)).on_worker(server_worker).start().expect("server starts");
    let start = Instant::now();
    for call in 0..calls {
        let sum = server.call(1).expect("server answers");
        debug_assert_eq!(sum, call + 1);
    }
    let elapsed = start.elapsed();
    server.stop().expect("server stops");
    elapsed
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("gen_server_call");
    group.bench_function("smarm/same_worker", |b| {
        b.iter_custom(|iterations| smarm::run(move || calls(iterations * SAME_WORKER_CALLS, 0)))
    });
    group.bench_function("smarm/two_workers", |b| {
        b.iter_custom(|iterations| {
            let engine = smarm::Engine::builder().workers(2).build().expect("engine starts");
            engine
                .block_on(move || {
                    let client = smarm::spawn_on(0, move || calls(iterations * CROSS_WORKER_CALLS, 1))
                        .expect("spawn client");
                    client.join().expect("client ends normally")
                })
                .expect("engine runs")
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
