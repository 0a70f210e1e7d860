//! Actor-local storage: values that belong to a process and travel with it.
//!
//! A process may resume on another OS thread than the one it was suspended
//! on, so a `thread_local!` is the wrong home for per-process state — and a
//! `thread_local!` borrow must never be held across a switch point (a
//! yield, a park, `check()`, or an allocation under a preempting
//! allocator). An [`ActorLocal`] keeps its value in the process's slot
//! instead (the slot body's `locals`, keyed by the address of the static),
//! so the value is wherever the process is.
//!
//! Access is closure-based ([`ActorLocal::with`], [`ActorLocal::with_mut`]):
//! no reference escapes the closure. The closure itself may switch — the
//! value lives in a box owned by the slot, which nothing but the process
//! touches until the slot is reclaimed after the process has exited.
//! Values are dropped when the slot is reclaimed, on whichever thread does
//! that, after the process's own destructors have run.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::any::Any;
use core::cell::RefCell;
use core::fmt;

use crate::kernel::error::NotInProcess;
use crate::kernel::preempt::NoPreempt;

/// The running process's table of locals.
type Locals = Vec<(usize, Box<dyn Any + Send>)>;

/// The locals of the process running on this thread.
fn running_locals() -> Option<*mut Locals> {
    crate::kernel::process::running_locals()
}

/// A per-process value of type `T`, declared as a `static` (usually with
/// the hosted crate's `local!` macro). Each process sees its own value,
/// created by `init` on first access.
///
/// Access checks borrows dynamically like a `RefCell`: a `with_mut` inside
/// a `with` of the same key panics.
pub struct ActorLocal<T: 'static> {
    init: fn() -> T,
}

impl<T: 'static> fmt::Debug for ActorLocal<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActorLocal").finish_non_exhaustive()
    }
}

impl<T: Send + 'static> ActorLocal<T> {
    /// A key whose value starts as `init()` in each process.
    pub const fn new(init: fn() -> T) -> ActorLocal<T> {
        ActorLocal { init }
    }

    /// The key: the address of the static. Distinct statics of a non-zero
    /// size have distinct addresses, and `Self` holds a fn pointer.
    fn key(&'static self) -> usize {
        self as *const Self as usize
    }

    fn find(&'static self, locals: *mut Locals) -> Option<*const RefCell<T>> {
        let key = self.key();
        // SAFETY: `locals` is the running process's table; the shared
        // borrow ends before this function returns.
        let table = unsafe { &*locals };
        let (_, value) = table.iter().find(|(k, _)| *k == key)?;
        let cell = value.downcast_ref::<RefCell<T>>();
        debug_assert!(cell.is_some(), "ActorLocal key holds a value of another type");
        cell.map(|cell| cell as *const RefCell<T>)
    }

    /// Inserts `value` for this key (which must be absent).
    fn insert(&'static self, value: T) -> Result<*const RefCell<T>, NotInProcess> {
        let boxed: Box<RefCell<T>> = Box::new(RefCell::new(value));
        let cell: *const RefCell<T> = &*boxed;
        // The push may grow the table: not preempted in the middle of it.
        let _no_preempt = NoPreempt::new();
        let locals = running_locals().ok_or(NotInProcess)?;
        // SAFETY: the running process's table; the exclusive borrow ends
        // with the push. The box's contents do not move when the table does.
        unsafe { (*locals).push((self.key(), boxed)) };
        Ok(cell)
    }

    /// This process's cell, created with `init` if absent.
    fn cell(&'static self) -> Result<*const RefCell<T>, NotInProcess> {
        let locals = running_locals().ok_or(NotInProcess)?;
        let cell = match self.find(locals) {
            Some(cell) => cell,
            None => {
                // `init` runs with no borrow of the table held: it may use
                // other locals, allocate, even switch.
                let value = (self.init)();
                match self.find(running_locals().ok_or(NotInProcess)?) {
                    // `init` initialised this very key (recursively): keep
                    // the first value.
                    Some(cell) => cell,
                    None => self.insert(value)?,
                }
            }
        };
        Ok(cell)
    }

    /// Calls `f` with this process's value. `Err(NotInProcess)` outside a
    /// process.
    pub fn try_with<R>(&'static self, f: impl FnOnce(&T) -> R) -> Result<R, NotInProcess> {
        // SAFETY: the box behind the cell is owned by the running process's
        // slot and freed only when the slot is reclaimed, after the process
        // has exited; the reference lives only for this call, inside the
        // process.
        let cell = unsafe { &*self.cell()? };
        let value = cell.borrow();
        Ok(f(&value))
    }

    /// Calls `f` with this process's value, mutably. `Err(NotInProcess)`
    /// outside a process.
    pub fn try_with_mut<R>(&'static self, f: impl FnOnce(&mut T) -> R) -> Result<R, NotInProcess> {
        // SAFETY: as in `try_with`.
        let cell = unsafe { &*self.cell()? };
        let mut value = cell.borrow_mut();
        Ok(f(&mut value))
    }

    /// Calls `f` with this process's value.
    ///
    /// # Panics
    ///
    /// Outside a process (use [`ActorLocal::try_with`] to get an error
    /// instead), or if the value is mutably borrowed by an enclosing
    /// `with_mut`.
    pub fn with<R>(&'static self, f: impl FnOnce(&T) -> R) -> R {
        match self.try_with(f) {
            Ok(result) => result,
            Err(error) => panic!("ActorLocal::with: {error}"),
        }
    }

    /// Calls `f` with this process's value, mutably.
    ///
    /// # Panics
    ///
    /// Outside a process (use [`ActorLocal::try_with_mut`]), or if the
    /// value is borrowed by an enclosing `with` or `with_mut`.
    pub fn with_mut<R>(&'static self, f: impl FnOnce(&mut T) -> R) -> R {
        match self.try_with_mut(f) {
            Ok(result) => result,
            Err(error) => panic!("ActorLocal::with_mut: {error}"),
        }
    }

    /// Sets this process's value (without running `init` first).
    pub fn set(&'static self, value: T) -> Result<(), NotInProcess> {
        self.replace(value).map(drop)
    }

    /// Sets this process's value and returns the previous one (`init()` if
    /// there was none).
    pub fn replace(&'static self, value: T) -> Result<T, NotInProcess> {
        let locals = running_locals().ok_or(NotInProcess)?;
        match self.find(locals) {
            // SAFETY: as in `try_with`.
            Some(cell) => Ok(unsafe { &*cell }.replace(value)),
            None => {
                self.insert(value)?;
                Ok((self.init)())
            }
        }
    }

    /// A clone of this process's value.
    pub fn get(&'static self) -> Result<T, NotInProcess>
    where
        T: Clone,
    {
        self.try_with(T::clone)
    }

    /// Takes this process's value, leaving `T::default()`.
    pub fn take(&'static self) -> Result<T, NotInProcess>
    where
        T: Default,
    {
        self.try_with_mut(core::mem::take)
    }
}
