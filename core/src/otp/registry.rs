//! Named processes: a bimap from names to pids under one leaf lock — one
//! name per pid and one pid per name. The table is a per-runtime extension
//! slot.
//!
//! Liveness rides the generation-checked state word (pids are never
//! reused), so cleanup is lazy: a binding whose process has died behaves as
//! absent and is pruned the next time it is touched. `NameTaken` is only
//! ever reported against a live holder.

#![deny(unsafe_code)]

use alloc::collections::BTreeMap;
use alloc::string::{String, ToString};
use core::fmt;

use crate::kernel::pid::Pid;
use alloc::sync::Arc;

use crate::kernel::runtime::{Runtime, Shared};
use crate::kernel::spin::RuntimeMutex;

/// The two maps, kept exact inverses of each other.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    by_name: BTreeMap<String, Pid>,
    by_pid: BTreeMap<Pid, String>,
}

impl Registry {
    fn remove_name(&mut self, name: &str) -> Option<Pid> {
        let pid = self.by_name.remove(name)?;
        let removed = self.by_pid.remove(&pid);
        debug_assert_eq!(removed.as_deref(), Some(name), "registry maps out of step");
        Some(pid)
    }

    fn check(&self) {
        debug_assert_eq!(self.by_name.len(), self.by_pid.len(), "registry maps out of step");
    }
}

/// Why `register` refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegisterError {
    /// A live process already holds the name.
    NameTaken {
        /// The holder.
        holder: Pid,
    },
    /// The process already has another name (one name per pid).
    AlreadyNamed {
        /// Its current name.
        name: String,
    },
    /// The process is dead (or the pid is stale).
    NoProc(Pid),
    /// Called outside a process, with no runtime to register in.
    NotInProcess,
}

impl fmt::Display for RegisterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegisterError::NameTaken { holder } => write!(f, "name already held by live process {holder}"),
            RegisterError::AlreadyNamed { name } => {
                write!(f, "process already registered as {name:?}: unregister it first")
            }
            RegisterError::NoProc(pid) => write!(f, "cannot register dead process {pid}"),
            RegisterError::NotInProcess => f.write_str("register called outside a process"),
        }
    }
}
impl core::error::Error for RegisterError {}

impl Shared {
    /// The runtime's name table.
    fn registry(&self) -> Arc<RuntimeMutex<Registry>> {
        self.extension(|| RuntimeMutex::leaf(Registry::default()))
    }

    fn register(&self, name: &str, pid: Pid) -> Result<(), RegisterError> {
        if !self.is_alive(pid) {
            return Err(RegisterError::NoProc(pid));
        }
        let registry = self.registry();
        let mut reg = registry.lock();
        if let Some(&holder) = reg.by_name.get(name) {
            if holder == pid {
                return Ok(());
            }
            if self.is_alive(holder) {
                return Err(RegisterError::NameTaken { holder });
            }
            reg.remove_name(name);
        }
        if let Some(existing) = reg.by_pid.get(&pid) {
            return Err(RegisterError::AlreadyNamed { name: existing.clone() });
        }
        reg.by_name.insert(name.to_string(), pid);
        reg.by_pid.insert(pid, name.to_string());
        reg.check();
        Ok(())
    }

    fn whereis(&self, name: &str) -> Option<Pid> {
        let registry = self.registry();
        let mut reg = registry.lock();
        let pid = *reg.by_name.get(name)?;
        if self.is_alive(pid) {
            Some(pid)
        } else {
            reg.remove_name(name);
            None
        }
    }

    fn unregister(&self, name: &str) -> Option<Pid> {
        let pid = self.registry().lock().remove_name(name)?;
        self.is_alive(pid).then_some(pid)
    }

    fn name_of(&self, pid: Pid) -> Option<String> {
        let registry = self.registry();
        let mut reg = registry.lock();
        let name = reg.by_pid.get(&pid)?.clone();
        if self.is_alive(pid) {
            Some(name)
        } else {
            reg.remove_name(&name);
            None
        }
    }
}

impl Runtime {
    /// Binds `name` to the live process `pid`.
    pub fn register(&self, name: &str, pid: Pid) -> Result<(), RegisterError> {
        self.shared.register(name, pid)
    }
    /// The live process bound to `name`.
    pub fn whereis(&self, name: &str) -> Option<Pid> {
        self.shared.whereis(name)
    }
    /// Removes `name`'s binding; returns its holder if it was alive.
    pub fn unregister(&self, name: &str) -> Option<Pid> {
        self.shared.unregister(name)
    }
    /// The name bound to the live process `pid`.
    pub fn name_of(&self, pid: Pid) -> Option<String> {
        self.shared.name_of(pid)
    }
}

/// Binds `name` to `pid` in the calling process's runtime.
pub fn register(name: &str, pid: Pid) -> Result<(), RegisterError> {
    crate::kernel::process::current_runtime().ok_or(RegisterError::NotInProcess)?.register(name, pid)
}

/// The live process bound to `name` in the calling process's runtime.
pub fn whereis(name: &str) -> Option<Pid> {
    crate::kernel::process::current_runtime()?.whereis(name)
}

/// Removes `name`'s binding in the calling process's runtime.
pub fn unregister(name: &str) -> Option<Pid> {
    crate::kernel::process::current_runtime()?.unregister(name)
}

/// The name bound to `pid` in the calling process's runtime.
pub fn name_of(pid: Pid) -> Option<String> {
    crate::kernel::process::current_runtime()?.name_of(pid)
}
