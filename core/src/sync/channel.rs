//! Channels between processes: many senders, one receiver.
//!
//! Three shapes, one [`Sender`] / [`Receiver`] pair:
//!
//! - [`channel`]: unbounded; `send` never blocks.
//! - [`bounded`]`(n)` with `n > 0`: a buffer of `n`; `send` parks the
//!   sending process while it is full.
//! - [`bounded`]`(0)`: a rendezvous; `send` parks until the receiver has
//!   taken the value, which goes from the sender to the receiver without a
//!   buffer in between.
//!
//! The receiver parks the process, not the thread. Every send, receive and
//! `try_*` call spends one unit of the process's cooperative budget
//! ([`kernel::coop`](crate::kernel::coop)), so a process sending in a loop
//! yields now and then and the receiver on its worker gets to run.
//!
//! Protocol: the channel lock is a runtime lock of class `Channel`: nothing
//! is locked under it and nothing user-visible runs under it except
//! `recv_match`'s predicate (documented). A parked receiver leaves one
//! registration (a process's `(pid, epoch)` or a thread's parker) in a
//! [`Waiter`]; a sender takes it under the
//! lock and wakes it after releasing the lock. Registrations outlive their
//! wait harmlessly: a wake stamped with a consumed epoch is one failed CAS.
//! Messages dropped by the channel (the receiver went away) are dropped
//! after the lock is released, since a message may own a `Sender` whose
//! drop takes another channel's lock.
//!
//! Unbounded channels: a receiver's look under the lock takes the whole
//! queue into the receiver's own buffer (the two `VecDeque`s trade
//! places), and the next receives come from that buffer without the
//! lock. A sender and a receiver on two CPUs then meet at the lock once
//! a batch, not once a message. Bounded channels take one message a look:
//! a queued message counts against the capacity until it is received.
//!
//! A process parked in a plain `recv` on an unbounded channel is *handed*
//! the next message: the sender that finds it registered (`receiving`)
//! leaves the value in the channel's one hand slot, outside the queue, and
//! wakes it; the receiver takes it from there when it runs, without the
//! lock. The slot is written only under the lock by the sender that
//! clears `receiving`, and only the receiver sets `receiving`, under the
//! lock, after any handed value is out of the slot — so the slot holds at
//! most one value, and it is older than everything queued behind it.
//!
//! Rendezvous: a sender leaves its value in an *offer* (with a ticket and
//! its waker) and parks; the receiver takes the value out of the offer and
//! wakes the sender, which finds its ticket gone and returns `Ok`. A sender
//! that finds its offer still there when it wakes takes the value back: the
//! receiver is gone (`Disconnected`) or the deadline passed (`Timeout`).
//! The one exception is a receiver parked in a plain `recv` (it takes the
//! first message whatever it is, and `receiving` says so): a sender then
//! leaves a *handed* offer, wakes the receiver and returns at once, since
//! the receiver takes that offer the moment it runs. At most one handed
//! offer exists at a time (handing one clears `receiving`).

use alloc::collections::VecDeque;
use alloc::sync::{Arc, Weak};
use core::cell::RefCell;
use core::fmt;
use core::time::Duration;

use crate::kernel::atomic::{AtomicBool, AtomicUsize, Ordering, UnsafeCell};
use crate::kernel::coop;
use crate::kernel::current::Here;
use crate::kernel::deadlock::{WaitKind, WaitSite};
use crate::kernel::spin::RuntimeMutex;
use crate::kernel::time::Instant;
use crate::kernel::wait::{self, Wait, Waiter};

struct Inner<T> {
    queue: VecDeque<T>,
    /// Rendezvous only: values offered by senders, in arrival order.
    offers: VecDeque<Offer<T>>,
    /// Rendezvous only: the next offer's ticket.
    next_ticket: u64,
    /// The receiver's registration while it waits (recv or select).
    receiver: Option<Waiter>,
    /// The receiver is parked in a receive that takes the first message,
    /// so a sender may hand its value over and return (a rendezvous: as a
    /// handed offer; unbounded, a process's receive: in the hand slot).
    /// Cleared by every receiver-side look at the channel and by the hand.
    receiving: bool,
    /// Senders parked on a full buffered channel, in arrival order.
    blocked_senders: VecDeque<Waiter>,
    receiver_alive: bool,
}

/// A rendezvous sender's value, waiting for the receiver.
struct Offer<T> {
    ticket: u64,
    value: T,
    /// The waiting sender, woken when the value is taken or the receiver
    /// goes; `None` for a handed offer or a sender that cannot wait (on a
    /// worker's driver outside a process: it polls).
    sender: Option<Waiter>,
    /// Handed to a receiver parked in `recv`: its sender has returned, so
    /// nobody takes the value back.
    handed: bool,
}

/// What a receive must wake once the lock is released.
enum Wakes {
    /// Nothing.
    None,
    /// The senders parked on a full buffered channel: all of them (they
    /// race for the room; the losers park again).
    Blocked(VecDeque<Waiter>),
    /// The rendezvous sender whose value was taken.
    Offerer(Waiter),
}

impl Wakes {
    /// Wakes them, from the worker record `here` the caller looked up.
    fn wake_in(self, here: Here) {
        match self {
            Wakes::None => {}
            Wakes::Blocked(wakers) => {
                for waker in wakers {
                    waker.wake_last_in(here);
                }
            }
            Wakes::Offerer(waker) => {
                waker.wake_last_in(here);
            }
        }
    }
}

impl<T> Inner<T> {
    fn has_message(&self) -> bool {
        !self.queue.is_empty() || !self.offers.is_empty()
    }

    /// Takes the first message (queue first, then offers) for which `pred`
    /// holds, with whom to wake after the lock is released.
    fn take_matching(&mut self, pred: &impl Fn(&T) -> bool) -> Option<(T, Wakes)> {
        if let Some(index) = self.queue.iter().position(pred) {
            let value = if index == 0 { self.queue.pop_front() } else { self.queue.remove(index) }?;
            let wakes = if self.blocked_senders.is_empty() {
                Wakes::None
            } else {
                Wakes::Blocked(core::mem::take(&mut self.blocked_senders))
            };
            return Some((value, wakes));
        }
        let index = self.offers.iter().position(|offer| pred(&offer.value))?;
        let offer = self.offers.remove(index)?;
        Some((offer.value, offer.sender.map_or(Wakes::None, Wakes::Offerer)))
    }

