//! Actor timers: `Ctx::send_after` / `send_after_to` / `send_interval`
//! and `Ctx::cancel_timer` / `Runtime::cancel_timer` — each fires after its
//! delay (on the runtime's clock) and in deadline order, an interval fires
//! until cancelled, a cancelled timer delivers nothing, and the timers of an actor that ends
//! (however it ends) never deliver. Every timer's message is counted out
//! by its destructor: dropped exactly once; the worker's statistics count
//! the pending timers in and out. On one worker, four workers on one
//! thread, and the four-thread Engine.

mod common;
use common::*;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use smarm::actor::{TimerError, TimerRef};
use smarm::{Actor, Addr, Ctx, ExitReason, Instant, RecvTimeoutError, Sender};

/// A payload that counts its destructor runs (each clone its own).
struct Counted(Arc<AtomicUsize>);

impl Clone for Counted {
    fn clone(&self) -> Counted {
        Counted(self.0.clone())
    }
}

/// A payload that counts its clones (an interval's firings) and its
/// destructor runs.
struct Tick {
    clones: Arc<AtomicUsize>,
    drops: Arc<AtomicUsize>,
}

impl Clone for Tick {
    fn clone(&self) -> Tick {
        self.clones.fetch_add(1, Ordering::SeqCst);
        Tick { clones: self.clones.clone(), drops: self.drops.clone() }
    }
}

