//! Links and exit trapping: two-way death propagation.
//!
//! When either side of a link dies abnormally (anything but a normal
//! return), the other is stopped with [`ExitReason::Linked`] — unless it
//! traps exits, in which case it receives an [`ExitSignal`] on the receiver
//! [`trap_exit`] returned. A normal exit stops nobody; a trapping peer is
//! told of it all the same, as Erlang's `{'EXIT', Pid, normal}`.
//!
//! [`exit`] sends an exit signal by hand, with Erlang's rules: `Normal` is
//! dropped unless the target traps exits; [`ExitReason::Killed`] cannot be
//! trapped and ends the target; any other reason ends a non-trapping target
//! with that reason and reaches a trapping one as a message.
//!
//! Ending a process means requesting its stop: it unwinds at its next
//! observation point (a yield, a park, `check!()`). A process that never
//! reaches one — a tight loop without `check!()` — cannot be ended, not
//! even by `Killed`.
//!
//! The link table is a per-runtime extension: one entry per process that
//! has a link or traps exits, holding its peers and its trap sender. Each
//! entry is backed by one kernel death hook on its process; the hook takes
//! the entry out when the process dies and tells its peers.
//!
//! Invariant: an entry exists in the table only while its process's death
//! hook has not run. A link is recorded only between two entries present
//! in the table under one lock, so whichever hook runs later sees the link.

#![deny(unsafe_code)]

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::sync::Arc;
use alloc::vec::Vec;

use crate::kernel::error::NoProc;
use crate::kernel::exit::ExitReason;
use crate::kernel::pid::Pid;
use crate::kernel::process;
use crate::kernel::runtime::{Runtime, Shared};
use crate::kernel::spin::RuntimeMutex;
use crate::sync::channel::{channel, Receiver, Sender};

/// The message a process trapping exits receives when a linked process
/// dies abnormally.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitSignal {
    /// The linked process that died.
    pub from: Pid,
    /// Why it died.
    pub reason: ExitReason,
}

/// Where a trapping process's exit signals go: the receiver
/// [`trap_exit`] returned, or a callback of a layer above (a handler
/// actor's mailbox).
#[derive(Clone)]
pub(crate) enum Trap {
    Channel(Sender<ExitSignal>),
    Hook(Arc<dyn Fn(ExitSignal) + Send + Sync>),
}

impl Trap {
    fn deliver(&self, signal: ExitSignal) {
        match self {
            // A trapper that has dropped its receiver gets nothing.
            Trap::Channel(tx) => {
                let _ = tx.send(signal);
            }
            Trap::Hook(hook) => hook(signal),
        }
    }
}

/// One process's side of its links.
#[derive(Default)]
struct Entry {
    peers: Vec<Pid>,
    trap: Option<Trap>,
}

/// The runtime's link table (an extension slot).
struct Links {
    entries: RuntimeMutex<BTreeMap<Pid, Entry>>,
}

impl Links {
    fn of(shared: &Shared) -> Arc<Links> {
        shared.extension(|| Links { entries: RuntimeMutex::leaf(BTreeMap::new()) })
    }

    /// Makes sure `pid` has an entry backed by a death hook; `Err` if the
    /// process is dead.
    fn ensure_entry(self: &Arc<Self>, shared: &Shared, pid: Pid) -> Result<(), NoProc> {
        {
            let mut entries = self.entries.lock();
            if entries.contains_key(&pid) {
                // Its hook is registered (or being registered by the caller
                // that inserted it, which removes the entry if that fails).
                return Ok(());
            }
            entries.insert(pid, Entry::default());
        }
        let links = self.clone();
        let hook = Box::new(move |shared: &Shared, dead: Pid, reason: &ExitReason| {
            links.died(shared, dead, reason);
        });
        if shared.on_death(pid, hook).is_err() {
            // Dead before its hook could be registered. A concurrent `link`
            // may have recorded itself in the entry meanwhile and returned
            // Ok: it linked to a dead process, which Erlang answers with a
            // `noproc` exit signal, and so do we.
            self.died(shared, pid, &ExitReason::NoProc);
            return Err(NoProc(pid));
        }
        Ok(())
    }