    /// Hands `value` to the receiver parked in `recv` (`receiving`); returns
    /// its registration, to wake after the lock is released.
    fn hand(&mut self, value: T) -> Option<Waiter> {
        debug_assert!(self.receiving && self.offers.is_empty(), "a hand without a receiver waiting for it");
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.offers.push_back(Offer { ticket, value, sender: None, handed: true });
        self.receiving = false;
        self.receiver.take()
    }
}

struct Chan<T> {
    inner: RuntimeMutex<Inner<T>>,
    /// Unbounded only: the value handed to the receiver parked in a plain
    /// `recv` (see the module docs). Written under the lock by the sender
    /// that cleared `receiving`; read by the receiver once `handed_ready`
    /// says it is there, or under the lock.
    handed: UnsafeCell<Option<T>>,
    /// The hand slot holds a value: set (Release) after the slot is
    /// written, cleared by the receiver that takes it.
    handed_ready: AtomicBool,
    senders: AtomicUsize,
    /// `None` = unbounded; `Some(0)` = rendezvous.
    capacity: Option<usize>,
    /// What a receiver parked on this channel waits on, for a deadlock
    /// report.
    waited_as: WaitKind,
}

// SAFETY: the fields other than `handed` are `Sync` for `T: Send`; the
// hand slot is written by one sender at a time (under the lock, only while
// `receiving` is set, which the write clears) and read by the receiver only
// after `handed_ready`'s Acquire sees that write, or under the lock: the
// value moves between threads, never shared, so `T: Send` suffices.
unsafe impl<T: Send> Sync for Chan<T> {}
// SAFETY: as above; every field moves with the channel.
unsafe impl<T: Send> Send for Chan<T> {}

impl<T> Chan<T> {
    /// Hands `value` to the receiver parked in a plain `recv`.
    ///
    /// # Safety
    ///
    /// The caller holds the lock of `inner` and has just cleared
    /// `receiving`, which was set: the receiver registered after taking
    /// any earlier handed value, so the slot is empty and nobody else
    /// reads or writes it until `handed_ready` is set.
    unsafe fn put_handed(&self, value: T) {
        // SAFETY: per the contract, the slot is ours alone now.
        self.handed.with_mut(|slot| unsafe {
            debug_assert!((*slot).is_none(), "a handed value not yet taken");
            slot.write(Some(value));
        });
        // Release: the receiver that Acquires the flag sees the value.
        self.handed_ready.store(true, Ordering::Release);
    }

    /// The value in the hand slot, if a sender left one there (no lock).
    ///
    /// # Safety
    ///
    /// The caller is the channel's receiver, and no other call of this
    /// runs at the same time.
    #[inline]
    unsafe fn take_handed(&self) -> Option<T> {
        if !self.handed_ready.load(Ordering::Acquire) {
            return None;
        }
        self.handed_ready.store(false, Ordering::Relaxed);
        // SAFETY: the Acquire above saw the flag the hand set after writing
        // the slot, and no sender writes it again before the receiver
        // registers with `receiving` once more — under the lock, after this
        // take. The one receiver is the one taker (the contract).
        self.handed.with_mut(|slot| unsafe { (*slot).take() })
    }

    fn disconnected(inner: &Inner<T>, senders: usize) -> bool {
        !inner.has_message() && senders == 0
    }

    fn is_rendezvous(&self) -> bool {
        self.capacity == Some(0)
    }
}

/// The sending half; clone it for more senders.
///
/// The same type serves every shape of channel: std's `Sender` and
/// `SyncSender` in one.
pub struct Sender<T> {
    chan: Arc<Chan<T>>,
}

/// The receiving half; there is exactly one, and one process receives on
/// it at a time.
///
/// Iterate over it with [`iter`](Receiver::iter), [`try_iter`](Receiver::try_iter)
/// or a `for` loop, which ends once every sender is gone and the channel is
/// empty:
///
/// ```
/// # use smarm_core as smarm;
/// let (tx, rx) = smarm::channel::<u32>();
/// for i in 0..3 {
///     tx.send(i).unwrap();
/// }
/// drop(tx);
/// let mut got = Vec::new();
/// for message in rx {
///     got.push(message);
/// }
/// assert_eq!(got, [0, 1, 2]);
/// ```
///
/// Like std's, a receiver may move to another thread but is not shared
/// between threads (`Send`, not `Sync`):
///
/// ```compile_fail
/// # use smarm_core as smarm;
/// fn shared<T: Sync>(_: &T) {}
/// let (_tx, rx) = smarm::channel::<u32>();
/// shared(&rx);
/// ```
pub struct Receiver<T> {
    chan: Arc<Chan<T>>,
    /// Unbounded channels only: messages the receiver has taken out of the
    /// queue and not yet returned, oldest first. A look under the lock
    /// takes the whole queue at once, so a sender and a receiver running
    /// on two CPUs meet at the lock once a batch rather than once a
    /// message. (A bounded channel leaves its messages queued: they count
    /// against its capacity until received.)
    taken: RefCell<VecDeque<T>>,
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

fn new_chan<T>(capacity: Option<usize>, waited_as: WaitKind) -> (Sender<T>, Receiver<T>) {
    let chan = Arc::new(Chan {
        inner: RuntimeMutex::channel(Inner {
            queue: VecDeque::new(),
            offers: VecDeque::new(),
            next_ticket: 0,
            receiver: None,
            receiving: false,
            blocked_senders: VecDeque::new(),
            receiver_alive: true,
        }),
        handed: UnsafeCell::new(None),
        handed_ready: AtomicBool::new(false),
        senders: AtomicUsize::new(1),
        capacity,
        waited_as,
    });
    (Sender { chan: chan.clone() }, Receiver { chan, taken: RefCell::new(VecDeque::new()) })
}

/// An unbounded channel: `send` never blocks (std's `mpsc::channel`).
///
/// ```
/// # use smarm_core as smarm;
/// let (tx, rx) = smarm::channel();
/// tx.send("hello").unwrap();
/// assert_eq!(rx.try_recv(), Ok("hello"));
/// ```
pub fn channel<T: Send>() -> (Sender<T>, Receiver<T>) {
    new_chan(None, WaitKind::ChannelRecv)
}

/// An unbounded channel whose receiver, parked, is reported as waiting on
/// `kind` (a monitor's `Down`, a call's reply) in a deadlock report.
pub(crate) fn channel_waited_as<T: Send>(kind: WaitKind) -> (Sender<T>, Receiver<T>) {
    new_chan(None, kind)
}

/// A bounded channel (std's `mpsc::sync_channel`).
///
/// With `capacity > 0` it holds at most `capacity` messages and `send`
/// parks the sending process while it is full. With `capacity == 0` it is a
/// *rendezvous*: `send` parks until the receiver takes the value (or is
/// dropped, which gives the value back), `try_send` succeeds only when the
/// receiver is parked in [`recv`](Receiver::recv) /
/// [`recv_timeout`](Receiver::recv_timeout) waiting for it, and a
/// [`select`](crate::sync::select::select) arm on the receiver is ready
/// only while a sender is waiting. That sender may still give up (its
/// `send_timeout` expires, or it is stopped, which withdraws its value)
/// before the receiver looks: the `try_recv` after a `select` then returns
/// `Empty`.
///
/// ```
/// # use smarm_core as smarm;
/// use smarm::TrySendError;
///
/// let (tx, rx) = smarm::bounded(1);
/// tx.try_send(1).unwrap();
/// assert_eq!(tx.try_send(2), Err(TrySendError::Full(2)));
/// assert_eq!(rx.try_recv(), Ok(1));
///
/// // Nobody is waiting in `recv`: a rendezvous has no room at all.
/// let (tx, rx) = smarm::bounded::<u8>(0);
/// assert_eq!(tx.try_send(3), Err(TrySendError::Full(3)));
/// # drop(rx);
/// ```
pub fn bounded<T: Send>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    new_chan(Some(capacity), WaitKind::ChannelRecv)
}

