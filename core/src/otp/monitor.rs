//! Monitors, links and exit trapping (ROADMAP v0.4 §3, v0.5).
//!
//! A **monitor** is one-way and one-shot: `monitor(pid)` returns a
//! [`Monitor`] whose receiver gets exactly one [`Down`] when the target
//! dies (or at once, with [`DownReason::NoProc`], if it is already dead).
//! A **link** is two-way: when either side dies abnormally (anything but a
//! normal return), the other is stopped — unless it traps exits, in which
//! case it receives an [`ExitSignal`] on the receiver [`trap_exit`]
//! returned. A normal exit does not propagate.
//!
//! Death notifications are delivered by the dead process's worker during
//! finalize, before the slot is reclaimed.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::sync::Arc;
use core::fmt;

use crate::kernel::atomic::{spin_loop, AtomicU8, Ordering};
use crate::kernel::error::NoProc;
use crate::kernel::host::Outcome;
use crate::kernel::pid::Pid;
use crate::kernel::runtime::{Runtime, Shared};
use crate::sync::channel::{channel, Receiver, Sender};

/// Why a process died, as its monitors and linked peers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DownReason {
    /// Its body returned.
    Normal,
    /// It was stopped (`request_stop`).
    Stopped,
    /// It panicked; the message.
    Panicked(String),
    /// It was stopped because a linked process died abnormally.
    Linked {
        /// The linked process that died.
        peer: Pid,
        /// Why it died.
        reason: Box<DownReason>,
    },
    /// It did not exist when the monitor (or link) was made.
    NoProc,
}

impl DownReason {
    /// Whether this death propagates over links (anything but `Normal`).
    pub fn is_abnormal(&self) -> bool {
        !matches!(self, DownReason::Normal)
    }

    pub(crate) fn from_outcome(outcome: &Outcome, cause: Option<&(Pid, DownReason)>) -> DownReason {
        match (outcome, cause) {
            (Outcome::Normal, _) => DownReason::Normal,
            (Outcome::Stopped, Some((peer, reason))) => {
                DownReason::Linked { peer: *peer, reason: Box::new(reason.clone()) }
            }
            (Outcome::Stopped, None) => DownReason::Stopped,
            (Outcome::Panicked(m), _) => DownReason::Panicked(m.clone()),
        }
    }
}

impl fmt::Display for DownReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DownReason::Normal => f.write_str("normal"),
            DownReason::Stopped => f.write_str("stopped"),
            DownReason::Panicked(m) => write!(f, "panicked: {m}"),
            DownReason::Linked { peer, reason } => write!(f, "linked process {peer} died ({reason})"),
            DownReason::NoProc => f.write_str("noproc"),
        }
    }
}

/// Identifies one monitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MonitorId(pub u64);

/// The notice a monitor delivers once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Down {
    /// The monitor that fired.
    pub id: MonitorId,
    /// The process that died.
    pub pid: Pid,
    /// Why.
    pub reason: DownReason,
}

/// A live monitor: its `rx` receives one [`Down`].
#[derive(Debug)]
pub struct Monitor {
    /// This monitor's id.
    pub id: MonitorId,
    /// The watched process.
    pub target: Pid,
    /// Where the `Down` arrives.
    pub rx: Receiver<Down>,
    state: Arc<AtomicU8>,
}

// A monitor's delivery state: flags in one `AtomicU8`, changed only by RMW.
// The death hook claims delivery (`FIRING`, by CAS from 0) before it sends
// and sets `DELIVERED` once the Down is queued; `demonitor` sets
// `CANCELLED`. A plain flag checked by the hook before sending is not
// enough: on another thread the hook can pass the check, `demonitor` can
// flush an empty receiver, and the Down lands after `demonitor` returned.

/// The hook has claimed delivery and is sending (or has sent) the Down.
const FIRING: u8 = 1;
/// The Down is in the channel.
const DELIVERED: u8 = 2;
/// `demonitor` was called.
const CANCELLED: u8 = 4;

/// The message a process trapping exits receives when a linked process
/// dies abnormally.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitSignal {
    /// The linked process that died.
    pub from: Pid,
    /// Why it died.
    pub reason: DownReason,
}

impl Runtime {
    /// Monitors `target`: one [`Down`] arrives on the returned monitor's
    /// receiver when it dies — at once, with `NoProc`, if it already has.
    pub fn monitor(&self, target: Pid) -> Monitor {
        monitor_in(&self.shared, target)
    }

