//! A key-value store as a gen_server: `call` (get, and a slow get that a
//! `call_timeout` gives up on), `cast` (put), and `handle_info` (expiry
//! ticks from a timer process, through an info channel). The store counts
//! what it handled; `main` checks every figure.
//!
//! Run: `cargo run -p smarm --example kv_server -- 1000` (keys to store;
//! default 1,000).

use std::collections::HashMap;
use std::time::Duration;

use smarm::{CallError, GenServer, Server, ServerCtx, TerminateReason};

/// The store: values with the tick they were written at.
struct Store {
    entries: HashMap<u64, (u64, u64)>,
    now: u64,
    /// Entries older than this many ticks are dropped on a tick.
    ttl: u64,
    expired: u64,
}

enum Call {
    Get(u64),
    /// Sleeps this long before answering.
    SlowGet(u64, Duration),
    Len,
    Expired,
}

enum Reply {
    Value(Option<u64>),
    Count(u64),
}

/// An expiry tick.
struct Tick;

impl GenServer for Store {
    type Call = Call;
    type Reply = Reply;
    type Cast = (u64, u64);
    type Info = Tick;

    fn init(&mut self, ctx: &ServerCtx) {
        println!("store {} started", ctx.pid());
    }

    fn handle_call(&mut self, request: Call) -> Reply {
        match request {
            Call::Get(key) => Reply::Value(self.entries.get(&key).map(|&(value, _)| value)),
            Call::SlowGet(key, delay) => {
                smarm::sleep(delay);
                Reply::Value(self.entries.get(&key).map(|&(value, _)| value))
            }
            Call::Len => Reply::Count(self.entries.len() as u64),
            Call::Expired => Reply::Count(self.expired),
        }
    }

    fn handle_cast(&mut self, (key, value): (u64, u64)) {
        self.entries.insert(key, (value, self.now));
    }

    fn handle_info(&mut self, Tick: Tick) {
        self.now += 1;
        let (now, ttl) = (self.now, self.ttl);
        let before = self.entries.len();
        self.entries.retain(|_, &mut (_, written)| now - written < ttl);
        self.expired += (before - self.entries.len()) as u64;
    }

    fn terminate(&mut self, reason: TerminateReason) {
        println!("store terminating ({reason:?}) with {} entries", self.entries.len());
    }
}

fn value(reply: Result<Reply, CallError>) -> Option<u64> {
    match reply.expect("the store answers") {
        Reply::Value(value) => value,
        Reply::Count(_) => panic!("a get answers with a value"),
    }
}

fn count(reply: Result<Reply, CallError>) -> u64 {
    match reply.expect("the store answers") {
        Reply::Count(count) => count,
        Reply::Value(_) => panic!("a count answers with a count"),
    }
}

fn main() {
    let keys: u64 = std::env::args().nth(1).map_or(1_000, |n| n.parse().expect("a number of keys"));
    smarm::run(move || {
        let (ticks, tick_rx) = smarm::channel();
        let store = Server::new(Store { entries: HashMap::new(), now: 0, ttl: 2, expired: 0 })
            .with_info(tick_rx)
            .start()
            .expect("the store starts");

        for key in 0..keys {
            store.cast((key, key * key)).expect("the store is up");
        }
        // A call is answered after every cast sent before it.
        assert_eq!(count(store.call(Call::Len)), keys);
        assert_eq!(value(store.call(Call::Get(keys - 1))), Some((keys - 1) * (keys - 1)));
        assert_eq!(value(store.call(Call::Get(keys))), None);
        println!("{keys} keys cast in; get({}) = {:?}", keys - 1, Some((keys - 1) * (keys - 1)));

        // A call that takes longer than the caller will wait.
        let slow = store.call_timeout(Call::SlowGet(0, Duration::from_millis(50)), Duration::from_millis(5));
        assert!(matches!(slow, Err(CallError::Timeout)), "{:?}", slow.err());
        println!("call_timeout(5 ms) on a 50 ms get: Err(Timeout)");

        // Two ticks from a timer process age everything out (ttl = 2).
        let timer = smarm::spawn(move || {
            for _ in 0..2 {
                smarm::sleep(Duration::from_millis(1));
                ticks.send(Tick).expect("the store is up");
            }
        })
        .expect("spawn the timer");
        timer.join().expect("the timer ends");
        // The ticks went to the info channel before this call: a call
        // after them may still overtake them (different channels), so wait
        // until they are handled.
        while count(store.call(Call::Expired)) < keys {
            smarm::sleep(Duration::from_millis(1));
        }
        assert_eq!(count(store.call(Call::Len)), 0);
        println!("2 ticks through handle_info expired all {keys} entries");
        store.stop().expect("the store stops");
    });
}
