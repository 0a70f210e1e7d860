//! Deadlock reports: what each parked process waits on, and the count of
//! plain threads asleep in a wait, from which a host proves that nothing
//! can wake anyone.
//!
//! Every wait records where it began (a [`WaitSite`]: the kind of wait and
//! the caller's source line, two relaxed stores into the process's slot).
//! A host whose drivers are about to sleep with no deadline asks
//! `Runtime::find_deadlock` whether the runtime can still move; if it cannot, the report names
//! every parked process and what it waits on.
//!
//! # The rule
//!
//! A runtime is deadlocked when all of these hold at once, and stay
//! holding over the whole look:
//!
//! 1. every live process and handler actor is parked (none ready, running,
//!    or woken and in flight through a ring);
//! 2. every driver of the runtime sleeps with no deadline (no timer is
//!    pending on any worker) and no wake is pending on its park token;
//! 3. no io is outstanding (no external work, no fd or socket registered
//!    with the runtime's poller);
//! 4. every OS thread of the program is one of the runtime's own (its
//!    drivers, the thread blocked in the host's wait) or a plain thread
//!    asleep in a smarm wait *without* a deadline.
//!
//! Then nothing can run: a wake is a call some running code makes, and
//! there is no running code left — no process (1), no driver with work or
//! a timer (2), no io completion (3), no other thread (4). A thread
//! sleeping in `std::thread::sleep`, in a foreign runtime or in any other
//! blocking call is awake for this rule: it may come back and send.
//!
//! # Races
//!
//! The host takes the look while its drivers are asleep, and the look
//! fails on any sign of movement: a process not parked, a driver that
//! woke or has a wake pending (each driver's sleep counter and token are
//! read before and after the scan and must not change), or a plain
//! thread that went to sleep or was woken meanwhile ([`thread_events`]
//! changes at both, bumped by the waker *before* it goes on, so a wake in
//! flight is seen). The thread count is read before and after too. A wake
//! of a sleeping thread takes it out of the count at the waker's
//! compare-and-swap, never later, so the count never says "asleep" of a
//! thread that is about to run; it may briefly say "awake" of one that is
//! asleep, which only delays a report. Where the thread count cannot be
//! read ([`Platform::threads`](smarm_platform::Platform::threads) is
//! `None`) nothing is ever reported. A signal handler that wakes a wait is
//! not seen (nothing that allocates or locks, as a wake does, is
//! async-signal-safe).

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::panic::Location;

use crate::kernel::pid::Pid;

use crate::kernel::atomic::{AtomicU64, AtomicUsize, Ordering};

/// What a parked process waits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
#[repr(u8)]
pub enum WaitKind {
    /// A wait the blocking call did not name (an internal wait).
    Other = 0,
    /// `recv` on a channel.
    ChannelRecv = 1,
    /// `send` into a full (or rendezvous) channel.
    ChannelSend = 2,
    /// `join` of a process.
    Join = 3,
    /// `lock` of a contended mutex.
    Mutex = 4,
    /// `select` over several receivers.
    Select = 5,
    /// A monitor's `Down`.
    MonitorDown = 6,
    /// A gen_server `call` waiting for its reply.
    Call = 7,
    /// `recv` on a handler actor's inbox.
    Inbox = 8,
    /// An `Ask` waiting for its reply.
    Ask = 9,
    /// A future polled by `block_on`.
    Future = 10,
    /// Readiness of a socket or a descriptor.
    Io = 11,
    /// A sleep (a timer is pending, so never reported).
    Sleep = 12,
    /// A bare `begin_wait` / `park`, with nothing said about what wakes it.
    Park = 13,
}

impl WaitKind {
    /// Decodes a stored byte; an unknown one reads as `Other`.
    pub(crate) fn from_bits(bits: u8) -> WaitKind {
        match bits {
            1 => WaitKind::ChannelRecv,
            2 => WaitKind::ChannelSend,
            3 => WaitKind::Join,
            4 => WaitKind::Mutex,
            5 => WaitKind::Select,
            6 => WaitKind::MonitorDown,
            7 => WaitKind::Call,
            8 => WaitKind::Inbox,
            9 => WaitKind::Ask,
            10 => WaitKind::Future,
            11 => WaitKind::Io,
            12 => WaitKind::Sleep,
            13 => WaitKind::Park,
            _ => WaitKind::Other,
        }
    }
}

impl fmt::Display for WaitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WaitKind::Other => "a wait",
            WaitKind::ChannelRecv => "channel recv",
            WaitKind::ChannelSend => "send into a full channel",
            WaitKind::Join => "join",
            WaitKind::Mutex => "mutex lock",
            WaitKind::Select => "select",
            WaitKind::MonitorDown => "monitor Down",
            WaitKind::Call => "gen_server call",
            WaitKind::Inbox => "inbox recv",
            WaitKind::Ask => "ask reply",
            WaitKind::Future => "future (block_on)",
            WaitKind::Io => "io readiness",
            WaitKind::Sleep => "sleep",
            WaitKind::Park => "park",
        })
    }
}

/// Where a wait began: its kind and the source line of the blocking call.
#[derive(Debug, Clone, Copy)]
pub struct WaitSite {
    /// What the wait is for.
    pub kind: WaitKind,
    /// The caller of the public blocking call.
    pub location: &'static Location<'static>,
}

impl WaitSite {
    /// A site of `kind` at the caller's location (pass it down through
    /// `#[track_caller]` functions to name the user's line).
    #[track_caller]
    #[inline]
    pub fn here(kind: WaitKind) -> WaitSite {
        WaitSite { kind, location: Location::caller() }
    }
}