    /// Links two processes: if either dies abnormally the other is stopped
    /// (or, if it traps exits, told). `Err(NoProc)` if either is dead.
    pub fn link(&self, a: Pid, b: Pid) -> Result<(), NoProc> {
        self.shared.link(a, b)
    }

    /// Removes the link between `a` and `b`, if any.
    pub fn unlink(&self, a: Pid, b: Pid) {
        self.shared.unlink(a, b);
    }
}

fn monitor_in(shared: &Arc<Shared>, target: Pid) -> Monitor {
    let id = MonitorId(shared.next_monitor_id());
    let (tx, rx) = channel::<Down>();
    let state = Arc::new(AtomicU8::new(0));
    let hook_state = state.clone();
    let hook = Box::new(move |pid: Pid, reason: &DownReason| {
        // AcqRel/Acquire: the claim and demonitor's cancel are RMWs on one
        // word, so exactly one of them wins.
        if hook_state.compare_exchange(0, FIRING, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            let _ = tx.send(Down { id, pid, reason: reason.clone() });
            // Release: a demonitor that sees DELIVERED finds the Down queued.
            hook_state.fetch_or(DELIVERED, Ordering::Release);
        }
    });
    if let Err(hook) = shared.on_death(target, hook) {
        hook(target, &DownReason::NoProc);
    }
    Monitor { id, target, rx, state }
}

/// Monitors `target` from the calling process's runtime. Outside a process
/// the returned monitor reports `NoProc` at once (there is no runtime to
/// watch in).
pub fn monitor(target: Pid) -> Monitor {
    match crate::kernel::process::current_runtime() {
        Some(rt) => rt.monitor(target),
        None => {
            let (tx, rx) = channel();
            let _ = tx.send(Down { id: MonitorId(0), pid: target, reason: DownReason::NoProc });
            Monitor { id: MonitorId(0), target, rx, state: Arc::new(AtomicU8::new(FIRING | DELIVERED)) }
        }
    }
}

/// Stops `monitor` from delivering: after this its receiver never yields
/// a `Down` (one already queued is discarded). Returns whether the monitor
/// was still active (no `Down` had been delivered or queued).
pub fn demonitor(monitor: &Monitor) -> bool {
    let previous = monitor.state.fetch_or(CANCELLED, Ordering::AcqRel);
    if previous == 0 {
        // Cancelled before any delivery was claimed: no Down will come.
        return true;
    }
    if previous & FIRING != 0 {
        // The hook is sending on another thread (on ours it runs to the
        // end without switching): an unbounded send never parks, so this
        // wait is a few instructions long.
        while monitor.state.load(Ordering::Acquire) & DELIVERED == 0 {
            spin_loop();
        }
    }
    let _ = monitor.rx.try_recv();
    false
}

/// Links the calling process with `peer` (see [`Runtime::link`]). Linking
/// to a dead or stale pid is `Err(NoProc)`, as Erlang's `noproc`.
pub fn link(peer: Pid) -> Result<(), NoProc> {
    let me = crate::kernel::process::self_pid().ok_or(NoProc(peer))?;
    let rt = crate::kernel::process::current_runtime().ok_or(NoProc(peer))?;
    rt.link(me, peer)
}

/// Removes the calling process's link with `peer`, if any: a death after
/// this sends no signal either way.
pub fn unlink(peer: Pid) {
    if let (Some(me), Some(rt)) =
        (crate::kernel::process::self_pid(), crate::kernel::process::current_runtime())
    {
        rt.unlink(me, peer);
    }
}

/// Makes the calling process trap exits: from now on an abnormal death of
/// a linked process arrives as an [`ExitSignal`] on the returned receiver
/// instead of stopping it. Calling it again replaces the receiver. `None`
/// outside a process.
pub fn trap_exit() -> Option<Receiver<ExitSignal>> {
    let me = crate::kernel::process::self_pid()?;
    let rt = crate::kernel::process::current_runtime()?;
    let (tx, rx) = channel();
    rt.shared.set_trap(me, tx).ok()?;
    Some(rx)
}

/// What finalize does for one linked peer of a dead process.
pub(crate) enum LinkAction {
    Nothing,
    Signal(Sender<ExitSignal>),
    Stop,
}