/// The receiver is gone; the message comes back.
#[derive(PartialEq, Eq, Clone, Copy)]
pub struct SendError<T>(pub T);

impl<T> SendError<T> {
    /// The message that was not sent.
    pub fn into_inner(self) -> T {
        self.0
    }
}
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
    /// A bounded channel is full (a rendezvous: no receiver is waiting in
    /// `recv`).
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
impl<T> From<SendError<T>> for TrySendError<T> {
    fn from(SendError(value): SendError<T>) -> Self {
        TrySendError::Disconnected(value)
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

/// Why a [`send_timeout`](Sender::send_timeout) or
/// [`send_deadline`](Sender::send_deadline) did not send; the message comes
/// back in every case.
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum SendTimeoutError<T> {
    /// The deadline passed while the channel was full (a rendezvous: before
    /// the receiver took the value).
    Timeout(T),
    /// The receiver is gone.
    Disconnected(T),
    /// Called on a worker's driver outside any process (a handler actor),
    /// where waiting would stall the worker, on a full channel. Use
    /// `try_send`.
    NotInProcess(T),
}

impl<T> SendTimeoutError<T> {
    /// The message that was not sent.
    pub fn into_inner(self) -> T {
        match self {
            SendTimeoutError::Timeout(v)
            | SendTimeoutError::Disconnected(v)
            | SendTimeoutError::NotInProcess(v) => v,
        }
    }
}
impl<T> From<SendError<T>> for SendTimeoutError<T> {
    fn from(SendError(value): SendError<T>) -> Self {
        SendTimeoutError::Disconnected(value)
    }
}
impl<T> fmt::Debug for SendTimeoutError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendTimeoutError::Timeout(_) => f.write_str("Timeout(..)"),
            SendTimeoutError::Disconnected(_) => f.write_str("Disconnected(..)"),
            SendTimeoutError::NotInProcess(_) => f.write_str("NotInProcess(..)"),
        }
    }
}
impl<T> fmt::Display for SendTimeoutError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendTimeoutError::Timeout(_) => {
                f.write_str("timed out waiting to send on a channel (the message is returned)")
            }
            SendTimeoutError::Disconnected(_) => {
                f.write_str("sending on a channel whose receiver is gone (the message is returned)")
            }
            SendTimeoutError::NotInProcess(_) => f.write_str(
                "send_timeout would wait, on a worker's driver outside any process: use try_send (the message is returned)",
            ),
        }
    }
}
impl<T> core::error::Error for SendTimeoutError<T> {}

/// Why `recv` returned no message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvError {
    /// Every sender is gone and the channel is empty.
    Disconnected,
    /// Called on a worker's driver outside any process (a handler actor) on
    /// an empty channel, where waiting would stall the worker: use
    /// `try_recv`.
    NotInProcess,
}
impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvError::Disconnected => {
                f.write_str("receiving on an empty channel whose senders are all gone")
            }
            RecvError::NotInProcess => {
                f.write_str("recv would wait, on a worker's driver outside any process: use try_recv")
            }
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

/// Why `recv_timeout` or `recv_deadline` returned no message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvTimeoutError {
    /// The deadline passed first.
    Timeout,
    /// Every sender is gone and the channel is empty.
    Disconnected,
    /// Called on a worker's driver outside any process (a handler actor) on
    /// an empty channel, where waiting would stall the worker.
    NotInProcess,
}
impl fmt::Display for RecvTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvTimeoutError::Timeout => f.write_str("timed out waiting on a channel"),
            RecvTimeoutError::Disconnected => {
                f.write_str("receiving on an empty channel whose senders are all gone")
            }
            RecvTimeoutError::NotInProcess => {
                f.write_str("recv_timeout would wait, on a worker's driver outside any process")
            }
        }
    }
}
impl core::error::Error for RecvTimeoutError {}

