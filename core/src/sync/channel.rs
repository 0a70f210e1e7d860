//! Channels between processes: many senders, one receiver.
//!
//! `send` never blocks on an unbounded channel and hands the message back
//! when the receiver is gone; a bounded channel ([`bounded`]) parks the
//! sending process while it is full. The receiver parks the process, not
//! the thread.
//!
//! Protocol: the channel lock is a runtime lock of class `Channel`: nothing
//! is locked under it and nothing user-visible runs under it except
//! `recv_match`'s predicate (documented). A parked receiver leaves one
//! registration, `(pid, epoch)` in a [`Waker`]; a sender takes it under the
//! lock and wakes it after releasing the lock. Registrations outlive their
//! wait harmlessly: a wake stamped with a consumed epoch is one failed CAS.
//! Messages dropped by the channel (the receiver went away) are dropped
//! after the lock is released, since a message may own a `Sender` whose
//! drop takes another channel's lock.

use alloc::collections::VecDeque;
use alloc::sync::Arc;
use core::fmt;
use core::time::Duration;

use crate::kernel::atomic::{AtomicUsize, Ordering};
use crate::kernel::process::{self, Waker};
use crate::kernel::spin::RuntimeMutex;
use crate::kernel::time::Instant;

struct Inner<T> {
    queue: VecDeque<T>,
    /// The receiver's registration while it waits (recv or select).
    receiver: Option<Waker>,
    /// Senders parked on a full bounded channel, in arrival order.
    blocked_senders: VecDeque<Waker>,
    receiver_alive: bool,
}

struct Chan<T> {
    inner: RuntimeMutex<Inner<T>>,
    senders: AtomicUsize,
    /// `None` = unbounded.
    capacity: Option<usize>,
}

impl<T> Chan<T> {
    fn disconnected(inner: &Inner<T>, senders: usize) -> bool {
        inner.queue.is_empty() && senders == 0
    }
}

/// The sending half; clone it for more senders.
pub struct Sender<T> {
    chan: Arc<Chan<T>>,
}

/// The receiving half; there is exactly one.
pub struct Receiver<T> {
    chan: Arc<Chan<T>>,
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender").finish_non_exhaustive()
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver").finish_non_exhaustive()
    }
}

fn new_chan<T>(capacity: Option<usize>) -> (Sender<T>, Receiver<T>) {
    let chan = Arc::new(Chan {
        inner: RuntimeMutex::channel(Inner {
            queue: VecDeque::new(),
            receiver: None,
            blocked_senders: VecDeque::new(),
            receiver_alive: true,
        }),
        senders: AtomicUsize::new(1),
        capacity,
    });
    (Sender { chan: chan.clone() }, Receiver { chan })
}

/// An unbounded channel.
pub fn channel<T: Send>() -> (Sender<T>, Receiver<T>) {
    new_chan(None)
}

/// A bounded channel holding at most `capacity` messages (at least 1):
/// `send` parks the sending process while it is full.
pub fn bounded<T: Send>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    new_chan(Some(capacity.max(1)))
}

/// The receiver is gone; the message comes back.
#[derive(PartialEq, Eq, Clone, Copy)]
pub struct SendError<T>(pub T);

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError(..)")
    }
}
impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sending on a channel whose receiver is gone (the message is returned)")
    }
}
impl<T> core::error::Error for SendError<T> {}

/// Why a `try_send` did not send; the message comes back either way.
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum TrySendError<T> {
    /// A bounded channel is full.
    Full(T),
    /// The receiver is gone.
    Disconnected(T),
}

impl<T> TrySendError<T> {
    /// The message that was not sent.
    pub fn into_inner(self) -> T {
        match self {
            TrySendError::Full(v) | TrySendError::Disconnected(v) => v,
        }
    }
}
impl<T> fmt::Debug for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("Full(..)"),
            TrySendError::Disconnected(_) => f.write_str("Disconnected(..)"),
        }
    }
}
impl<T> fmt::Display for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("the channel is full (the message is returned)"),
            TrySendError::Disconnected(_) => {
                f.write_str("sending on a channel whose receiver is gone (the message is returned)")
            }
        }
    }
}
impl<T> core::error::Error for TrySendError<T> {}

/// Why `recv` returned no message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvError {
    /// Every sender is gone and the channel is empty.
    Disconnected,
    /// Called outside a process, where it cannot park: use `try_recv`.
    NotInProcess,
}
impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvError::Disconnected => {
                f.write_str("receiving on an empty channel whose senders are all gone")
            }
            RecvError::NotInProcess => f.write_str("recv called outside a process: use try_recv"),
        }
    }
}
impl core::error::Error for RecvError {}

/// Why `try_recv` returned no message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TryRecvError {
    /// Nothing there now.
    Empty,
    /// Every sender is gone and the channel is empty.
    Disconnected,
}
impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryRecvError::Empty => f.write_str("the channel is empty"),
            TryRecvError::Disconnected => f.write_str("the channel is empty and its senders are all gone"),
        }
    }
}
impl core::error::Error for TryRecvError {}