    /// `dead` died with `reason`: remove its entry and tell its peers.
    fn died(&self, shared: &Shared, dead: Pid, reason: &ExitReason) {
        let Some(entry) = self.entries.lock().remove(&dead) else { return };
        // Outside the table lock: dropping a sender may take a channel lock.
        drop(entry.trap);
        for peer in entry.peers {
            self.propagate(shared, peer, dead, reason);
        }
    }

    /// Tells linked `peer` that `dead` died with `reason`.
    fn propagate(&self, shared: &Shared, peer: Pid, dead: Pid, reason: &ExitReason) {
        let action = {
            let mut entries = self.entries.lock();
            match entries.get_mut(&peer) {
                // The peer's own hook has run: it is dead too.
                None => Action::Nothing,
                Some(entry) => {
                    entry.peers.retain(|p| *p != dead);
                    match (&entry.trap, reason.is_abnormal()) {
                        (Some(trap), _) => Action::Signal(trap.clone()),
                        (None, false) => Action::Nothing,
                        (None, true) => Action::Stop,
                    }
                }
            }
        };
        match action {
            Action::Nothing => {}
            Action::Signal(trap) => trap.deliver(ExitSignal { from: dead, reason: reason.clone() }),
            Action::Stop => {
                let linked = ExitReason::Linked { peer: dead, reason: Box::new(reason.clone()) };
                let _ = shared.request_stop_with(peer, Some(linked));
            }
        }
    }

    fn link(self: &Arc<Self>, shared: &Shared, a: Pid, b: Pid) -> Result<(), NoProc> {
        if a == b {
            return if shared.is_alive(a) { Ok(()) } else { Err(NoProc(a)) };
        }
        self.ensure_entry(shared, a)?;
        self.ensure_entry(shared, b)?;
        let mut entries = self.entries.lock();
        // Either hook may have run since: record the link only if both
        // entries are still there, so the later death sees it.
        if let Some(dead) = [a, b].into_iter().find(|pid| !entries.contains_key(pid)) {
            return Err(NoProc(dead));
        }
        for (me, peer) in [(a, b), (b, a)] {
            if let Some(entry) = entries.get_mut(&me) {
                if !entry.peers.contains(&peer) {
                    entry.peers.push(peer);
                }
            }
        }
        Ok(())
    }

    /// The trap sender of `pid`, if it traps exits.
    fn trap_of(&self, pid: Pid) -> Option<Trap> {
        self.entries.lock().get(&pid).and_then(|entry| entry.trap.clone())
    }

    fn unlink(&self, a: Pid, b: Pid) {
        let mut entries = self.entries.lock();
        for (me, peer) in [(a, b), (b, a)] {
            if let Some(entry) = entries.get_mut(&me) {
                entry.peers.retain(|p| *p != peer);
            }
        }
    }

    fn set_trap(self: &Arc<Self>, shared: &Shared, pid: Pid, trap: Option<Trap>) -> Result<(), NoProc> {
        self.ensure_entry(shared, pid)?;
        let previous = {
            let mut entries = self.entries.lock();
            let entry = entries.get_mut(&pid).ok_or(NoProc(pid))?;
            core::mem::replace(&mut entry.trap, trap)
        };
        // Outside the table lock (a sender's drop may take a channel lock).
        drop(previous);
        Ok(())
    }
}

/// What a death does to one linked peer.
enum Action {
    Nothing,
    Signal(Trap),
    Stop,
}

impl Runtime {
    /// Links two processes: if either dies abnormally the other is stopped
    /// (or, if it traps exits, told). `Err(NoProc)` if either is dead.
    pub fn link(&self, a: Pid, b: Pid) -> Result<(), NoProc> {
        Links::of(&self.shared).link(&self.shared, a, b)
    }

    /// Removes the link between `a` and `b`, if any.
    pub fn unlink(&self, a: Pid, b: Pid) {
        Links::of(&self.shared).unlink(a, b);
    }