impl<T: Send> Sender<T> {
    /// Sends `value`. Unbounded: never blocks. Buffered: parks the sending
    /// process (sleeps a plain thread) while the channel is full.
    /// Rendezvous: parks until the receiver has taken the value. On a
    /// worker's driver outside any process (a handler actor) it spins
    /// instead. `Err` hands the message back when the receiver is gone (for
    /// a rendezvous, also when it goes while the sender waits).
    ///
    /// ```
    /// # use smarm_core as smarm;
    /// let (tx, rx) = smarm::channel();
    /// tx.send(7).unwrap();
    /// drop(rx);
    /// assert_eq!(tx.send(8).unwrap_err().into_inner(), 8);
    /// ```
    #[track_caller]
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        let here = Here::get();
        coop::spend_in(here);
        if self.chan.capacity.is_none() {
            // Unbounded: one try, which only the receiver's absence fails.
            return self.try_push_in(value, here).map_err(|e| SendError(e.into_inner()));
        }
        self.send_until(value, None, WaitSite::here(WaitKind::ChannelSend))
            .map_err(|e| SendError(e.into_inner()))
    }

    /// [`send`](Self::send), giving up after `timeout` on a full (or
    /// rendezvous) channel. A send that completes together with the
    /// deadline wins: room that appears, or a receiver that takes the value,
    /// before the sender runs again is used.
    ///
    /// On a worker's driver outside any process it sends if it can without
    /// waiting and returns `NotInProcess` otherwise.
    ///
    /// ```
    /// # use smarm_core as smarm;
    /// use core::time::Duration;
    ///
    /// let (tx, rx) = smarm::bounded(1);
    /// tx.send_timeout(1, Duration::from_millis(1)).unwrap();
    /// // Full: after the timeout the message comes back.
    /// let err = tx.send_timeout(2, Duration::from_millis(1)).unwrap_err();
    /// assert_eq!(err.into_inner(), 2);
    /// # drop(rx);
    /// ```
    #[track_caller]
    pub fn send_timeout(&self, value: T, timeout: Duration) -> Result<(), SendTimeoutError<T>> {
        coop::spend();
        match wait::now() {
            Some(now) => self.send_until(value, Some(now + timeout), WaitSite::here(WaitKind::ChannelSend)),
            None => self.send_outside(value),
        }
    }

    /// [`send_timeout`](Self::send_timeout) with a deadline on the
    /// runtime's clock ([`now`](crate::kernel::process::now)).
    #[track_caller]
    pub fn send_deadline(&self, value: T, deadline: Instant) -> Result<(), SendTimeoutError<T>> {
        coop::spend();
        match wait::now() {
            Some(_) => self.send_until(value, Some(deadline), WaitSite::here(WaitKind::ChannelSend)),
            None => self.send_outside(value),
        }
    }

    /// A timed send where no wait can be opened (a worker's driver outside
    /// a process): one try.
    fn send_outside(&self, value: T) -> Result<(), SendTimeoutError<T>> {
        self.try_push(value).map_err(|e| match e {
            TrySendError::Full(v) => SendTimeoutError::NotInProcess(v),
            TrySendError::Disconnected(v) => SendTimeoutError::Disconnected(v),
        })
    }

    /// Sends, waiting until `deadline` (`None`: for ever) while full.
    /// `NotInProcess` never comes out: where no wait can be opened (a
    /// worker's driver outside a process) it spins, and no deadline exists
    /// there.
    fn send_until(
        &self,
        value: T,
        deadline: Option<Instant>,
        site: WaitSite,
    ) -> Result<(), SendTimeoutError<T>> {
        if self.chan.is_rendezvous() {
            return self.send_rendezvous(value, deadline, site);
        }
        let mut value = value;
        loop {
            match self.try_push(value) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Disconnected(v)) => return Err(SendTimeoutError::Disconnected(v)),
                Err(TrySendError::Full(v)) => value = v,
            }
            // Full: register as a blocked sender and park until the
            // receiver makes room (or the deadline).
            let Ok(mut wait) = Wait::begin_at(site) else {
                smarm_arch_spin();
                continue;
            };
            if let Some(deadline) = deadline {
                if wait.expired(Some(deadline)) {
                    wait.retire();
                    // Room first: one last try before reporting the timeout.
                    return self.try_push(value).map_err(|e| match e {
                        TrySendError::Full(v) => SendTimeoutError::Timeout(v),
                        TrySendError::Disconnected(v) => SendTimeoutError::Disconnected(v),
                    });
                }
                // If room comes first, the deadline's wake is a stale no-op.
                wait.wake_at(deadline);
            }
            let mut inner = self.chan.inner.lock();
            let full = self.chan.capacity.is_some_and(|cap| inner.queue.len() >= cap);
            if !full || !inner.receiver_alive {
                drop(inner);
                wait.retire();
                continue;
            }
            inner.blocked_senders.push_back(wait.waiter());
            drop(inner);
            wait.park();
        }
    }

    /// A rendezvous send: hand the value to a receiver parked in `recv`, or
    /// offer it and park until it is taken, the receiver goes, or the
    /// deadline passes.
    fn send_rendezvous(
        &self,
        value: T,
        deadline: Option<Instant>,
        site: WaitSite,
    ) -> Result<(), SendTimeoutError<T>> {
        // The wait is opened before the lock, as the protocol asks; on a
        // worker's driver outside a process there is none and the loop
        // below polls.
        let mut wait = Wait::begin_at(site).ok();
        let retire = |wait: &mut Option<Wait>| {
            if let Some(wait) = wait.take() {
                wait.retire();
            }
        };
        let expired = deadline.is_some_and(|deadline| wait::now().is_some_and(|now| now >= deadline));
        let ticket = {
            let mut inner = self.chan.inner.lock();
            if !inner.receiver_alive {
                drop(inner);
                retire(&mut wait);
                return Err(SendTimeoutError::Disconnected(value));
            }
            if inner.receiving {
                let receiver = inner.hand(value);
                drop(inner);
                if let Some(receiver) = receiver {
                    receiver.wake();
                }
                retire(&mut wait);
                return Ok(());
            }
            if expired {
                drop(inner);
                retire(&mut wait);
                return Err(SendTimeoutError::Timeout(value));
            }
            let ticket = inner.next_ticket;
            inner.next_ticket += 1;
            inner.offers.push_back(Offer {
                ticket,
                value,
                sender: wait.as_ref().map(Wait::waiter),
                handed: false,
            });
            let receiver = inner.receiver.take();
            drop(inner);
            if let Some(receiver) = receiver {
                receiver.wake();
            }
            ticket
        };
        let mut withdraw = WithdrawOnUnwind { chan: &self.chan, ticket, armed: true };
        loop {
            match wait.take() {
                Some(mut wait) => {
                    if let Some(deadline) = deadline {
                        // If the value is taken first, the deadline's wake
                        // is a stale no-op.
                        wait.wake_at(deadline);
                    }
                    wait.park();
                }
                None => smarm_arch_spin(),
            }
            // Woken: the value was taken, the receiver went, or the
            // deadline passed. Look (in a new wait, in case nothing did).
            wait = Wait::begin_at(site).ok();
            let expired = deadline.is_some_and(|deadline| wait::now().is_some_and(|now| now >= deadline));
            let mut inner = self.chan.inner.lock();
            let Some(index) = inner.offers.iter().position(|offer| offer.ticket == ticket) else {
                // Taken: delivered, whatever the deadline says.
                drop(inner);
                withdraw.armed = false;
                retire(&mut wait);
                return Ok(());
            };
            if !inner.receiver_alive || expired {
                let alive = inner.receiver_alive;
                let offer = inner.offers.remove(index);
                drop(inner);
                withdraw.armed = false;
                retire(&mut wait);
                let Some(offer) = offer else { return Ok(()) };
                return Err(if alive {
                    SendTimeoutError::Timeout(offer.value)
                } else {
                    SendTimeoutError::Disconnected(offer.value)
                });
            }
            if let Some(offer) = inner.offers.get_mut(index) {
                offer.sender = wait.as_ref().map(Wait::waiter);
            }
        }
    }

    /// Sends without waiting; `Full` on a full buffered channel, and on a
    /// rendezvous unless the receiver is parked in `recv` waiting for a
    /// message (then the value is handed to it).
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        coop::spend();
        self.try_push(value)
    }

    /// `try_send` without spending the budget.
    fn try_push(&self, value: T) -> Result<(), TrySendError<T>> {
        self.try_push_in(value, Here::get())
    }

    /// [`try_push`](Self::try_push) from the worker record `here` the
    /// caller looked up.
    #[inline(always)]
    fn try_push_in(&self, value: T, here: Here) -> Result<(), TrySendError<T>> {
        let mut inner = self.chan.inner.lock_in(here);
        if !inner.receiver_alive {
            return Err(TrySendError::Disconnected(value));
        }
        let waiter = if self.chan.is_rendezvous() {
            if !inner.receiving {
                return Err(TrySendError::Full(value));
            }
            inner.hand(value)
        } else {
            if self.chan.capacity.is_some_and(|cap| inner.queue.len() >= cap) {
                return Err(TrySendError::Full(value));
            }
            if inner.receiving {
                // A process parked in a plain recv (an unbounded channel,
                // its queue empty): the value goes to it directly.
                inner.receiving = false;
                // SAFETY: the lock is held, and `receiving` was set and is
                // cleared by this hand.
                unsafe { self.chan.put_handed(value) };
            } else {
                inner.queue.push_back(value);
            }
            inner.receiver.take()
        };
        drop(inner);
        if let Some(waker) = waiter {
            waker.wake_last_in(here);
        }
        Ok(())
    }

    /// Whether the receiver is gone.
    pub fn is_closed(&self) -> bool {
        !self.chan.inner.lock().receiver_alive
    }
}