impl Drop for Tick {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counter() -> Arc<AtomicUsize> {
    Arc::new(AtomicUsize::new(0))
}

/// What the timed actor is sent.
#[derive(Clone)]
enum Msg {
    /// Sets its timers and reports when.
    Arm,
    /// A timer (or a plain message) arrived, with its label.
    Fired(&'static str, Option<Counted>),
    /// An interval's tick.
    Tick(Tick),
    /// Reports what it has seen.
    Report,
    /// Cancels the interval it holds.
    CancelInterval,
    /// Panics.
    Crash,
}

/// What the timed actor tells the root process.
#[derive(Debug, PartialEq)]
enum Event {
    Armed(Instant),
    Fired(&'static str, Instant),
    Cancelled(bool),
    /// The interval was cancelled (`true`: it was pending) when this many
    /// ticks had been fired.
    CancelledAt(bool, usize),
    Seen(Vec<&'static str>),
    /// The timers it set, for cancelling from outside.
    Timers(Vec<TimerRef>),
}

/// What the timed actor does when told to arm.
#[derive(Clone)]
enum Plan {
    /// Timers out of deadline order, a message sent to itself just before
    /// a zero-delay timer.
    Order,
    /// One timer, fired once.
    Once(Arc<AtomicUsize>),
    /// An interval, cancelled on its `ticks`-th tick.
    Interval { ticks: usize, clones: Arc<AtomicUsize>, drops: Arc<AtomicUsize> },
    /// A timer cancelled at once, then cancelled again; a timer past the
    /// clock's range; an interval of period zero.
    CancelAtOnce(Arc<AtomicUsize>),
    /// A long timer and a long interval, handed out to be cancelled from
    /// outside.
    Outside(Arc<AtomicUsize>),
    /// Timers of every kind (one to `other`), then it ends.
    Doomed { drops: Arc<AtomicUsize>, other: Addr<Witness> },
}

struct Timed {
    plan: Plan,
    events: Sender<Event>,
    seen: Vec<&'static str>,
    interval: Option<TimerRef>,
}

impl Timed {
    fn new(plan: Plan, events: &Sender<Event>) -> Timed {
        Timed { plan, events: events.clone(), seen: Vec::new(), interval: None }
    }
}

impl Actor for Timed {
    type Msg = Msg;

    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, msg: Msg) {
        match msg {
            Msg::Arm => self.arm(ctx),
            Msg::Fired(label, _payload) => {
                self.seen.push(label);
                let _ = self.events.send(Event::Fired(label, ctx.now()));
            }
            Msg::Tick(_tick) => {
                self.seen.push("tick");
                let _ = self.events.send(Event::Fired("tick", ctx.now()));
                if let Plan::Interval { ticks, clones, .. } = &self.plan {
                    if self.seen.len() == *ticks {
                        let interval = self.interval.take().expect("the interval is held");
                        let cancelled = ctx.cancel_timer(&interval);
                        let fired = clones.load(Ordering::SeqCst);
                        let _ = self.events.send(Event::CancelledAt(cancelled, fired));
                        // Cancelled already: nothing to cancel.
                        assert!(!ctx.cancel_timer(&interval));
                    }
                }
            }
            Msg::Report => {
                let _ = self.events.send(Event::Seen(self.seen.clone()));
            }
            Msg::CancelInterval => {
                let cancelled = self.interval.take().is_some_and(|t| ctx.cancel_timer(&t));
                let _ = self.events.send(Event::Cancelled(cancelled));
            }
            Msg::Crash => panic!("crash on request"),
        }
    }
}

impl Timed {
    fn arm(&mut self, ctx: &mut Ctx<'_, Self>) {
        let now = ctx.now();
        match self.plan.clone() {
            Plan::Order => {
                ctx.send_after(ms(30), Msg::Fired("c", None));
                ctx.send_after(ms(10), Msg::Fired("a", None));
                ctx.send_after(ms(20), Msg::Fired("b", None));
                ctx.send_after(ms(20), Msg::Fired("b2", None));
                // Sent before the timer was set: handled before its message.
                ctx.addr().send(Msg::Fired("sent", None)).unwrap();
                ctx.send_after(Duration::ZERO, Msg::Fired("zero", None));
            }
            Plan::Once(drops) => {
                ctx.send_after(ms(20), Msg::Fired("once", Some(Counted(drops))));
            }
            Plan::Interval { clones, drops, .. } => {
                let tick = Msg::Tick(Tick { clones, drops });
                self.interval = Some(ctx.send_interval(ms(5), tick).unwrap());
            }
            Plan::CancelAtOnce(drops) => {
                let timer = ctx.send_after(ms(20), Msg::Fired("cancelled", Some(Counted(drops.clone()))));
                assert!(ctx.cancel_timer(&timer), "pending: cancelled");
                assert_eq!(drops.load(Ordering::SeqCst), 1, "its message dropped at the cancel");
                assert!(!ctx.cancel_timer(&timer), "a second cancel finds nothing");
                // Past the clock's range: clamped, never fires, cancellable.
                let forever =
                    ctx.send_after(Duration::MAX, Msg::Fired("never", Some(Counted(drops.clone()))));
                assert!(ctx.cancel_timer(&forever));
                assert_eq!(drops.load(Ordering::SeqCst), 2);
                // A zero period is refused with the message handed back.
                let zero =
                    ctx.send_interval(Duration::ZERO, Msg::Fired("zero", Some(Counted(drops.clone()))));
                let Err(error @ TimerError::ZeroPeriod(_)) = zero else {
                    panic!("a zero period was accepted")
                };
                assert!(error.to_string().contains("period"));
                drop(error.into_inner());
                assert_eq!(drops.load(Ordering::SeqCst), 3);
            }
            Plan::Outside(drops) => {
                let long = Duration::from_secs(600);
                let once = ctx.send_after(long, Msg::Fired("once", Some(Counted(drops.clone()))));
                let every = ctx.send_interval(long, Msg::Fired("every", Some(Counted(drops)))).unwrap();
                let _ = self.events.send(Event::Timers(vec![once, every]));
            }
            Plan::Doomed { drops, other } => {
                // Long enough not to fire before the actor ends, however
                // slow the machine: their drops show they went with it.
                let long = Duration::from_secs(600);
                ctx.send_after(long, Msg::Fired("late", Some(Counted(drops.clone()))));
                let tick = Msg::Fired("tick", Some(Counted(drops.clone())));
                self.interval = Some(ctx.send_interval(long, tick).unwrap());
                ctx.send_after_to(&other, long, Counted(drops.clone()));
                ctx.send_interval_to(&other, long, Counted(drops)).unwrap();
            }
        }
        let _ = self.events.send(Event::Armed(now));
    }
}

/// Counts what reaches it.
struct Witness(Arc<AtomicUsize>);

impl Actor for Witness {
    type Msg = Counted;
    fn handle(&mut self, _: &mut Ctx<'_, Self>, _: Counted) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Parks (in short sleeps) until `cond` holds; panics after ten seconds.
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let start = smarm::now().unwrap();
    while !cond() {
        assert!(smarm::now().unwrap() - start < Duration::from_secs(10), "gave up waiting until {what}");
        smarm::sleep(ms(1));
    }
}

fn armed(events: &smarm::Receiver<Event>) -> Instant {
    match events.recv().unwrap() {
        Event::Armed(at) => at,
        other => panic!("expected Armed, got {other:?}"),
    }
}

fn fired_event(events: &smarm::Receiver<Event>) -> (&'static str, Instant) {
    match events.recv().unwrap() {
        Event::Fired(label, at) => (label, at),
        other => panic!("expected Fired, got {other:?}"),
    }
}

fn report(addr: &Addr<Timed>, events: &smarm::Receiver<Event>) -> Vec<&'static str> {
    addr.send(Msg::Report).unwrap();
    match events.recv().unwrap() {
        Event::Seen(seen) => seen,
        other => panic!("expected Seen, got {other:?}"),
    }
}

/// Timers fire in deadline order whatever the order they were set in,
/// each no earlier than its delay on the runtime's clock; a message the
/// handler sent itself before setting a zero-delay timer comes first.
fn fire_in_deadline_order(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let (tx, events) = smarm::channel();
        let timed = rt.spawn_actor_on(next_worker(workers), Timed::new(Plan::Order, &tx)).unwrap();
        timed.send(Msg::Arm).unwrap();
        let set_at = armed(&events);
        let mut order = Vec::new();
        for _ in 0..6 {
            let (label, at) = fired_event(&events);
            let delay = match label {
                "a" => ms(10),
                "b" | "b2" => ms(20),
                "c" => ms(30),
                _ => Duration::ZERO,
            };
            assert!(
                at - set_at >= delay,
                "{label} fired {:?} after it was set, before its delay",
                at - set_at
            );
            order.push(label);
        }
        assert_eq!(order, ["sent", "zero", "a", "b", "b2", "c"]);
        timed.stop().unwrap();
    });
}
drive_tests!(fire_in_deadline_order => timers_fire_in_deadline_order_1, timers_fire_in_deadline_order_4, timers_fire_in_deadline_order_engine);

/// A one-shot timer fires once: its message is delivered once and dropped
/// once.
fn fires_once(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let (tx, events) = smarm::channel();
        let drops = counter();
        let timed =
            rt.spawn_actor_on(next_worker(workers), Timed::new(Plan::Once(drops.clone()), &tx)).unwrap();
        timed.send(Msg::Arm).unwrap();
        let set_at = armed(&events);
        let (label, at) = fired_event(&events);
        assert_eq!(label, "once");
        assert!(at - set_at >= ms(20));
        // Four more delays: a second firing would have had its chance.
        assert_eq!(events.recv_timeout(ms(80)).unwrap_err(), RecvTimeoutError::Timeout);
        assert_eq!(report(&timed, &events), ["once"]);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "handled and dropped once");
        timed.stop().unwrap();
    });
}
drive_tests!(fires_once => a_timer_fires_once_1, a_timer_fires_once_4, a_timer_fires_once_engine);

