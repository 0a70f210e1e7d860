//! The Savina suite's shape, in one place: which benches, their sizes,
//! the results they must produce, and how their figures are named. Shared
//! by the `savina` bench (every implementation, the Erlang one through
//! [`erlang_args`]) and the summariser.
//!
//! The benches follow the Savina actor benchmark suite (Imam and Sarkar,
//! AGERE! 2014); `benches/README.md` describes each and its parameters.

/// One bench of the suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bench {
    /// Two actors exchange `pings` ping / pong pairs.
    PingPong,
    /// A producer sends `count` increments to a counter, then asks it for
    /// the total.
    Counting,
    /// `ring` actors pass a token round a ring for `hops` hops.
    ThreadRing,
    /// `create` actors are created, each sent one message, each doing a
    /// little computation and reporting.
    ForkJoinCreate,
    /// `throughput_messages` messages to each of `throughput_actors`
    /// actors, each message a little computation.
    ForkJoinThroughput,
    /// fib(`fib`) computed by a tree of actors, one per call.
    Fib,
    /// `chameneos` chameneos meet through a broker `meetings` times.
    Chameneos,
    /// `big_actors` actors each ping random others `big_pings` times,
    /// answering the pings they receive meanwhile.
    Big,
}

/// Every bench, in the order it runs and is reported.
pub const BENCHES: [Bench; 8] = [
    Bench::PingPong,
    Bench::Counting,
    Bench::ThreadRing,
    Bench::ForkJoinCreate,
    Bench::ForkJoinThroughput,
    Bench::Fib,
    Bench::Chameneos,
    Bench::Big,
];

/// The implementations, as named in figure ids.
pub const IMPLEMENTATIONS: [&str; 5] = ["smarm/processes", "smarm/actors", "tokio", "ractor", "beam"];

/// The worker counts measured: 1 (tokio `current_thread`, `+S 1`) and 2
/// (tokio `multi_thread(2)`, `+S 2`).
pub const WORKERS: [usize; 2] = [1, 2];

impl Bench {
    /// The bench's name in ids and in the Erlang module.
    pub fn name(self) -> &'static str {
        match self {
            Bench::PingPong => "ping_pong",
            Bench::Counting => "counting",
            Bench::ThreadRing => "thread_ring",
            Bench::ForkJoinCreate => "fork_join_create",
            Bench::ForkJoinThroughput => "fork_join_throughput",
            Bench::Fib => "fib",
            Bench::Chameneos => "chameneos",
            Bench::Big => "big",
        }
    }
}

/// The summary group of `bench` on `workers` workers:
/// `savina/<bench>/<workers>w`; a figure's id is `<group>/<implementation>`.
pub fn group(bench: Bench, workers: usize) -> String {
    format!("savina/{}/{workers}w", bench.name())
}

/// Every bench's sizes.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Ping-pong: round trips.
    pub pings: u64,
    /// Counting: increments.
    pub count: u64,
    /// Thread ring: actors in the ring.
    pub ring: usize,
    /// Thread ring: hops of the token.
    pub hops: u64,
    /// Fork-join create: actors created.
    pub create: u64,
    /// Fork-join throughput: actors.
    pub throughput_actors: usize,
    /// Fork-join throughput: messages to each actor.
    pub throughput_messages: u64,
    /// Fib: the argument.
    pub fib: u32,
    /// Chameneos: chameneos (at least 2).
    pub chameneos: usize,
    /// Chameneos: meetings the broker arranges.
    pub meetings: u64,
    /// Big: actors (at least 2).
    pub big_actors: usize,
    /// Big: pings each actor sends.
    pub big_pings: u64,
}

impl Params {
    /// A full run: Savina's defaults, except fork-join throughput's
    /// messages per actor (10,000 there) and big's pings per actor (20,000
    /// there), cut to keep each run within a few hundred milliseconds on
    /// ractor.
    pub const FULL: Params = Params {
        pings: 40_000,
        count: 1_000_000,
        ring: 100,
        hops: 100_000,
        create: 40_000,
        throughput_actors: 60,
        throughput_messages: 2_000,
        fib: 25,
        chameneos: 100,
        meetings: 200_000,
        big_actors: 120,
        big_pings: 2_000,
    };