/// Takes a rendezvous sender's offer back out of the channel if it unwinds
/// (a stop) while the offer waits, so a value whose send never returned is
/// not delivered later.
struct WithdrawOnUnwind<'a, T> {
    chan: &'a Chan<T>,
    ticket: u64,
    armed: bool,
}

impl<T> Drop for WithdrawOnUnwind<'_, T> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let ticket = self.ticket;
        let offer = {
            let mut inner = self.chan.inner.lock();
            let index = inner.offers.iter().position(|offer| offer.ticket == ticket);
            index.and_then(|index| inner.offers.remove(index))
        };
        // Outside the lock: the value may own senders of other channels.
        drop(offer);
    }
}

fn smarm_arch_spin() {
    use smarm_arch::Arch;
    smarm_arch::Native::spin_hint();
}

/// A sender that does not keep the channel open: the channel disconnects
/// once the last [`Sender`] is gone, weak ones or not. [`upgrade`] gives a
/// `Sender` back while a strong one is still alive. Made by
/// [`Sender::downgrade`]; useful for directories and caches that must not
/// keep a receiver waiting forever.
///
/// [`upgrade`]: WeakSender::upgrade
///
/// ```
/// # use smarm_core as smarm;
/// let (tx, rx) = smarm::channel::<u32>();
/// let weak = tx.downgrade();
/// weak.upgrade().expect("a sender is alive").send(1).unwrap();
/// drop(tx);
/// assert!(weak.upgrade().is_none());
/// assert_eq!(rx.try_recv(), Ok(1));
/// assert_eq!(rx.try_recv(), Err(smarm::TryRecvError::Disconnected));
/// ```
pub struct WeakSender<T> {
    chan: Weak<Chan<T>>,
}

impl<T> Sender<T> {
    /// A [`WeakSender`] of this channel, which does not keep it open.
    pub fn downgrade(&self) -> WeakSender<T> {
        WeakSender { chan: Arc::downgrade(&self.chan) }
    }
}

impl<T> WeakSender<T> {
    /// A `Sender` of the channel, if a `Sender` of it is still alive. Once
    /// the last one has dropped the channel stays disconnected, and this
    /// is `None` for good.
    pub fn upgrade(&self) -> Option<Sender<T>> {
        let chan = self.chan.upgrade()?;
        // Never from zero: the last sender's drop has disconnected the
        // channel (and woken its receiver), for good.
        chan.senders.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (n > 0).then(|| n + 1)).ok()?;
        Some(Sender { chan })
    }
}

impl<T> Clone for WeakSender<T> {
    fn clone(&self) -> Self {
        WeakSender { chan: self.chan.clone() }
    }
}

