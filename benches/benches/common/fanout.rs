//! The fan-out shape's two actors, shared by the `actors` bench and the
//! instruction counter (`examples/instructions.rs`): one actor sends
//! numbers round-robin to many in one handler call; each of those counts
//! what it gets.
//!
//! Included with `#[path]` by both (it is not part of `common`, which
//! every bench binary includes).

use std::hint::black_box;

use smarm::{Actor, Addr, Ctx};

/// Counts what it gets; once it has its share (`expect`), sends the count
/// to `done`.
pub struct Sink {
    pub expect: u64,
    pub got: u64,
    pub done: smarm::Sender<u64>,
}

impl Actor for Sink {
    type Msg = u64;
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, value: u64) {
        black_box(value);
        self.got += 1;
        if self.got == self.expect {
            let _ = self.done.send(self.got);
        }
    }
}

/// Sends `messages` numbers round-robin over `sinks` when told to, all in
/// that one handler call, then stops.
pub struct Fan {
    pub sinks: Vec<Addr<Sink>>,
    pub messages: u64,
}

impl Actor for Fan {
    type Msg = ();
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, _: ()) {
        for i in 0..self.messages {
            let _ = self.sinks[i as usize % self.sinks.len()].send(black_box(i));
        }
        ctx.stop_self();
    }
}