    /// CI: every implementation does a little of each, and checks it.
    pub const QUICK: Params = Params {
        pings: 200,
        count: 1_000,
        ring: 10,
        hops: 1_000,
        create: 200,
        throughput_actors: 4,
        throughput_messages: 50,
        fib: 10,
        chameneos: 4,
        meetings: 200,
        big_actors: 8,
        big_pings: 20,
    };

    /// [`QUICK`](Self::QUICK) under `benches/run.sh --quick`, else
    /// [`FULL`](Self::FULL).
    pub fn current() -> Params {
        if crate::measure::quick() {
            Params::QUICK
        } else {
            Params::FULL
        }
    }

    /// The arguments `benches/erl/savina.erl` takes for `bench`, as an
    /// Erlang list.
    pub fn erlang_args(&self, bench: Bench) -> String {
        match bench {
            Bench::PingPong => format!("[{}]", self.pings),
            Bench::Counting => format!("[{}]", self.count),
            Bench::ThreadRing => format!("[{}, {}]", self.ring, self.hops),
            Bench::ForkJoinCreate => format!("[{}]", self.create),
            Bench::ForkJoinThroughput => {
                format!("[{}, {}]", self.throughput_actors, self.throughput_messages)
            }
            Bench::Fib => format!("[{}, {}]", self.fib, fib(self.fib)),
            Bench::Chameneos => format!("[{}, {}]", self.chameneos, self.meetings),
            Bench::Big => format!("[{}, {}]", self.big_actors, self.big_pings),
        }
    }
}

/// fib(n) with fib(1) = fib(2) = 1: what the fib bench must compute.
pub fn fib(n: u32) -> u64 {
    let (mut previous, mut current) = (0u64, 1u64);
    for _ in 1..n {
        (previous, current) = (current, previous + current);
    }
    current
}

/// The fork-join benches' work per message (Savina's: the square of a
/// sine), kept from being optimised away.
pub fn computation(theta: f64) -> f64 {
    let sine = std::hint::black_box(theta).sin();
    std::hint::black_box(sine * sine)
}

/// A chameneo's colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Colour {
    /// Red.
    Red,
    /// Yellow.
    Yellow,
    /// Blue.
    Blue,
}

impl Colour {
    /// The starting colour of chameneo `index`.
    pub fn of(index: usize) -> Colour {
        [Colour::Red, Colour::Yellow, Colour::Blue][index % 3]
    }

    /// The colour both take after a meeting: theirs if they are alike,
    /// else the third.
    pub fn complement(self, other: Colour) -> Colour {
        match (self, other) {
            (a, b) if a == b => a,
            (Colour::Red, Colour::Yellow) | (Colour::Yellow, Colour::Red) => Colour::Blue,
            (Colour::Red, Colour::Blue) | (Colour::Blue, Colour::Red) => Colour::Yellow,
            _ => Colour::Red,
        }
    }
}

/// Big's choice of whom to ping: a xorshift stream per actor, never the
/// actor itself.
#[derive(Debug)]
pub struct Neighbours {
    state: u64,
    me: usize,
    actors: usize,
}

impl Neighbours {
    /// The stream of actor `me` of `actors`.
    pub fn new(me: usize, actors: usize) -> Neighbours {
        assert!(actors >= 2, "big needs two actors");
        Neighbours { state: 0x9E37_79B9_7F4A_7C15 ^ (me as u64 + 1), me, actors }
    }

    /// The next actor to ping.
    pub fn next_index(&mut self) -> usize {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        (self.me + 1 + (self.state % (self.actors as u64 - 1)) as usize) % self.actors
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fib_starts_one_one() {
        assert_eq!([fib(1), fib(2), fib(3), fib(10), fib(25)], [1, 1, 2, 55, 75_025]);
    }

    #[test]
    fn neighbours_are_never_oneself_and_cover_the_others() {
        let mut seen = [false; 5];
        let mut neighbours = Neighbours::new(2, 5);
        for _ in 0..1_000 {
            seen[neighbours.next_index()] = true;
        }
        assert_eq!(seen, [true, true, false, true, true]);
    }

    #[test]
    fn complements() {
        assert_eq!(Colour::Red.complement(Colour::Red), Colour::Red);
        assert_eq!(Colour::Red.complement(Colour::Blue), Colour::Yellow);
        assert_eq!(Colour::Blue.complement(Colour::Yellow), Colour::Red);
    }
}