impl<T> fmt::Debug for WeakSender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WeakSender").finish_non_exhaustive()
    }
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
    /// Takes a message without waiting: a queued one, or on a rendezvous
    /// the value of a sender waiting in `send`.
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        let here = Here::get();
        coop::spend_in(here);
        self.poll_in(&|_| true, here)
    }

    /// Parks the calling process (sleeps a plain thread) until a message
    /// arrives; `Disconnected` once the channel is empty and every sender
    /// is gone. On a worker's driver outside any process (a handler actor)
    /// it returns a message that is already there, and `NotInProcess`
    /// where it would have to wait.
    #[track_caller]
    pub fn recv(&self) -> Result<T, RecvError> {
        let here = Here::get();
        coop::spend_in(here);
        self.recv_matching(here, None, true, |_| true, self.recv_site()).map_err(|e| match e {
            RecvTimeoutError::Disconnected | RecvTimeoutError::Timeout => RecvError::Disconnected,
            RecvTimeoutError::NotInProcess => RecvError::NotInProcess,
        })
    }

    /// [`recv`](Self::recv) with a deadline `timeout` from now. A message
    /// that arrives together with the deadline wins (message first).
    #[track_caller]
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        let here = Here::get();
        coop::spend_in(here);
        match wait::now() {
            Some(now) => self.recv_matching(here, Some(now + timeout), true, |_| true, self.recv_site()),
            None => self.poll(&|_| true).map_err(|e| match e {
                TryRecvError::Empty => RecvTimeoutError::NotInProcess,
                TryRecvError::Disconnected => RecvTimeoutError::Disconnected,
            }),
        }
    }

    /// [`recv`](Self::recv) with a deadline on the runtime's clock
    /// ([`now`](crate::kernel::process::now)). A message that arrives
    /// together with the deadline wins.
    #[track_caller]
    pub fn recv_deadline(&self, deadline: Instant) -> Result<T, RecvTimeoutError> {
        let here = Here::get();
        coop::spend_in(here);
        self.recv_matching(here, Some(deadline), true, |_| true, self.recv_site())
    }

    /// Takes the first queued message (front to back) for which `pred`
    /// holds, parking and re-scanning as messages arrive. Others stay queued
    /// in order.
    ///
    /// `pred` may run under the channel lock: keep it cheap and pure, and
    /// never touch a channel (this receiver least of all) from it.
    #[track_caller]
    pub fn recv_match(&self, pred: impl Fn(&T) -> bool) -> Result<T, RecvError> {
        let here = Here::get();
        coop::spend_in(here);
        self.recv_matching(here, None, false, pred, self.recv_site()).map_err(|e| match e {
            RecvTimeoutError::Disconnected | RecvTimeoutError::Timeout => RecvError::Disconnected,
            RecvTimeoutError::NotInProcess => RecvError::NotInProcess,
        })
    }

    /// [`recv_match`](Self::recv_match) without waiting.
    pub fn try_recv_match(&self, pred: impl Fn(&T) -> bool) -> Result<T, TryRecvError> {
        coop::spend();
        self.poll(&pred)
    }

    /// `try_recv_match` without spending the budget.
    fn poll(&self, pred: &impl Fn(&T) -> bool) -> Result<T, TryRecvError> {
        self.poll_in(pred, Here::get())
    }

    /// [`poll`](Self::poll) from the worker record `here` the caller
    /// looked up.
    fn poll_in(&self, pred: &impl Fn(&T) -> bool, here: Here) -> Result<T, TryRecvError> {
        if let Some(value) = self.take_taken(pred) {
            return Ok(value);
        }
        let mut inner = self.chan.inner.lock_in(here);
        // The receiver is looking, so it is not parked in recv.
        inner.receiving = false;
        if let Some((value, wakes)) = self.take_locked(&mut inner, pred) {
            drop(inner);
            wakes.wake_in(here);
            return Ok(value);
        }
        if self.chan.senders.load(Ordering::Acquire) == 0 {
            Err(TryRecvError::Disconnected)
        } else {
            Err(TryRecvError::Empty)
        }
    }

    /// The value a sender handed to this receiver's plain `recv`, if it
    /// is in the hand slot (no lock).
    #[inline]
    fn take_handed(&self) -> Option<T> {
        // SAFETY: this is the channel's one receiver, and `Receiver` is not
        // `Sync`: no other take runs at the same time.
        unsafe { self.chan.take_handed() }
    }

    /// Moves a handed value, if there is one, to the front of `taken`:
    /// it is older than anything queued, and `taken` was empty when the
    /// receiver registered for it.
    fn absorb_handed(&self) {
        if let Some(value) = self.take_handed() {
            self.taken.borrow_mut().push_front(value);
        }
    }

    /// The first message for which `pred` holds among those already taken
    /// out of the queue, or handed (no lock).
    #[inline(always)]
    fn take_taken(&self, pred: &impl Fn(&T) -> bool) -> Option<T> {
        self.absorb_handed();
        let mut taken = self.taken.borrow_mut();
        if taken.is_empty() {
            return None;
        }
        take_first(&mut taken, 0, pred)
    }

    /// Under the lock: the first queued message for which `pred` holds,
    /// with whom to wake once the lock is released. On an unbounded
    /// channel the whole queue moves into `taken` first (no sender waits
    /// for room there); the messages already in `taken` were looked at
    /// before, so only the new ones are.
    #[inline(always)]
    fn take_locked(&self, inner: &mut Inner<T>, pred: &impl Fn(&T) -> bool) -> Option<(T, Wakes)> {
        // A value handed while this look waited for the lock (a wake that
        // was not the hand's let the receiver run first): the oldest
        // message, looked at first; kept in front of `taken` if `pred`
        // refuses it.
        if let Some(value) = self.take_handed() {
            if pred(&value) {
                return Some((value, Wakes::None));
            }
            self.taken.borrow_mut().push_front(value);
        }
        // Nothing queued, nothing offered: the look of a receive about to
        // park, answered without a call.
        if !inner.has_message() {
            return None;
        }
        self.take_queued(inner, pred)
    }

    /// [`take_locked`](Self::take_locked) once something is queued or
    /// offered.
    fn take_queued(&self, inner: &mut Inner<T>, pred: &impl Fn(&T) -> bool) -> Option<(T, Wakes)> {
        if self.chan.capacity.is_some() || inner.queue.is_empty() {
            return inner.take_matching(pred);
        }
        let mut taken = self.taken.borrow_mut();
        let seen = taken.len();
        if seen == 0 {
            // The two buffers trade places: no message is copied.
            core::mem::swap(&mut *taken, &mut inner.queue);
        } else {
            taken.append(&mut inner.queue);
        }
        take_first(&mut taken, seen, pred).map(|value| (value, Wakes::None))
    }

    /// What a receive on this channel waits on, at the caller's line (the
    /// kind its maker gave the channel: a plain recv, a monitor's `Down`,
    /// a call's reply).
    #[track_caller]
    fn recv_site(&self) -> WaitSite {
        WaitSite::here(self.chan.waited_as)
    }

    /// The receive loop. `any`: `pred` accepts every message, so a sender
    /// may hand its value over while this parks (on a rendezvous channel,
    /// and in a process on an unbounded one).
    ///
    /// In a process, one lock per look: the look that finds nothing opens
    /// the process's wait and registers it under the same lock (the wait's
    /// stop observation comes after the lock is released, before the
    /// park). A plain thread opens its wait before the lock, as
    /// [`Wait::begin_at`] asks (see `recv_on_thread`).
    fn recv_matching(
        &self,
        here: Here,
        deadline: Option<Instant>,
        any: bool,
        pred: impl Fn(&T) -> bool,
        site: WaitSite,
    ) -> Result<T, RecvTimeoutError> {
        let accept_hand = any && (self.chan.is_rendezvous() || self.chan.capacity.is_none());
        // Only the receiver adds to `taken`: one look there is enough, the
        // looks below take what arrives.
        if let Some(value) = self.take_taken(&pred) {
            return Ok(value);
        }
        loop {
            if let Some(deadline) = deadline {
                if wait::now().is_some_and(|now| now >= deadline) {
                    // Message first: one last look before reporting the timeout.
                    return match self.poll_in(&pred, here) {
                        Ok(v) => Ok(v),
                        Err(TryRecvError::Disconnected) => Err(RecvTimeoutError::Disconnected),
                        Err(TryRecvError::Empty) => Err(RecvTimeoutError::Timeout),
                    };
                }
            }
            // The wait stays where it is made (no block hands it out): a
            // moved `Wait` is read back in words right after its fields'
            // narrower writes, which stalls every receive that parks.
            let mut inner = self.chan.inner.lock_in(here);
            // The receiver is looking, so it is not parked in recv.
            inner.receiving = false;
            if let Some((value, wakes)) = self.take_locked(&mut inner, &pred) {
                drop(inner);
                wakes.wake_in(here);
                return Ok(value);
            }
            if self.chan.senders.load(Ordering::Acquire) == 0 {
                return Err(RecvTimeoutError::Disconnected);
            }
            let Some((mut wait, waiter)) = Wait::begin_locked(here, site) else {
                drop(inner);
                let accept_hand = accept_hand && self.chan.is_rendezvous();
                return self.recv_on_thread(deadline, accept_hand, pred, site);
            };
            debug_assert!(
                inner.receiver.as_ref().is_none_or(|w| w.pid().is_none() || w.pid() == waiter.pid()),
                "two processes receive on one channel"
            );
            inner.receiver = Some(waiter);
            inner.receiving = accept_hand;
            drop(inner);
            // A stop raised out of the park (or out of the observation
            // below) must not leave `receiving` set with nobody parked: a
            // sender would hand its value to no one.
            let mut unhand = StopReceivingOnUnwind { chan: &self.chan, armed: accept_hand };
            if let Some(deadline) = deadline {
                // If a message wins, the deadline's wake is a stale no-op.
                wait.wake_at(deadline);
            }
            // Woken by a sender (a message, or the last sender's drop), by
            // the timer, or by a stop. The wake consumed the wait, so the
            // next look opens a new one only if nothing is there.
            wait.observe_and_park_in(here);
            unhand.armed = false;
            // Handed (an unbounded channel): no lock to take.
            if let Some(value) = self.take_handed() {
                return Ok(value);
            }
        }
    }

    /// The receive loop of a caller that is not a process: a plain thread
    /// (it sleeps), or a worker's driver outside any process
    /// (`NotInProcess` when it would wait).
    fn recv_on_thread(
        &self,
        deadline: Option<Instant>,
        accept_hand: bool,
        pred: impl Fn(&T) -> bool,
        site: WaitSite,
    ) -> Result<T, RecvTimeoutError> {
        loop {
            let mut wait = Wait::begin_at(site).map_err(|_| RecvTimeoutError::NotInProcess)?;
            if let Some(deadline) = deadline {
                if wait.expired(Some(deadline)) {
                    wait.retire();
                    // Message first: one last look before reporting the timeout.
                    return match self.poll(&pred) {
                        Ok(v) => Ok(v),
                        Err(TryRecvError::Disconnected) => Err(RecvTimeoutError::Disconnected),
                        Err(TryRecvError::Empty) => Err(RecvTimeoutError::Timeout),
                    };
                }
                wait.wake_at(deadline);
            }
            {
                let mut inner = self.chan.inner.lock();
                inner.receiving = false;
                if let Some((value, wakes)) = self.take_locked(&mut inner, &pred) {
                    drop(inner);
                    wakes.wake_in(Here::get());
                    wait.retire();
                    return Ok(value);
                }
                if self.chan.senders.load(Ordering::Acquire) == 0 {
                    drop(inner);
                    wait.retire();
                    return Err(RecvTimeoutError::Disconnected);
                }
                inner.receiver = Some(wait.waiter());
                inner.receiving = accept_hand;
            }
            let mut unhand = StopReceivingOnUnwind { chan: &self.chan, armed: accept_hand };
            wait.park();
            unhand.armed = false;
            match self.poll(&pred) {
                Ok(v) => return Ok(v),
                Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
                Err(TryRecvError::Empty) => {}
            }
        }
    }

    /// A blocking iterator: [`recv`](Self::recv) until every sender is gone
    /// and the channel is empty (or, on a worker's driver outside any
    /// process, until it would wait).
    pub fn iter(&self) -> Iter<'_, T> {
        Iter { receiver: self }
    }

    /// A non-blocking iterator: [`try_recv`](Self::try_recv) until the
    /// channel is empty now.
    ///
    /// ```
    /// # use smarm_core as smarm;
    /// let (tx, rx) = smarm::channel();
    /// tx.send(1).unwrap();
    /// tx.send(2).unwrap();
    /// assert_eq!(rx.try_iter().collect::<Vec<_>>(), [1, 2]);
    /// // The senders are still there: nothing now, more later.
    /// assert_eq!(rx.try_iter().next(), None);
    /// tx.send(3).unwrap();
    /// assert_eq!(rx.try_iter().next(), Some(3));
    /// ```
    pub fn try_iter(&self) -> TryIter<'_, T> {
        TryIter { receiver: self }
    }

    /// Whether every sender is gone (messages may still be queued).
    pub fn senders_gone(&self) -> bool {
        self.chan.senders.load(Ordering::Acquire) == 0
    }

    /// Messages a `try_recv` could take now: those queued, and on a
    /// rendezvous the values of the senders waiting in `send`.
    pub fn len(&self) -> usize {
        self.absorb_handed();
        let inner = self.chan.inner.lock();
        self.taken.borrow().len() + inner.queue.len() + inner.offers.len()
    }

    /// Whether `try_recv` would find nothing now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Removes and returns the first message at or after `from` for which