/// One parked process of a deadlock report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParkedProcess {
    /// The process.
    pub pid: Pid,
    /// What it waits on.
    pub kind: WaitKind,
    /// The source line of the blocking call, if one was recorded.
    pub location: Option<&'static Location<'static>>,
    /// Its registered name, if any (filled in by the host).
    pub name: Option<String>,
}

/// One idle handler actor of a deadlock report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdleActor {
    /// The actor.
    pub pid: Pid,
    /// Its registered name, if any (filled in by the host).
    pub name: Option<String>,
}

/// Every process and handler actor of a runtime that can never be woken:
/// what `run`, `block_on` and `wait` end with instead of waiting forever.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeadlockReport {
    /// The parked processes, in slot order.
    pub processes: Vec<ParkedProcess>,
    /// The idle handler actors, in slot order.
    pub actors: Vec<IdleActor>,
}

impl fmt::Display for DeadlockReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = |n: usize, one: &'static str, many: &'static str| if n == 1 { one } else { many };
        write!(
            f,
            "deadlock: {} {} parked and {} idle {}, and nothing can wake one \
             (no timer pending, no io outstanding, no other thread awake)",
            self.processes.len(),
            plural(self.processes.len(), "process", "processes"),
            self.actors.len(),
            plural(self.actors.len(), "handler actor", "handler actors"),
        )?;
        for process in &self.processes {
            write!(f, "\n  {} waits on {}", process.pid, process.kind)?;
            if let Some(location) = process.location {
                write!(f, " at {}:{}:{}", location.file(), location.line(), location.column())?;
            }
            if let Some(name) = &process.name {
                write!(f, " (registered as {name:?})")?;
            }
        }
        for actor in &self.actors {
            write!(f, "\n  handler actor {} is idle", actor.pid)?;
            if let Some(name) = &actor.name {
                write!(f, " (registered as {name:?})")?;
            }
        }
        Ok(())
    }
}

impl core::error::Error for DeadlockReport {}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn a_report_names_each_waiter_its_wait_and_its_line() {
        let here = Location::caller();
        let report = DeadlockReport {
            processes: alloc::vec![ParkedProcess {
                pid: Pid::from_parts(3, 1),
                kind: WaitKind::Join,
                location: Some(here),
                name: Some("joiner".into()),
            }],
            actors: alloc::vec![IdleActor { pid: Pid::from_parts(4, 2), name: None }],
        };
        let text = report.to_string();
        assert!(text.starts_with("deadlock: 1 process parked and 1 idle handler actor,"), "{text}");
        let line = alloc::format!("<3.1> waits on join at {}:{}:", here.file(), here.line());
        assert!(text.contains(&line) && text.contains("(registered as \"joiner\")"), "{text}");
        assert!(text.contains("handler actor <4.2> is idle"), "{text}");
    }

    #[test]
    fn every_kind_reads_back_from_its_byte() {
        use WaitKind::*;
        for kind in [
            Other,
            ChannelRecv,
            ChannelSend,
            Join,
            Mutex,
            Select,
            MonitorDown,
            Call,
            Inbox,
            Ask,
            Future,
            Io,
            Sleep,
            Park,
        ] {
            assert_eq!(WaitKind::from_bits(kind as u8), kind);
        }
        assert_eq!(WaitKind::from_bits(200), Other);
    }
}

/// Plain threads asleep in a wait with no deadline.
#[cfg(not(loom))]
static THREADS_ASLEEP: AtomicUsize = AtomicUsize::new(0);
/// Bumped whenever a plain thread goes to sleep in a wait with no
/// deadline, and whenever such a sleep is woken (by the waker, before it
/// goes on).
#[cfg(not(loom))]
static THREAD_EVENTS: AtomicU64 = AtomicU64::new(0);

// Under loom, the same counters as loom atomics, fresh in every execution
// of a model (see the parker's models).
#[cfg(loom)]
loom::lazy_static! {
    static ref THREADS_ASLEEP: AtomicUsize = AtomicUsize::new(0);
    static ref THREAD_EVENTS: AtomicU64 = AtomicU64::new(0);
}

/// A plain thread has gone to sleep in a wait with no deadline.
#[inline]
pub(crate) fn thread_asleep() {
    // SeqCst: the deadlock look reads these in one total order with the
    // drivers' sleep words and tokens (see the module docs).
    THREAD_EVENTS.fetch_add(1, Ordering::SeqCst);
    THREADS_ASLEEP.fetch_add(1, Ordering::SeqCst);
}

/// A sleeping thread's wait was woken: called by the waker right after its
/// compare-and-swap won, before it does anything else. (The count may dip
/// below the truth for a moment — below zero, wrapping — when the waker
/// wins before the sleeper has counted itself: that only delays a
/// report.)
#[inline]
pub(crate) fn thread_woken() {
    THREADS_ASLEEP.fetch_sub(1, Ordering::SeqCst);
    THREAD_EVENTS.fetch_add(1, Ordering::SeqCst);
}

/// Plain threads asleep in a smarm wait with no deadline, and the count of
/// such sleeps and wakes so far: a host's deadlock look reads both before
/// and after, and an unchanged event count means no thread went to sleep
/// or was woken in between. The first may read as a huge number for a
/// moment (see `thread_woken`), which no host takes for a thread count.
pub fn thread_events() -> (usize, u64) {
    let events = THREAD_EVENTS.load(Ordering::SeqCst);
    (THREADS_ASLEEP.load(Ordering::SeqCst), events)
}