/// An interval fires until its handler cancels it on the fifth tick,
/// each tick at least a period after the one before. Counted exactly: every
/// tick fired (a clone of its message) is delivered once — those fired
/// before the cancel, however many a stalled worker had in flight — none
/// is fired after the cancel, and each copy and the original are dropped
/// once.
fn interval_until_cancelled(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let (tx, events) = smarm::channel();
        let (clones, drops) = (counter(), counter());
        let plan = Plan::Interval { ticks: 5, clones: clones.clone(), drops: drops.clone() };
        let timed = rt.spawn_actor_on(next_worker(workers), Timed::new(plan, &tx)).unwrap();
        timed.send(Msg::Arm).unwrap();
        let set_at = armed(&events);
        let fired;
        for k in 1..=5u32 {
            let (label, at) = fired_event(&events);
            assert_eq!(label, "tick");
            assert!(at - set_at >= ms(5) * k, "tick {k} came {:?} after the start", at - set_at);
        }
        let mut late = 0;
        loop {
            match events.recv().unwrap() {
                Event::CancelledAt(cancelled, at_cancel) => {
                    assert!(cancelled, "the interval was pending");
                    assert!(at_cancel >= 5);
                    fired = at_cancel;
                    break;
                }
                // Fired before the cancel, delivered after the fifth.
                Event::Fired("tick", _) => late += 1,
                other => panic!("unexpected {other:?}"),
            }
        }
        // Ten more periods: a tick fired after the cancel would show.
        while let Ok(event) = events.recv_timeout(ms(50)) {
            assert!(matches!(event, Event::Fired("tick", _)), "unexpected {event:?}");
            late += 1;
        }
        let seen = report(&timed, &events).len();
        assert_eq!(seen, 5 + late);
        assert_eq!(seen, fired, "every tick fired was delivered, once");
        assert_eq!(clones.load(Ordering::SeqCst), fired, "no tick fired after the cancel");
        assert_eq!(drops.load(Ordering::SeqCst), fired + 1, "each tick and the original dropped once");
        // Nothing left to cancel.
        timed.send(Msg::CancelInterval).unwrap();
        assert_eq!(events.recv().unwrap(), Event::Cancelled(false));
        timed.stop().unwrap();
    });
}
drive_tests!(interval_until_cancelled => an_interval_fires_until_cancelled_1, an_interval_fires_until_cancelled_4, an_interval_fires_until_cancelled_engine);