/// `pred` holds.
fn take_first<T>(queue: &mut VecDeque<T>, from: usize, pred: &impl Fn(&T) -> bool) -> Option<T> {
    let index = from + queue.range(from..).position(pred)?;
    if index == 0 {
        queue.pop_front()
    } else {
        queue.remove(index)
    }
}

/// Clears a rendezvous receiver's `receiving` if it unwinds out of its park.
struct StopReceivingOnUnwind<'a, T> {
    chan: &'a Chan<T>,
    armed: bool,
}

impl<T> Drop for StopReceivingOnUnwind<'_, T> {
    fn drop(&mut self) {
        if self.armed {
            self.chan.inner.lock().receiving = false;
        }
    }
}

/// A blocking iterator over a [`Receiver`]'s messages: [`Receiver::iter`].
pub struct Iter<'a, T> {
    receiver: &'a Receiver<T>,
}

/// A non-blocking iterator over the messages there now:
/// [`Receiver::try_iter`].
pub struct TryIter<'a, T> {
    receiver: &'a Receiver<T>,
}

/// A blocking iterator that owns its [`Receiver`]: `for m in receiver`.
pub struct IntoIter<T> {
    receiver: Receiver<T>,
}

impl<T> fmt::Debug for Iter<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Iter").finish_non_exhaustive()
    }
}
impl<T> fmt::Debug for TryIter<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TryIter").finish_non_exhaustive()
    }
}
impl<T> fmt::Debug for IntoIter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IntoIter").finish_non_exhaustive()
    }
}

