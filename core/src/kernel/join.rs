//! [`JoinHandle`]: the right to a process's outcome.
//!
//! A handle keeps its slot from being reclaimed: the outcome stays readable
//! until the handle is joined or dropped, whichever comes after the
//! process's finalize.

use alloc::sync::Arc;

use crate::kernel::error::JoinError;
use crate::kernel::host::Outcome;
use crate::kernel::pid::Pid;
use crate::kernel::process;
use crate::kernel::runtime::Shared;

/// Owns the right to a process's outcome. Dropping it detaches the
/// process; the slot is reclaimed once the process is finalized and no
/// handle remains.
#[derive(Debug)]
pub struct JoinHandle {
    pid: Pid,
    shared: Arc<Shared>,
}

impl JoinHandle {
    /// The handle of a process just spawned into `shared`.
    pub(crate) fn new(pid: Pid, shared: Arc<Shared>) -> JoinHandle {
        JoinHandle { pid, shared }
    }

    /// The process's pid.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Whether the process has ended (its outcome is known and its death
    /// notifications are delivered).
    pub fn is_finished(&self) -> bool {
        let slot = &self.shared.slot_of(self.pid);
        let finished = slot.cold.lock().notified;
        finished
    }

    /// The outcome without waiting: `None` while the process runs (or
    /// until its death notifications are delivered).
    pub fn try_join(&self) -> Option<Result<(), JoinError>> {
        let slot = &self.shared.slot_of(self.pid);
        let cold = slot.cold.lock();
        cold.outcome.as_ref().filter(|_| cold.notified).map(outcome_to_result)
    }

    /// Parks the calling process until this one ends and its death
    /// notifications (monitor Downs, link signals) are delivered. `Ok(())`
    /// for a normal exit and for a stopped process; `Err(Panicked(message))`
    /// for a panic. Outside a process: `Err(NotInProcess)` unless already
    /// finished.
    pub fn join(self) -> Result<(), JoinError> {
        let slot = &self.shared.slot_of(self.pid);
        loop {
            let wait = process::begin_wait().ok();
            {
                let mut cold = slot.cold.lock();
                if let Some(outcome) = cold.outcome.as_ref().filter(|_| cold.notified) {
                    let result = outcome_to_result(outcome);
                    drop(cold);
                    if wait.is_some() {
                        process::retire_wait();
                    }
                    return result;
                }
                match wait {
                    Some(wait) => cold.joiners.push((wait.pid(), wait.epoch())),
                    None => return Err(JoinError::NotInProcess),
                }
            }
            process::park();
        }
    }
}

fn outcome_to_result(outcome: &Outcome) -> Result<(), JoinError> {
    match outcome {
        Outcome::Normal | Outcome::Stopped => Ok(()),
        Outcome::Panicked(message) => Err(JoinError::Panicked(message.clone())),
    }
}

impl Drop for JoinHandle {
    fn drop(&mut self) {
        let slot = &self.shared.slot_of(self.pid);
        let reclaim = {
            let mut cold = slot.cold.lock();
            cold.handle = false;
            cold.finalized
        };
        if reclaim {
            self.shared.reclaim(self.pid.index(), self.pid.generation());
        }
    }
}