/// A timer cancelled before it fires delivers nothing and drops its
/// message once, at the cancel; a delay past the clock's range and a zero
/// period are no panic.
fn cancel_before_firing(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let (tx, events) = smarm::channel();
        let drops = counter();
        let timed = rt
            .spawn_actor_on(next_worker(workers), Timed::new(Plan::CancelAtOnce(drops.clone()), &tx))
            .unwrap();
        timed.send(Msg::Arm).unwrap();
        armed(&events);
        // Four delays of the cancelled timer: it would have fired.
        assert_eq!(events.recv_timeout(ms(80)).unwrap_err(), RecvTimeoutError::Timeout);
        assert_eq!(report(&timed, &events), Vec::<&str>::new());
        assert_eq!(drops.load(Ordering::SeqCst), 3, "each message dropped once");
        timed.stop().unwrap();
    });
}
drive_tests!(cancel_before_firing => a_cancelled_timer_delivers_nothing_1, a_cancelled_timer_delivers_nothing_4, a_cancelled_timer_delivers_nothing_engine);

/// A timer cancelled from outside the actor, through the runtime: the
/// reply says whether it was pending, its message is dropped once, and the
/// worker counts it gone; a timer of an ended actor is not pending.
fn cancel_from_outside(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let (tx, events) = smarm::channel();
        let drops = counter();
        let worker = next_worker(workers);
        let timed = rt.spawn_actor_on(worker, Timed::new(Plan::Outside(drops.clone()), &tx)).unwrap();
        timed.send(Msg::Arm).unwrap();
        let Event::Timers(timers) = events.recv().unwrap() else { panic!("expected the timers") };
        armed(&events);
        let pending = || rt.actor_stats(worker).unwrap().timers;
        wait_until("two timers pending", || pending() == 2);
        assert_eq!(timers[0].owner(), timed.pid());
        assert_eq!(rt.cancel_timer(&timers[0]).wait(), Ok(true));
        assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped at the cancel");
        assert_eq!(rt.cancel_timer(&timers[0]).wait(), Ok(false), "cancelled already");
        assert_eq!(rt.cancel_timer(&timers[1]).wait(), Ok(true));
        assert_eq!(drops.load(Ordering::SeqCst), 2);
        wait_until("no timer pending", || pending() == 0);
        let down = smarm::monitor(timed.pid());
        timed.stop().unwrap();
        down.rx.recv().unwrap();
        assert_eq!(rt.cancel_timer(&timers[1]).wait(), Ok(false), "its owner has ended");
        assert!(events.try_recv().is_err(), "nothing delivered");
        assert_eq!(drops.load(Ordering::SeqCst), 2, "each message dropped once");
    });
}
drive_tests!(cancel_from_outside => a_timer_is_cancelled_from_outside_1, a_timer_is_cancelled_from_outside_4, a_timer_is_cancelled_from_outside_engine);

