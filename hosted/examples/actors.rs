//! Handler actors on four workers, talked to from `main`.
//!
//! - a word counter per worker, fed from `main` through an
//!   `ExternalSender`, queried with `Ask`;
//! - the counters report milestones to an `Inbox` that `main` reads;
//! - a flaky actor under a supervisor crashes and is restarted;
//! - the admin listing of every actor and the per-worker statistics are
//!   printed as tables.
//!
//! Run with `cargo run -p smarm --example actors`.

use std::time::Duration;

use smarm::{Actor, ChildSpec, Ctx, InboxAddr, ReplyTo, Supervisor};

/// Counts words; tells `milestones` every 1,000.
struct WordCounter {
    words: u64,
    milestones: InboxAddr<(usize, u64)>,
}

enum CounterMsg {
    Line(String),
    Total(ReplyTo<u64>),
}

impl Actor for WordCounter {
    type Msg = CounterMsg;
    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, msg: CounterMsg) {
        match msg {
            CounterMsg::Line(line) => {
                let before = self.words / 1_000;
                self.words += line.split_whitespace().count() as u64;
                if self.words / 1_000 > before {
                    let _ = self.milestones.send((ctx.worker(), self.words));
                }
            }
            CounterMsg::Total(reply) => {
                let _ = reply.send(self.words);
            }
        }
    }
}

/// Panics on "boom".
struct Flaky;

impl Actor for Flaky {
    type Msg = &'static str;
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, msg: &'static str) {
        assert_ne!(msg, "boom", "flaky actor hit a boom");
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Quiet the expected panic's report.
    std::panic::set_hook(Box::new(|_| {}));
    let engine = smarm::Engine::builder().workers(4).build()?;
    let rt = engine.runtime().clone();

    // One counter per worker, all reporting to one inbox read by main.
    let milestones = rt.new_inbox::<(usize, u64)>();
    let counters: Vec<_> = (0..4)
        .map(|w| rt.spawn_actor_on(w, WordCounter { words: 0, milestones: milestones.addr() }))
        .collect::<Result<_, _>>()?;

    // Feed them from this thread (not a worker): an ExternalSender.
    let sender = rt.external_sender();
    let line = "the quick brown fox jumps over the lazy dog";
    for i in 0..2_000 {
        sender.send(&counters[i % 4], CounterMsg::Line(line.to_string())).map_err(|_| "counter gone")?;
    }
    let mut reached = Vec::new();
    while let Ok((worker, words)) = milestones.recv_timeout(Duration::from_millis(500)) {
        reached.push((worker, words));
    }
    println!("milestones reported to main's inbox: {reached:?}");

    // Ask each counter for its total.
    for (w, counter) in counters.iter().enumerate() {
        let total = rt.ask(counter, CounterMsg::Total).wait_timeout(Duration::from_secs(5))?;
        println!("counter on worker {w}: {total} words");
    }

    // A supervised flaky actor, run from a process.
    let done = rt.new_inbox::<Result<(u64, smarm::Pid, smarm::Pid), String>>();
    let report = done.addr();
    rt.spawn(move || {
        let _ = report.send(supervised_crash());
    })?;
    let restarted = done.recv_timeout(Duration::from_secs(10))??;
    println!(
        "flaky actor {} crashed; the supervisor restarted it as {} ({} restart)",
        restarted.1, restarted.2, restarted.0
    );
    // Everything running, from the admin queues of all workers.
    let actors = rt.list_actors().wait_timeout(Duration::from_secs(5))?;
    println!(
        "\n{:<8} {:<7} {:<14} {:<8} {:>7} {:>8}  last message",
        "pid", "worker", "type", "status", "mailbox", "handled"
    );
    for a in &actors {
        let short = a.type_name.rsplit("::").next().unwrap_or(a.type_name);
        println!(
            "{:<8} {:<7} {:<14} {:<8} {:>7} {:>8}  {}",
            a.pid.to_string(),
            a.worker,
            short,
            format!("{:?}", a.status),
            a.mailbox_depth,
            a.handled,
            a.last_message.rsplit("::").next().unwrap_or(""),
        );
    }
    println!(
        "\n{:<7} {:>7} {:>8} {:>11} {:>6} {:>7}",
        "worker", "actors", "handled", "transfers", "panics", "stopped"
    );
    for w in 0..rt.worker_count() {
        let s = rt.worker_stats(w)?.actors;
        println!(
            "{:<7} {:>7} {:>8} {:>11} {:>6} {:>7}",
            w, s.actors, s.handled, s.transfers_in, s.panics, s.stopped
        );
    }
    println!("sends from outside the workers: {}", rt.external_sends());

    for counter in &counters {
        counter.stop()?;
    }
    engine.wait().unwrap();
    Ok(())
}

/// In a process: a supervisor with a flaky actor child; crash it, wait for
/// the restart, and report (restarts, old pid, new pid).
fn supervised_crash() -> Result<(u64, smarm::Pid, smarm::Pid), String> {
    let sup = Supervisor::new()
        .child(ChildSpec::new("flaky", || smarm::current_runtime().unwrap().spawn_actor_on(3, Flaky)))
        .start()
        .map_err(|e| e.to_string())?;
    let first = sup.child_pid("flaky").map_err(|e| e.to_string())?.ok_or("no child")?;
    let rt = smarm::current_runtime().unwrap();
    smarm::ActorAddress::from_pid(&rt, first).send("boom").map_err(|e| e.to_string())?;
    let mut second = first;
    while second == first {
        smarm::sleep(Duration::from_millis(1));
        second = sup.child_pid("flaky").map_err(|e| e.to_string())?.ok_or("no child")?;
    }
    let restarts = (0..rt.worker_count())
        .map(|w| rt.actor_stats(w).map(|s| s.restarts))
        .sum::<Result<u64, _>>()
        .map_err(|e| e.to_string())?;
    sup.stop().map_err(|e| e.to_string())?;
    Ok((restarts, first, second))
}