    /// Makes `pid` trap exits: from now on an abnormal death of a process
    /// linked to it arrives as an [`ExitSignal`] on the returned receiver
    /// instead of stopping it. Calling it again replaces the receiver.
    pub fn trap_exit(&self, pid: Pid) -> Result<Receiver<ExitSignal>, NoProc> {
        let (tx, rx) = channel();
        Links::of(&self.shared).set_trap(&self.shared, pid, Some(Trap::Channel(tx)))?;
        Ok(rx)
    }

    /// `pid`'s linked peers and whether it traps exits.
    pub(crate) fn links_of(&self, pid: Pid) -> (Vec<Pid>, bool) {
        let links = Links::of(&self.shared);
        let entries = links.entries.lock();
        entries.get(&pid).map_or((Vec::new(), false), |e| (e.peers.clone(), e.trap.is_some()))
    }

    /// Makes `pid` trap exits into `trap` (`None`: stop trapping).
    pub(crate) fn set_trap(&self, pid: Pid, trap: Option<Trap>) -> Result<(), NoProc> {
        Links::of(&self.shared).set_trap(&self.shared, pid, trap)
    }
}

impl Runtime {
    /// Sends an exit signal from `from` to `target` with Erlang's rules:
    /// - `Normal`: dropped unless `target` traps exits, which then receives
    ///   it as an [`ExitSignal`];
    /// - [`ExitReason::Killed`]: untrappable; `target` ends with `Killed`,
    ///   as its monitors and links see;
    /// - any other reason: a trapping `target` receives it as a message; a
    ///   non-trapping one ends with that reason.
    ///
    /// `Err(NoProc)` if `target` is dead. Ending is a stop request: see the
    /// module docs for what it cannot do to a process that never reaches
    /// an observation point.
    pub fn exit(&self, from: Pid, target: Pid, reason: ExitReason) -> Result<(), NoProc> {
        if !self.shared.is_alive(target) {
            return Err(NoProc(target));
        }
        let trap = match reason {
            ExitReason::Killed => None,
            _ => Links::of(&self.shared).trap_of(target),
        };
        match (trap, reason) {
            (Some(trap), reason) => {
                trap.deliver(ExitSignal { from, reason });
                Ok(())
            }
            (None, ExitReason::Normal) => Ok(()),
            (None, reason) => self.shared.request_stop_with(target, Some(reason)),
        }
    }
}

/// Sends an exit signal from the calling process to `target` (see
/// [`Runtime::exit`]). Outside a process: `Err(NoProc)`.
///
/// ```no_run
/// # use smarm_core as smarm;
/// use smarm::{exit, ExitReason};
/// # let pid = smarm::self_pid().unwrap();
/// // Ask a worker to shut down; a trapping worker gets it as a message.
/// exit(pid, ExitReason::Shutdown).ok();
/// ```
pub fn exit(target: Pid, reason: ExitReason) -> Result<(), NoProc> {
    let from = process::self_pid().ok_or(NoProc(target))?;
    let rt = process::current_runtime().ok_or(NoProc(target))?;
    rt.exit(from, target, reason)
}

/// Links the calling process with `peer` (see [`Runtime::link`]). Linking
/// to a dead or stale pid is `Err(NoProc)`, as Erlang's `noproc`.
pub fn link(peer: Pid) -> Result<(), NoProc> {
    let me = process::self_pid().ok_or(NoProc(peer))?;
    let rt = process::current_runtime().ok_or(NoProc(peer))?;
    rt.link(me, peer)
}

/// Removes the calling process's link with `peer`, if any: a death after
/// this sends no signal either way.
pub fn unlink(peer: Pid) {
    if let (Some(me), Some(rt)) = (process::self_pid(), process::current_runtime()) {
        rt.unlink(me, peer);
    }
}

/// Makes the calling process trap exits: from now on an abnormal death of
/// a linked process arrives as an [`ExitSignal`] on the returned receiver
/// instead of stopping it. Calling it again replaces the receiver. `None`
/// outside a process.
pub fn trap_exit() -> Option<Receiver<ExitSignal>> {
    let me = process::self_pid()?;
    process::current_runtime()?.trap_exit(me).ok()
}
