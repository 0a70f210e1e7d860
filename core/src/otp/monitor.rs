//! Monitors: one-way, one-shot notice of a process's death.
//!
//! `monitor(pid)` returns a [`Monitor`] whose receiver gets exactly one
//! [`Down`] when the target dies (or at once, with [`ExitReason::NoProc`],
//! if it is already dead). A monitor is a kernel death hook that sends the
//! `Down`; [`demonitor`] removes the hook, so a monitor dropped early costs
//! nothing at the target's death.
//!
//! Death notifications are delivered by the dead process's worker during
//! finalize, before the slot is reclaimed and before `join` returns.

#![deny(unsafe_code)]

use alloc::boxed::Box;
use alloc::sync::{Arc, Weak};

use crate::kernel::atomic::{spin_loop, AtomicU8, Ordering};
use crate::kernel::deadlock::WaitKind;
use crate::kernel::exit::ExitReason;
use crate::kernel::pid::Pid;
use crate::kernel::runtime::{Runtime, Shared};
use crate::kernel::slab::DeathHookId;
use crate::sync::channel::{channel, channel_waited_as, Receiver};

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
    pub reason: ExitReason,
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
    /// The death hook behind the monitor, and the runtime it lives in
    /// (`None` when the target was dead at once). Weak: a monitor does not
    /// keep its runtime alive.
    hook: Option<(Weak<Shared>, DeathHookId)>,
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

impl Runtime {
    /// Monitors `target`: one [`Down`] arrives on the returned monitor's
    /// receiver when it dies — at once, with `NoProc`, if it already has.
    pub fn monitor(&self, target: Pid) -> Monitor {
        monitor_in(&self.shared, target)
    }
}

fn monitor_in(shared: &Arc<Shared>, target: Pid) -> Monitor {
    let id = MonitorId(shared.next_hook_id());
    let (tx, rx) = channel_waited_as::<Down>(WaitKind::MonitorDown);
    let state = Arc::new(AtomicU8::new(0));
    let hook_state = state.clone();
    let hook = Box::new(move |_: &Shared, pid: Pid, reason: &ExitReason| {
        // AcqRel/Acquire: the claim and demonitor's cancel are RMWs on one
        // word, so exactly one of them wins.
        if hook_state.compare_exchange(0, FIRING, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            let _ = tx.send(Down { id, pid, reason: reason.clone() });
            // Release: a demonitor that sees DELIVERED finds the Down queued.
            hook_state.fetch_or(DELIVERED, Ordering::Release);
        }
    });
    let hook = match shared.on_death(target, hook) {
        Ok(hook_id) => Some((Arc::downgrade(shared), hook_id)),
        Err(hook) => {
            hook(shared, target, &ExitReason::NoProc);
            None
        }
    };
    Monitor { id, target, rx, state, hook }
}

/// Monitors `target` from the calling process's runtime. Outside a process
/// the returned monitor reports `NoProc` at once (there is no runtime to
/// watch in).
pub fn monitor(target: Pid) -> Monitor {
    match crate::kernel::process::current_runtime() {
        Some(rt) => rt.monitor(target),
        None => {
            let (tx, rx) = channel();
            let _ = tx.send(Down { id: MonitorId(0), pid: target, reason: ExitReason::NoProc });
            Monitor {
                id: MonitorId(0),
                target,
                rx,
                state: Arc::new(AtomicU8::new(FIRING | DELIVERED)),
                hook: None,
            }
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
        // The hook is dead weight now; take it off the target (if it is
        // running right now it finds CANCELLED and sends nothing).
        if let Some((shared, hook)) = &monitor.hook {
            if let Some(shared) = shared.upgrade() {
                shared.remove_death_hook(monitor.target, *hook);
            }
        }
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