/// Why `recv_timeout` returned no message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvTimeoutError {
    /// The deadline passed first.
    Timeout,
    /// Every sender is gone and the channel is empty.
    Disconnected,
    /// Called outside a process, where it cannot park.
    NotInProcess,
}
impl fmt::Display for RecvTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvTimeoutError::Timeout => f.write_str("timed out waiting on a channel"),
            RecvTimeoutError::Disconnected => {
                f.write_str("receiving on an empty channel whose senders are all gone")
            }
            RecvTimeoutError::NotInProcess => f.write_str("recv_timeout called outside a process"),
        }
    }
}
impl core::error::Error for RecvTimeoutError {}

impl<T: Send> Sender<T> {
    /// Sends `value`. Unbounded: never blocks. Bounded: parks the sending
    /// process while the channel is full (outside a process it spins).
    /// `Err` hands the message back when the receiver is gone.
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        let mut value = value;
        loop {
            match self.try_send(value) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Disconnected(v)) => return Err(SendError(v)),
                Err(TrySendError::Full(v)) => value = v,
            }
            // Full: register as a blocked sender and park until the
            // receiver makes room.
            let Ok(waker) = process::begin_wait() else {
                smarm_arch_spin();
                continue;
            };
            let mut inner = self.chan.inner.lock();
            let full = self.chan.capacity.is_some_and(|cap| inner.queue.len() >= cap);
            if !full || !inner.receiver_alive {
                drop(inner);
                process::retire_wait();
                continue;
            }
            inner.blocked_senders.push_back(waker);
            drop(inner);
            process::park();
        }
    }

    /// Sends without waiting; `Full` only on a bounded channel.
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        let mut inner = self.chan.inner.lock();
        if !inner.receiver_alive {
            return Err(TrySendError::Disconnected(value));
        }
        if self.chan.capacity.is_some_and(|cap| inner.queue.len() >= cap) {
            return Err(TrySendError::Full(value));
        }
        inner.queue.push_back(value);
        let waiter = inner.receiver.take();
        drop(inner);
        if let Some(waker) = waiter {
            waker.wake();
        }
        Ok(())
    }

    /// Whether the receiver is gone.
    pub fn is_closed(&self) -> bool {
        !self.chan.inner.lock().receiver_alive
    }
}

fn smarm_arch_spin() {
    use smarm_arch::Arch;
    smarm_arch::Native::spin_hint();
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.chan.senders.fetch_add(1, Ordering::Relaxed);
        Sender { chan: self.chan.clone() }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        // AcqRel: the last sender's decrement is seen by the receiver's
        // disconnect check, which reads the count under the lock.
        if self.chan.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            let waiter = self.chan.inner.lock().receiver.take();
            if let Some(waker) = waiter {
                waker.wake();
            }
        }
    }
}