/// How the doomed actor ends.
#[derive(Debug, Clone, Copy)]
enum Ending {
    Stop,
    RequestStop,
    StopActor,
    Panic,
}

/// The timers of an actor that ends — stopped by message, by a stop
/// request, by an admin stop, or by a panic — never deliver, to it or to
/// another actor, and drop their messages once each.
fn die_with_their_actor(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        for ending in [Ending::Stop, Ending::RequestStop, Ending::StopActor, Ending::Panic] {
            let (tx, events) = smarm::channel();
            let drops = counter();
            let reached = counter();
            let witness = rt.spawn_actor_on(next_worker(workers), Witness(reached.clone())).unwrap();
            let plan = Plan::Doomed { drops: drops.clone(), other: witness.clone() };
            let worker = next_worker(workers);
            let timed = rt.spawn_actor_on(worker, Timed::new(plan, &tx)).unwrap();
            let down = smarm::monitor(timed.pid());
            timed.send(Msg::Arm).unwrap();
            armed(&events);
            // The worker's statistics count them pending (once published).
            let pending = || rt.actor_stats(worker).unwrap().timers;
            wait_until("four timers pending", || pending() == 4);
            match ending {
                Ending::Stop => timed.stop().unwrap(),
                Ending::RequestStop => rt.request_stop(timed.pid()).unwrap(),
                Ending::StopActor => rt.stop_actor(timed.pid(), ExitReason::Stopped).unwrap(),
                Ending::Panic => timed.send(Msg::Crash).unwrap(),
            }
            down.rx.recv().unwrap();
            // Its timers went with it before its death was announced: their
            // messages are dropped (so none can ever be delivered), once.
            assert_eq!(drops.load(Ordering::SeqCst), 4, "{ending:?}: four timers, four drops");
            assert!(events.try_recv().is_err(), "{ending:?}: nothing delivered to it");
            // The witness handles what reached it before a stop queued now.
            let witness_down = smarm::monitor(witness.pid());
            witness.stop().unwrap();
            witness_down.rx.recv().unwrap();
            assert_eq!(reached.load(Ordering::SeqCst), 0, "{ending:?}: the other actor got nothing");
            assert_eq!(drops.load(Ordering::SeqCst), 4, "{ending:?}: dropped once");
            wait_until("no timer pending", || pending() == 0);
        }
    });
}
drive_tests!(die_with_their_actor => timers_of_an_ended_actor_never_deliver_1, timers_of_an_ended_actor_never_deliver_4, timers_of_an_ended_actor_never_deliver_engine);

/// A timer to another actor reaches it; one to an actor that has ended is
/// dropped once.
fn to_another_actor(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let reached = counter();
        let drops = counter();
        let witness = rt.spawn_actor_on(next_worker(workers), Witness(reached.clone())).unwrap();
        let gone = rt.spawn_actor(Witness(counter())).unwrap();
        let down = smarm::monitor(gone.pid());
        gone.stop().unwrap();
        down.rx.recv().unwrap();

        /// Sets one timer to each target when it starts.
        struct Aimer {
            to: Addr<Witness>,
            gone: Addr<Witness>,
            drops: Arc<AtomicUsize>,
        }
        impl Actor for Aimer {
            type Msg = ();
            fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
                ctx.send_after_to(&self.to, ms(5), Counted(self.drops.clone()));
                ctx.send_after_to(&self.gone, ms(5), Counted(self.drops.clone()));
            }
            fn handle(&mut self, _: &mut Ctx<'_, Self>, (): ()) {}
        }
        let sender = rt.spawn_actor(Aimer { to: witness.clone(), gone, drops: drops.clone() }).unwrap();
        let start = smarm::now().unwrap();
        while drops.load(Ordering::SeqCst) < 2 {
            assert!(smarm::now().unwrap() - start < Duration::from_secs(10), "the timers never fired");
            smarm::sleep(ms(1));
        }
        assert_eq!(reached.load(Ordering::SeqCst), 1, "the live target got its message");
        assert_eq!(drops.load(Ordering::SeqCst), 2, "each message dropped once");
        sender.stop().unwrap();
        witness.stop().unwrap();
    });
}
drive_tests!(to_another_actor => a_timer_reaches_another_actor_1, a_timer_reaches_another_actor_4, a_timer_reaches_another_actor_engine);
