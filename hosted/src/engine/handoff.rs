//! Drivers trade workers (`Builder::worker_handoff`): what the drivers see
//! of each other, and the rules by which a driver gives workers away.
//!
//! Between two rounds (a round is one pass of each worker a driver holds)
//! a driver may give workers to another:
//!
//! - *Gather.* A driver whose round found nothing to do gives every worker
//!   it has held for at least [`HOLD`] and that has no work queued to a
//!   driver whose last round found work. Work that goes back and forth
//!   between workers — a ping-pong, a ring, a server and its clients —
//!   then runs on one thread, and a message between them is a push into a
//!   queue the same thread reads next, not a hop between CPUs.
//! - *Spread.* A driver that has found more than one of its workers with
//!   work at the start of every round for [`SPREAD_AFTER`] gives one of
//!   them (held for at least [`HOLD`], not the first it holds) to a driver
//!   whose last round found nothing, so parallel work uses the CPUs again.
//!   Back-and-forth work never has two workers with work at once, so it
//!   does not spread.
//!
//! A hand-off is [`Worker::move_to_driver`] (the worker's wakes now signal
//! the new driver's token), a push into the new driver's inbox (a mutex
//! and a flag it reads at every turn of its loop, and before it sleeps),
//! and a notify of the new driver; the worker's processes, actors, timers
//! and queues go with it untouched. No wake is lost in the move: a waker
//! that read the old driver's token signals it, and the new driver looks
//! at the worker's queues after its own next unwatch (`smarm-core`'s loom
//! model `wake_into_a_moving_worker`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use smarm_arch::{Arch, Native};
use smarm_core::{Runtime, Worker};

use super::EngineShared;

/// What the other drivers see of one driver, and the workers they hand it;
/// in its own cache block.
#[derive(Default)]
#[repr(align(128))]
pub(super) struct Board {
    /// Workers handed to this driver and not yet in its loop.
    inbox: std::sync::Mutex<Vec<Worker>>,
    /// `inbox` has workers: read at every turn of the loop, without the
    /// lock, and before the driver sleeps.
    mail: AtomicBool,
    /// The driver's last round found work: a driver going idle gives its
    /// workers only to a running one.
    running: AtomicBool,
}

impl Board {
    /// Whether workers wait in the inbox (one relaxed load: the driver
    /// takes them under the inbox's lock).
    pub(super) fn has_mail(&self) -> bool {
        self.mail.load(Ordering::Relaxed)
    }

    /// Records whether the last round found work, writing only on a
    /// change so the line stays shared in the readers' caches.
    pub(super) fn set_running(&self, running: bool) {
        // Relaxed: a hint for the hand-off rules; it guards no data.
        if self.running.load(Ordering::Relaxed) != running {
            self.running.store(running, Ordering::Relaxed);
        }
    }
}

/// A driver that has found more than one of its workers with work at the
/// start of every round for this long gives one of them to an idle driver.
pub(super) const SPREAD_AFTER: Duration = Duration::from_micros(50);
/// How long a driver keeps a worker it was given before it gives it away.
pub(super) const HOLD: Duration = Duration::from_millis(1);

/// One worker in a driver's hands, and when it came (timestamp ticks; 0 for
/// the workers the driver starts with).
pub(super) struct Held {
    pub(super) worker: Worker,
    pub(super) since: u64,
}

impl EngineShared {
    /// The other drivers, starting after `driver`.
    fn others(&self, driver: usize) -> impl Iterator<Item = usize> + '_ {
        (1..self.drivers).map(move |step| (driver + step) % self.drivers)
    }

    /// Takes the workers handed to `driver` into `held`.
    pub(super) fn take_mail(&self, driver: usize, held: &mut Vec<Held>) {
        let board = &self.boards[driver];
        let arrived = {
            let mut inbox = board.inbox.lock().unwrap_or_else(|poison| poison.into_inner());
            board.mail.store(false, Ordering::Relaxed);
            std::mem::take(&mut *inbox)
        };
        let now = Native::timestamp();
        // A push that signalled the old driver is seen by a pass here, or
        // at the latest by the look after our unwatch (`move_to_driver`).
        held.extend(arrived.into_iter().map(|worker| Held { worker, since: now }));
    }

    /// Gives `workers` to driver `to`: moves their signals to its token,
    /// puts them where it looks, and tells it.
    fn hand(&self, runtime: &Runtime, to: usize, mut workers: Vec<Worker>) {
        for worker in &mut workers {
            // `to` is one of ours, so it is a driver of the runtime.
            let _ = worker.move_to_driver(to);
        }
        let board = &self.boards[to];
        board.inbox.lock().unwrap_or_else(|poison| poison.into_inner()).extend(workers);
        board.mail.store(true, Ordering::Relaxed);
        // Fences before it reads whether `to` watches: either `to` sees
        // `mail` before it sleeps or its token is signalled.
        let _ = runtime.notify_driver(to);
    }

    /// A round of `driver` found nothing to do: it gives its idle workers
    /// (held long enough) to a driver that is running, so that work going
    /// back and forth between them and that driver's runs on one thread.
    pub(super) fn gather(&self, runtime: &Runtime, driver: usize, held: &mut Vec<Held>) {
        if held.is_empty() {
            return;
        }
        let Some(to) = self.others(driver).find(|&d| self.boards[d].running.load(Ordering::Relaxed)) else {
            return;
        };
        let now = Native::timestamp();
        let mut moving = Vec::new();
        let mut index = 0;
        while index < held.len() {
            let entry = &held[index];
            if now.wrapping_sub(entry.since) >= self.hold && !entry.worker.has_work() {
                moving.push(held.swap_remove(index).worker);
            } else {
                index += 1;
            }
        }
        if !moving.is_empty() {
            self.hand(runtime, to, moving);
        }
    }

    /// More than one worker of `driver` has had work at the start of every
    /// round since `since`: if that is [`SPREAD_AFTER`] ago, it gives one
    /// of them (held long enough, not its first) to an idle driver, so the
    /// work spreads over the CPUs again. (Work that goes back and forth
    /// between two workers has only one of them with work at a time.)
    pub(super) fn spread(
        &self,
        runtime: &Runtime,
        driver: usize,
        held: &mut Vec<Held>,
        pending: &[bool],
        since: u64,
    ) -> bool {
        let now = Native::timestamp();
        if now.wrapping_sub(since) < self.spread_after {
            return false;
        }
        let Some(to) = self.others(driver).find(|&d| !self.boards[d].running.load(Ordering::Relaxed)) else {
            return false;
        };
        let pick =
            (1..held.len()).rev().find(|&i| pending[i] && now.wrapping_sub(held[i].since) >= self.hold);
        let Some(index) = pick else { return false };
        let worker = held.swap_remove(index).worker;
        // Marked running now, so no one gathers onto it before its first
        // round says so itself.
        self.boards[to].set_running(true);
        self.hand(runtime, to, vec![worker]);
        true
    }
}