impl<T: Send> Receiver<T> {
    /// Takes a message without waiting.
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        let mut inner = self.chan.inner.lock();
        match inner.queue.pop_front() {
            Some(v) => {
                let unblocked = self.take_blocked_sender(&mut inner);
                drop(inner);
                wake_first(unblocked);
                Ok(v)
            }
            None if self.chan.senders.load(Ordering::Acquire) == 0 => Err(TryRecvError::Disconnected),
            None => Err(TryRecvError::Empty),
        }
    }

    /// Blocked senders of a bounded channel, to wake now that there is
    /// room: all of them (they race for the room; the losers re-park).
    fn take_blocked_sender(&self, inner: &mut Inner<T>) -> VecDeque<Waker> {
        if inner.blocked_senders.is_empty() {
            VecDeque::new()
        } else {
            core::mem::take(&mut inner.blocked_senders)
        }
    }

    /// Parks the calling process until a message arrives; `Disconnected`
    /// once the channel is empty and every sender is gone.
    pub fn recv(&self) -> Result<T, RecvError> {
        self.recv_deadline(None).map_err(|e| match e {
            RecvTimeoutError::Disconnected | RecvTimeoutError::Timeout => RecvError::Disconnected,
            RecvTimeoutError::NotInProcess => RecvError::NotInProcess,
        })
    }

    /// [`recv`](Self::recv) with a deadline `timeout` from now. A message
    /// that arrives together with the deadline wins (message first).
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        let now = process::now().ok_or(RecvTimeoutError::NotInProcess)?;
        self.recv_deadline(Some(now + timeout))
    }

    fn recv_deadline(&self, deadline: Option<Instant>) -> Result<T, RecvTimeoutError> {
        self.recv_matching(deadline, |_| true)
    }

    /// Takes the first queued message (front to back) for which `pred`
    /// holds, parking and re-scanning as messages arrive. Others stay queued
    /// in order.
    ///
    /// `pred` runs under the channel lock: keep it cheap and pure, and
    /// never touch a channel from it.
    pub fn recv_match(&self, pred: impl Fn(&T) -> bool) -> Result<T, RecvError> {
        self.recv_matching(None, pred).map_err(|e| match e {
            RecvTimeoutError::Disconnected | RecvTimeoutError::Timeout => RecvError::Disconnected,
            RecvTimeoutError::NotInProcess => RecvError::NotInProcess,
        })
    }

    /// [`recv_match`](Self::recv_match) without waiting.
    pub fn try_recv_match(&self, pred: impl Fn(&T) -> bool) -> Result<T, TryRecvError> {
        let mut inner = self.chan.inner.lock();
        if let Some(i) = inner.queue.iter().position(&pred) {
            let v = inner.queue.remove(i).expect("position is in range");
            let unblocked = self.take_blocked_sender(&mut inner);
            drop(inner);
            wake_first(unblocked);
            return Ok(v);
        }
        if self.chan.senders.load(Ordering::Acquire) == 0 {
            Err(TryRecvError::Disconnected)
        } else {
            Err(TryRecvError::Empty)
        }
    }

    fn recv_matching(
        &self,
        deadline: Option<Instant>,
        pred: impl Fn(&T) -> bool,
    ) -> Result<T, RecvTimeoutError> {
        // Fast path: no wait is opened when a message is already there.
        match self.try_recv_match(&pred) {
            Ok(v) => return Ok(v),
            Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
            Err(TryRecvError::Empty) => {}
        }
        loop {
            let waker = process::begin_wait().map_err(|_| RecvTimeoutError::NotInProcess)?;
            if let Some(deadline) = deadline {
                if process::now().is_some_and(|now| now >= deadline) {
                    process::retire_wait();
                    // Message first: one last look before reporting the timeout.
                    return match self.try_recv_match(&pred) {
                        Ok(v) => Ok(v),
                        Err(TryRecvError::Disconnected) => Err(RecvTimeoutError::Disconnected),
                        Err(TryRecvError::Empty) => Err(RecvTimeoutError::Timeout),
                    };
                }
                // Stamped with this wait's epoch: if a message wins, the
                // timer fires later as a stale no-op.
                let _ = process::wake_at(&waker, deadline);
            }
            {
                let mut inner = self.chan.inner.lock();
                if let Some(i) = inner.queue.iter().position(&pred) {
                    let v = inner.queue.remove(i).expect("position is in range");
                    let unblocked = self.take_blocked_sender(&mut inner);
                    drop(inner);
                    // Wake the blocked senders before retire_wait, which
                    // raises a stop requested since begin_wait: unwinding
                    // past them would leave them parked for good.
                    wake_first(unblocked);
                    process::retire_wait();
                    return Ok(v);
                }
                if self.chan.senders.load(Ordering::Acquire) == 0 {
                    drop(inner);
                    process::retire_wait();
                    return Err(RecvTimeoutError::Disconnected);
                }
                debug_assert!(
                    inner.receiver.as_ref().is_none_or(|w| Some(w.pid()) == process::self_pid()),
                    "two processes receive on one channel"
                );
                inner.receiver = Some(waker);
            }
            // Woken by a sender (a message, or the last sender's drop) or by
            // the timer. The wake consumed the wait, so look without opening
            // a new one; only if nothing is there does the loop wait again.
            process::park();
            match self.try_recv_match(&pred) {
                Ok(v) => return Ok(v),
                Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
                Err(TryRecvError::Empty) => {}
            }
        }
    }

    /// Whether every sender is gone (messages may still be queued).
    pub fn senders_gone(&self) -> bool {
        self.chan.senders.load(Ordering::Acquire) == 0
    }

    /// Messages queued now.
    pub fn len(&self) -> usize {
        self.chan.inner.lock().queue.len()
    }

    /// Whether no message is queued now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Wakes blocked senders after the lock is released.
fn wake_first(wakers: VecDeque<Waker>) {
    for waker in wakers {
        waker.wake();
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let (queue, blocked) = {
            let mut inner = self.chan.inner.lock();
            inner.receiver_alive = false;
            inner.receiver = None;
            (core::mem::take(&mut inner.queue), core::mem::take(&mut inner.blocked_senders))
        };
        // Outside the lock: messages may own senders of other channels.
        drop(queue);
        for waker in blocked {
            waker.wake();
        }
    }
}

/// One arm of a [`select`](crate::sync::select::select): something a process can
/// wait on alongside others.
pub trait Selectable {
    /// Whether a `try_recv` would return at once (a message, or the
    /// closure of the channel).
    fn is_ready(&self) -> bool;
    /// Registers `waker` to be woken when the arm becomes ready; returns
    /// `true` instead, registering nothing, if it already is.
    fn register(&self, waker: &Waker) -> bool;
}

impl<T: Send> Selectable for Receiver<T> {
    fn is_ready(&self) -> bool {
        let inner = self.chan.inner.lock();
        !inner.queue.is_empty() || Chan::disconnected(&inner, self.chan.senders.load(Ordering::Acquire))
    }

    fn register(&self, waker: &Waker) -> bool {
        let mut inner = self.chan.inner.lock();
        if !inner.queue.is_empty() || self.chan.senders.load(Ordering::Acquire) == 0 {
            return true;
        }
        inner.receiver = Some(waker.clone());
        false
    }
}
