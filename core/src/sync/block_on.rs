//! Running a future to its end from blocking code: [`block_on`].
//!
//! Inside a process, `block_on` polls the future and parks the process
//! between polls; the future's [`Waker`] wakes the
//! process from any thread (a socket's readiness, a timer, another
//! runtime's thread). Outside a process it sleeps the calling thread the
//! same way. Either way it is the same wait every blocking call of smarm
//! goes through, so a process stopped while it waits in `block_on`
//! unwinds from the wait and drops the future as it goes.
//!
//! Protocol. One `Notify` per call, shared by every clone of the
//! future's waker: a `notified` flag and a slot holding the wait the
//! caller is in now. A wake sets the flag, then wakes whatever wait the
//! slot holds. The caller clears the flag before each poll; after a
//! `Pending` it opens a wait, stores it in the slot and only then looks at
//! the flag — set means a wake came during or after the poll, so it polls
//! again instead of parking. The slot's lock orders the two sides: a wake
//! that reads the slot before the new wait is stored set its flag before
//! the caller's look. Waits are epoch-stamped, so a wake that reaches a
//! wait already over fails harmlessly, and a future that keeps the waker
//! of an earlier poll (as `will_wake` allows) still reaches the current
//! wait through the shared slot.

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::task::Wake;
use core::fmt;
use core::future::Future;
use core::pin::{pin, Pin};
use core::task::{Context, Poll, Waker};

use crate::kernel::atomic::{AtomicBool, Ordering};
use crate::kernel::deadlock::{WaitKind, WaitSite};
use crate::kernel::spin::RuntimeMutex;
use crate::kernel::wait::{self, Wait, Waiter};

/// Runs `future` to completion and returns its output.
///
/// Inside a process the process parks while the future is pending, and
/// its worker runs other processes; a wake from any thread makes it poll
/// again. On a plain thread (`main`, a thread of your own) the thread
/// sleeps. Waiting in `block_on` is an observation point for
/// `request_stop`: a stopped process drops the future as it unwinds.
///
/// Where no wait can be opened — on a worker's driver outside any
/// process (a handler actor's `handle`, where sleeping would stall every
/// process of the worker), and on a host that cannot block threads — it
/// never sleeps: it polls the future once, returns the output if that
/// poll finished it, and otherwise hands the future back.
///
/// # Errors
///
/// [`CannotBlock`], holding the pinned future after its one poll, where
/// no wait can be opened and the future was not ready. Spawn a process to
/// wait on it, or poll it yourself.
///
/// # Examples
///
/// ```
/// # use smarm_core as smarm;
/// let answer = smarm::block_on(async { 6 * 7 }).unwrap();
/// assert_eq!(answer, 42);
/// ```
#[track_caller]
pub fn block_on<F: Future>(future: F) -> Result<F::Output, CannotBlock<F>> {
    if !wait::can_wait() {
        return poll_once(future);
    }
    let notify = Arc::new(Notify { notified: AtomicBool::new(false), waiter: RuntimeMutex::leaf(None) });
    let site = WaitSite::here(WaitKind::Future);
    Ok(drive(pin!(future), &notify, || Wait::begin_at(site).ok()))
}

/// Polls `future` until it is ready, parking in a wait from `begin`
/// between polls (see the module's protocol).
fn drive<F: Future>(
    mut future: Pin<&mut F>,
    notify: &Arc<Notify>,
    mut begin: impl FnMut() -> Option<Wait>,
) -> F::Output {
    let waker = Waker::from(notify.clone());
    let mut cx = Context::from_waker(&waker);
    // The slot is emptied however the call ends (an unwind included), so a
    // waker the future kept does not pin a finished wait's runtime.
    let _clear = ClearOnExit(notify);
    loop {
        // SeqCst pairs with the wake's swap: a wake after this clear is
        // seen below, one before it is covered by this poll.
        notify.notified.store(false, Ordering::SeqCst);
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        // `can_wait` held at the start and the caller has not moved;
        // should `begin` ever fail, polling again loses nothing.
        let Some(wait) = begin() else { continue };
        *notify.waiter.lock() = Some(wait.waiter());
        if notify.notified.load(Ordering::SeqCst) {
            wait.retire();
        } else {
            wait.park();
        }
    }
}

/// `block_on` where no wait can be opened: one poll, with a waker that
/// goes nowhere (whoever polls the returned future next registers its own).
#[cold]
fn poll_once<F: Future>(future: F) -> Result<F::Output, CannotBlock<F>> {
    let mut future = Box::pin(future);
    match future.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(output) => Ok(output),
        Poll::Pending => Err(CannotBlock(future)),
    }
}

/// What every clone of a `block_on` future's waker shares.
struct Notify {
    /// A wake came since the caller last cleared it (before a poll).
    notified: AtomicBool,
    /// The wait the caller is in, or was in last.
    waiter: RuntimeMutex<Option<Waiter>>,
}

impl Wake for Notify {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Already set: an earlier wake is on its way (it reads the slot
        // after setting the flag) or the caller has yet to look.
        if self.notified.swap(true, Ordering::SeqCst) {
            return;
        }
        let waiter = self.waiter.lock().clone();
        if let Some(waiter) = waiter {
            // Woken outside the lock: a wake may run host code.
            waiter.wake();
        }
    }
}

struct ClearOnExit<'a>(&'a Notify);

impl Drop for ClearOnExit<'_> {
    fn drop(&mut self) {
        let stale = self.0.waiter.lock().take();
        drop(stale);
    }
}

/// [`block_on`] was called where no wait can be opened (a handler actor's
/// `handle`, a host that cannot block threads) and one poll did not
/// finish the future. Holds the future, pinned, after that poll; take it
/// back with [`into_inner`](Self::into_inner).
pub struct CannotBlock<F>(Pin<Box<F>>);

impl<F> CannotBlock<F> {
    /// The future, polled once.
    pub fn into_inner(self) -> Pin<Box<F>> {
        self.0
    }
}

impl<F> fmt::Debug for CannotBlock<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CannotBlock(..)")
    }
}

impl<F> fmt::Display for CannotBlock<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "block_on where no wait can be opened (a handler actor, or a host that cannot block threads) \
             and the future was not ready: spawn a process to wait on it",
        )
    }
}

impl<F> core::error::Error for CannotBlock<F> {}

#[cfg(all(test, loom))]
mod loom_models;