impl<T: Send> Iterator for Iter<'_, T> {
    type Item = T;
    #[track_caller]
    fn next(&mut self) -> Option<T> {
        self.receiver.recv().ok()
    }
}

impl<T: Send> Iterator for TryIter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.receiver.try_recv().ok()
    }
}

impl<T: Send> Iterator for IntoIter<T> {
    type Item = T;
    #[track_caller]
    fn next(&mut self) -> Option<T> {
        self.receiver.recv().ok()
    }
}

impl<'a, T: Send> IntoIterator for &'a Receiver<T> {
    type Item = T;
    type IntoIter = Iter<'a, T>;
    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

impl<T: Send> IntoIterator for Receiver<T> {
    type Item = T;
    type IntoIter = IntoIter<T>;
    fn into_iter(self) -> IntoIter<T> {
        IntoIter { receiver: self }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        // A value handed to a recv that unwound goes with the receiver,
        // like a queued message (dropped outside the lock).
        // SAFETY: the receiver itself, dropped once.
        let in_slot = unsafe { self.chan.take_handed() };
        let (queue, handed, offerers, blocked) = {
            let mut inner = self.chan.inner.lock();
            inner.receiver_alive = false;
            inner.receiver = None;
            inner.receiving = false;
            // Offers whose senders wait stay for them to take back (their
            // sends return the value); handed ones go with the receiver,
            // like queued messages.
            let mut handed = VecDeque::new();
            let mut offerers = VecDeque::new();
            if !inner.offers.is_empty() {
                let offers = core::mem::take(&mut inner.offers);
                for offer in offers {
                    if offer.handed {
                        handed.push_back(offer.value);
                    } else {
                        if let Some(waker) = &offer.sender {
                            offerers.push_back(waker.clone());
                        }
                        inner.offers.push_back(offer);
                    }
                }
            }
            (core::mem::take(&mut inner.queue), handed, offerers, core::mem::take(&mut inner.blocked_senders))
        };
        // Outside the lock: messages may own senders of other channels.
        drop(in_slot);
        drop(queue);
        drop(handed);
        for waker in blocked.into_iter().chain(offerers) {
            waker.wake();
        }
    }
}

/// One arm of a [`select`](crate::sync::select::select): something a process or
/// a thread can wait on alongside others.
pub trait Selectable {
    /// Whether a `try_recv` would return at once (a message, or the
    /// closure of the channel).
    fn is_ready(&self) -> bool;
    /// Registers `waiter` to be woken when the arm becomes ready; returns
    /// `true` instead, registering nothing, if it already is.
    fn register(&self, waiter: &Waiter) -> bool;
}

/// On a rendezvous channel an arm is ready while a sender waits in `send`
/// (or every sender is gone).
impl<T: Send> Selectable for Receiver<T> {
    fn is_ready(&self) -> bool {
        self.absorb_handed();
        if !self.taken.borrow().is_empty() {
            return true;
        }
        let inner = self.chan.inner.lock();
        inner.has_message() || Chan::disconnected(&inner, self.chan.senders.load(Ordering::Acquire))
    }

    fn register(&self, waiter: &Waiter) -> bool {
        self.absorb_handed();
        if !self.taken.borrow().is_empty() {
            return true;
        }
        let mut inner = self.chan.inner.lock();
        // A select takes no message itself: no sender may hand one over.
        inner.receiving = false;
        if self.chan.handed_ready.load(Ordering::Acquire)
            || inner.has_message()
            || self.chan.senders.load(Ordering::Acquire) == 0
        {
            return true;
        }
        inner.receiver = Some(waiter.clone());
        false
    }
}
