//! Per-runtime extension slots: typed values that the layers above the
//! kernel attach to a runtime (the registry's name table, the link table)
//! without the kernel knowing their types.
//!
//! One value per type per runtime, created on first use and dropped with
//! the runtime. Lookup is a short scan under a leaf lock; callers that use
//! a slot on a hot path keep the returned `Arc`.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::any::{Any, TypeId};
use core::fmt;

use crate::kernel::spin::RuntimeMutex;

/// The extension slots of one runtime.
pub(crate) struct Extensions {
    slots: RuntimeMutex<Vec<(TypeId, Arc<dyn Any + Send + Sync>)>>,
}

impl Default for Extensions {
    fn default() -> Self {
        Extensions { slots: RuntimeMutex::leaf(Vec::new()) }
    }
}

impl fmt::Debug for Extensions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Extensions").field("slots", &self.slots.lock().len()).finish()
    }
}

impl Extensions {
    /// The runtime's `T`, made by `init` the first time it is asked for.
    /// `init` runs under the slot lock: it must not take another runtime
    /// lock (building a value is all it should do).
    pub(crate) fn get_or_init<T: Any + Send + Sync>(&self, init: impl FnOnce() -> T) -> Arc<T> {
        let mut slots = self.slots.lock();
        let wanted = TypeId::of::<T>();
        let slot = match slots.iter().find(|(id, _)| *id == wanted) {
            Some((_, value)) => value.clone(),
            None => {
                let value: Arc<dyn Any + Send + Sync> = Arc::new(init());
                slots.push((wanted, value.clone()));
                value
            }
        };
        drop(slots);
        match slot.downcast::<T>() {
            Ok(value) => value,
            // The slot is keyed by T's TypeId: it holds a T.
            Err(_) => unreachable!("extension slot keyed by a TypeId holds another type"),
        }
    }
}
