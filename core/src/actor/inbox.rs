//! Receiving from actors outside the actors: [`Inbox`] (an address that
//! plain code receives on) and [`Ask`] (one reply to one request).
//!
//! Both wait the way their caller can, through the one wait every blocking
//! call of smarm uses: a process parks (its worker runs others meanwhile),
//! a plain OS thread sleeps, async code awaits (they are `Future`s), and a
//! handler — which must never block its worker — gets
//! [`InboxRecvError::NotInProcess`] at once.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::collections::VecDeque;
use alloc::sync::{Arc, Weak};
use core::any::Any;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use crate::actor::error::ActorSendError;
use crate::actor::system::{count_external, Local};
use crate::kernel::atomic::{AtomicU64, Ordering};
use crate::kernel::deadlock::{WaitKind, WaitSite};
use crate::kernel::pid::Pid;
use crate::kernel::runtime::{Runtime, Shared};
use crate::kernel::slab::DeathHookId;
use crate::kernel::spin::RuntimeMutex;
use crate::kernel::wait::{self, Wait, Waiter};

struct Inner<M> {
    queue: VecDeque<M>,
    /// The receiver's wait (a process's, a thread's, or a task's).
    waiter: Option<Waiter>,
    /// The receiver is gone: sends fail.
    closed: bool,
    /// Live senders that count (an ask's reply handle, an inbox's typed
    /// addresses); `Some(0)`: nothing more can arrive. `None`: senders are
    /// not counted (yet): an inbox before its first typed address, or one
    /// whose uncounted untyped address was made.
    senders: Option<usize>,
    /// An untyped address was made: senders are never counted again.
    uncounted: bool,
    /// The ask's target died.
    target_died: bool,
}

/// One receiver's queue: the heart of both `Inbox` and `Ask`.
pub(crate) struct Slot<M> {
    /// Why nothing more can arrive once the counted senders are gone.
    orphaned: Disconnected,
    inner: RuntimeMutex<Inner<M>>,
}

impl<M: Send + 'static> Slot<M> {
    fn new(senders: Option<usize>, orphaned: Disconnected) -> Arc<Slot<M>> {
        Arc::new(Slot {
            orphaned,
            inner: RuntimeMutex::leaf(Inner {
                queue: VecDeque::new(),
                waiter: None,
                closed: false,
                senders,
                uncounted: false,
                target_died: false,
            }),
        })
    }

    /// Queues `m` and wakes the receiver; `Err` if it has gone.
    pub(crate) fn push(&self, m: M) -> Result<(), M> {
        let waiter = {
            let mut inner = self.inner.lock();
            if inner.closed {
                return Err(m);
            }
            inner.queue.push_back(m);
            inner.waiter.take()
        };
        self.wake(waiter);
        Ok(())
    }

    /// Wakes a taken waiter, outside the lock.
    fn wake(&self, waiter: Option<Waiter>) {
        if let Some(waiter) = waiter {
            waiter.wake();
        }
    }

    /// One more counted sender (a new typed inbox address), unless the
    /// senders are uncounted.
    fn add_sender(&self) {
        let mut inner = self.inner.lock();
        if !inner.uncounted {
            inner.senders = Some(inner.senders.map_or(1, |n| n + 1));
        }
    }

    /// One counted sender fewer; the last one wakes the receiver, which
    /// then sees the disconnection. The count and the waiter change under
    /// the one lock a parking receiver checks the count under, so a drop
    /// racing a park either is seen before it parks or wakes it.
    fn remove_sender(&self) {
        let waiter = {
            let mut inner = self.inner.lock();
            match inner.senders.as_mut() {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    if *n > 0 {
                        return;
                    }
                    inner.waiter.take()
                }
                _ => return,
            }
        };
        self.wake(waiter);
    }

    /// An uncounted sender exists from now on: never report disconnection.
    fn stop_counting(&self) {
        let mut inner = self.inner.lock();
        inner.uncounted = true;
        inner.senders = None;
    }

    /// Changes the state under the lock, then wakes the receiver.
    fn update(&self, f: impl FnOnce(&mut Inner<M>)) {
        let waiter = {
            let mut inner = self.inner.lock();
            f(&mut inner);
            inner.waiter.take()
        };
        self.wake(waiter);
    }

    fn poll_now(&self) -> Result<M, InboxTryRecvError> {
        let mut inner = self.inner.lock();
        if let Some(m) = inner.queue.pop_front() {
            return Ok(m);
        }
        // The more precise reason first: an ended actor drops the request
        // (and its reply handle) before its death is announced.
        if inner.senders == Some(0) {
            return Err(InboxTryRecvError::Disconnected(self.orphaned));
        }
        if inner.target_died {
            return Err(InboxTryRecvError::Disconnected(Disconnected::TargetDied));
        }
        Err(InboxTryRecvError::Empty)
    }

    /// Waits until a message, a disconnection, or `timeout`.
    fn recv(&self, timeout: Option<Duration>, site: WaitSite) -> Result<M, InboxRecvError> {
        match self.poll_now() {
            Ok(m) => return Ok(m),
            Err(InboxTryRecvError::Disconnected(d)) => return Err(InboxRecvError::Disconnected(d)),
            Err(InboxTryRecvError::Empty) => {}
        }
        // On a worker's driver outside any process (a handler, a host
        // hook) nothing may sleep: it would stall the whole worker.
        let now = wait::now().ok_or(InboxRecvError::NotInProcess)?;
        let deadline = timeout.map(|t| now + t);
        loop {
            let mut wait = Wait::begin_at(site).map_err(|_| InboxRecvError::NotInProcess)?;
            if let Some(deadline) = deadline {
                if wait.expired(Some(deadline)) {
                    wait.retire();
                    return self.poll_now().map_err(InboxRecvError::after_timeout);
                }
                wait.wake_at(deadline);
            }
            let ready = {
                let mut inner = self.inner.lock();
                let ready = !inner.queue.is_empty() || inner.target_died || inner.senders == Some(0);
                if !ready {
                    inner.waiter = Some(wait.waiter());
                }
                ready
            };
            if ready {
                wait.retire();
                return self.poll_now().map_err(InboxRecvError::after_timeout);
            }
            wait.park();
            match self.poll_now() {
                Ok(m) => return Ok(m),
                Err(InboxTryRecvError::Disconnected(d)) => return Err(InboxRecvError::Disconnected(d)),
                Err(InboxTryRecvError::Empty) => {}
            }
        }
    }

    fn poll_task(&self, cx: &mut Context<'_>) -> Poll<Result<M, InboxRecvError>> {
        let mut inner = self.inner.lock();
        if let Some(m) = inner.queue.pop_front() {
            return Poll::Ready(Ok(m));
        }
        if inner.senders == Some(0) {
            return Poll::Ready(Err(InboxRecvError::Disconnected(self.orphaned)));
        }
        if inner.target_died {
            return Poll::Ready(Err(InboxRecvError::Disconnected(Disconnected::TargetDied)));
        }
        inner.waiter = Some(Waiter::from_task(cx.waker()));
        Poll::Pending
    }
}

/// Why nothing more can arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disconnected {
    /// The reply handle was dropped without a reply (the actor stopped,
    /// panicked, or dropped it).
    NoReply,
    /// The asked actor died before replying.
    TargetDied,
    /// Every typed address of the inbox ([`InboxAddr`]) has been dropped
    /// and its queue is empty (see [`Inbox::recv`]).
    NoSenders,
}

/// Why a receive from an [`Inbox`] or an [`Ask`] returned no message (the
/// channels' error is [`RecvError`](crate::sync::channel::RecvError)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InboxRecvError {
    /// The timeout passed first.
    Timeout,
    /// Nothing more can arrive.
    Disconnected(Disconnected),
    /// Called where nothing may wait: from a handler (or a host hook) on a
    /// worker's driver, where waiting would stall the worker (use
    /// `try_recv`), or from a plain thread on a host that cannot block
    /// threads. The same case as the channels' `NotInProcess`.
    NotInProcess,
    /// The request could not be sent: no live actor at the address.
    NoActor,
}

#[allow(non_upper_case_globals)]
impl InboxRecvError {
    /// The old name of [`NotInProcess`](Self::NotInProcess), usable in
    /// patterns too.
    #[deprecated(note = "renamed to InboxRecvError::NotInProcess, as the channels name it")]
    pub const InHandler: InboxRecvError = InboxRecvError::NotInProcess;

    fn after_timeout(e: InboxTryRecvError) -> InboxRecvError {
        match e {
            InboxTryRecvError::Empty => InboxRecvError::Timeout,
            InboxTryRecvError::Disconnected(d) => InboxRecvError::Disconnected(d),
        }
    }
}

impl fmt::Display for InboxRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InboxRecvError::Timeout => f.write_str("timed out waiting for a message"),
            InboxRecvError::Disconnected(Disconnected::NoReply) => {
                f.write_str("the reply handle was dropped without a reply (the actor stopped or panicked?)")
            }
            InboxRecvError::Disconnected(Disconnected::TargetDied) => {
                f.write_str("the asked actor died before replying")
            }
            InboxRecvError::Disconnected(Disconnected::NoSenders) => {
                f.write_str("every address of the inbox was dropped (its holders ended?) and it is empty")
            }
            InboxRecvError::NotInProcess => {
                f.write_str("cannot wait here: inside a handler it would stall the worker (use try_recv)")
            }
            InboxRecvError::NoActor => f.write_str("no live actor at the address: the request was not sent"),
        }
    }
}
impl core::error::Error for InboxRecvError {}

/// Why an inbox's `try_recv` (or [`Ask::try_get`]) returned no message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InboxTryRecvError {
    /// Nothing queued now.
    Empty,
    /// Nothing more can arrive.
    Disconnected(Disconnected),
}

impl fmt::Display for InboxTryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InboxTryRecvError::Empty => f.write_str("nothing queued"),
            InboxTryRecvError::Disconnected(_) => f.write_str("nothing more can arrive"),
        }
    }
}
impl core::error::Error for InboxTryRecvError {}

/// The old name of [`InboxRecvError`].
#[deprecated(note = "renamed to InboxRecvError (smarm::RecvError is the channels' error)")]
pub type RecvError = InboxRecvError;

/// The old name of [`InboxTryRecvError`].
#[deprecated(note = "renamed to InboxTryRecvError (smarm::TryRecvError is the channels' error)")]
pub type TryRecvError = InboxTryRecvError;

/// A type-erased inbox, for sends through an untyped address.
pub(crate) trait ErasedInbox: Send + Sync {
    fn push_any(&self, payload: Box<dyn Any + Send>) -> Result<(), Box<dyn Any + Send>>;
}

impl<M: Send + 'static> ErasedInbox for Slot<M> {
    fn push_any(&self, payload: Box<dyn Any + Send>) -> Result<(), Box<dyn Any + Send>> {
        match payload.downcast::<M>() {
            Ok(m) => self.push(*m).map_err(|m| Box::new(m) as Box<dyn Any + Send>),
            Err(payload) => Err(payload),
        }
    }
}

/// An address that code outside the actors receives on: `main`, a thread,
/// a process, async code, a test. Actors send to it through its
/// [`InboxAddr`] (typed) or [`ActorAddress`](crate::actor::ActorAddress) (untyped, routed through the
/// runtime's inbox registry). Dropping it unregisters it: later sends get
/// `ActorSendError::NoActor` with the message back.
///
/// Like a channel's receiver, it sees when its senders are gone: the
/// typed addresses are counted, and once every one has been dropped (their
/// holders ended, stopped or panicked) a receive that finds the queue empty
/// returns `Disconnected(Disconnected::NoSenders)` instead of waiting
/// forever — see [`recv`](Inbox::recv). The untyped [`address`](Inbox::address)
/// cannot be counted, so making one turns this off for good.
///
/// ```no_run
/// # use smarm_core as smarm;
/// # fn demo(runtime: &smarm::Runtime) {
/// let inbox = runtime.new_inbox::<u64>();
/// let addr = inbox.addr();
/// std::thread::spawn(move || addr.send(7).unwrap());
/// assert_eq!(inbox.recv().unwrap(), 7);
/// # }
/// ```
pub struct Inbox<M: Send + 'static> {
    slot: Arc<Slot<M>>,
    id: u64,
    runtime: Runtime,
}

impl<M: Send + 'static> fmt::Debug for Inbox<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Inbox<{}>(#{})", core::any::type_name::<M>(), self.id)
    }
}

impl<M: Send + 'static> Inbox<M> {
    /// Waits for the next message: parks a process, sleeps a thread.
    ///
    /// # Disconnection
    ///
    /// Every live [`InboxAddr`] — each one [`addr`](Self::addr) returns,
    /// and each clone — counts as a sender. When the last one is dropped
    /// (its holder ended, was stopped, or panicked and was dropped), the
    /// messages already queued are still received, in order; after them
    /// `recv` returns `Err(InboxRecvError::Disconnected(Disconnected::NoSenders))`
    /// at once instead of waiting forever, and so do
    /// [`recv_timeout`](Self::recv_timeout), [`recv_async`](Self::recv_async)
    /// and [`try_recv`](Self::try_recv) (as `InboxTryRecvError::Disconnected`).
    /// Nothing queued is lost. Rules:
    ///
    /// - An inbox that never had a typed address waits as before: it is
    ///   not disconnected, it was not yet connected.
    /// - A new [`addr`](Self::addr) after the disconnection reconnects it.
    /// - The untyped [`address`](Self::address) is not counted (it is a
    ///   plain routing value, cloned freely), yet it delivers: once one has
    ///   been made, the inbox can no longer tell when its last sender is
    ///   gone and never reports `NoSenders` — `recv` waits as it did before
    ///   (use [`recv_timeout`](Self::recv_timeout) to bound the wait).
    ///
    /// ```no_run
    /// # use smarm_core as smarm;
    /// # fn demo(runtime: &smarm::Runtime) {
    /// use smarm::actor::{Disconnected, InboxRecvError};
    ///
    /// let inbox = runtime.new_inbox::<u64>();
    /// for n in 0..3 {
    ///     // Each worker holds an address, sends, and drops it as it ends.
    ///     let addr = inbox.addr();
    ///     std::thread::spawn(move || addr.send(n).unwrap());
    /// }
    /// let mut sum = 0;
    /// loop {
    ///     match inbox.recv() {
    ///         Ok(n) => sum += n,
    ///         // Every address is gone and all three were received.
    ///         Err(InboxRecvError::Disconnected(Disconnected::NoSenders)) => break,
    ///         Err(e) => panic!("{e}"),
    ///     }
    /// }
    /// assert_eq!(sum, 3);
    /// # }
    /// ```
    #[track_caller]
    pub fn recv(&self) -> Result<M, InboxRecvError> {
        self.slot.recv(None, WaitSite::here(WaitKind::Inbox))
    }

    /// [`recv`](Self::recv), giving up after `timeout`.
    #[track_caller]
    pub fn recv_timeout(&self, timeout: Duration) -> Result<M, InboxRecvError> {
        self.slot.recv(Some(timeout), WaitSite::here(WaitKind::Inbox))
    }

    /// The next message if one is queued.
    pub fn try_recv(&self) -> Result<M, InboxTryRecvError> {
        self.slot.poll_now()
    }

    /// The next message, as a `Future` for async code.
    pub fn recv_async(&self) -> InboxRecv<'_, M> {
        InboxRecv { inbox: self }
    }

    /// A typed address that sends to this inbox. It and its clones are
    /// counted: see [`recv`](Self::recv).
    pub fn addr(&self) -> InboxAddr<M> {
        self.slot.add_sender();
        InboxAddr { slot: Arc::downgrade(&self.slot), runtime: self.runtime.clone() }
    }

    /// Untyped addresses exist from now on: senders are not counted.
    pub(crate) fn stop_counting(&self) {
        self.slot.stop_counting();
    }

    /// The inbox's id in the runtime's registry.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The runtime the inbox is registered in.
    pub(crate) fn runtime(&self) -> &Runtime {
        &self.runtime
    }
}

impl<M: Send + 'static> Drop for Inbox<M> {
    fn drop(&mut self) {
        let mut queued = VecDeque::new();
        self.slot.update(|inner| {
            inner.closed = true;
            queued = core::mem::take(&mut inner.queue);
        });
        Inboxes::of(&self.runtime.shared).remove(self.id);
        // Dropped outside the slot's lock: a message may hold an address
        // of this very inbox, whose drop takes that lock.
        drop(queued);
    }
}

/// The future of [`Inbox::recv_async`].
pub struct InboxRecv<'a, M: Send + 'static> {
    inbox: &'a Inbox<M>,
}

impl<M: Send + 'static> fmt::Debug for InboxRecv<'_, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InboxRecv").finish_non_exhaustive()
    }
}

impl<M: Send + 'static> Future for InboxRecv<'_, M> {
    type Output = Result<M, InboxRecvError>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inbox.slot.poll_task(cx)
    }
}

/// A typed address of an [`Inbox`]: cloneable, `Send`, `Sync`. It does
/// not keep the inbox alive, but the inbox counts its live typed addresses:
/// when the last is dropped, the inbox's receiver sees the disconnection
/// (see [`Inbox::recv`]).
pub struct InboxAddr<M: Send + 'static> {
    slot: Weak<Slot<M>>,
    runtime: Runtime,
}

impl<M: Send + 'static> Clone for InboxAddr<M> {
    fn clone(&self) -> Self {
        if let Some(slot) = self.slot.upgrade() {
            slot.add_sender();
        }
        InboxAddr { slot: self.slot.clone(), runtime: self.runtime.clone() }
    }
}

impl<M: Send + 'static> Drop for InboxAddr<M> {
    fn drop(&mut self) {
        // A slot that is gone stays gone, so a clone that counted nothing
        // (the inbox was already dropped) uncounts nothing either.
        if let Some(slot) = self.slot.upgrade() {
            slot.remove_sender();
        }
    }
}

impl<M: Send + 'static> fmt::Debug for InboxAddr<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "InboxAddr<{}>", core::any::type_name::<M>())
    }
}

impl<M: Send + 'static> InboxAddr<M> {
    /// Sends `m`; `Err` hands it back if the inbox was dropped.
    pub fn send(&self, m: M) -> Result<(), ActorSendError<M>> {
        count_inbox_send(&self.runtime.shared);
        match self.slot.upgrade() {
            Some(slot) => slot.push(m).map_err(ActorSendError::NoActor),
            None => Err(ActorSendError::NoActor(m)),
        }
    }
}

/// Counts a send into an inbox on the sending worker (if any).
pub(crate) fn count_inbox_send(shared: &Shared) {
    let counted = Local::with_any(shared, |local| {
        local.counters.inbox_sends.set(local.counters.inbox_sends.get() + 1);
    });
    if counted.is_none() {
        count_external(shared);
    }
}

/// A runtime's inboxes by id, for sends through untyped addresses: kept
/// in the runtime's extension slots, made on first use.
pub(crate) struct Inboxes {
    by_id: RuntimeMutex<BTreeMap<u64, Arc<dyn ErasedInbox>>>,
    next: AtomicU64,
}

impl Inboxes {
    /// The registry of the runtime at `shared`.
    pub(crate) fn of(shared: &Shared) -> Arc<Inboxes> {
        shared.extension(|| Inboxes { by_id: RuntimeMutex::leaf(BTreeMap::new()), next: AtomicU64::new(1) })
    }

    /// The inbox registered as `id`, if it is still there.
    pub(crate) fn get(&self, id: u64) -> Option<Arc<dyn ErasedInbox>> {
        self.by_id.lock().get(&id).cloned()
    }

    fn insert(&self, inbox: Arc<dyn ErasedInbox>) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.by_id.lock().insert(id, inbox);
        id
    }

    fn remove(&self, id: u64) {
        let removed = self.by_id.lock().remove(&id);
        // Dropped off the lock.
        drop(removed);
    }
}

/// Registers a new inbox of `M` in `runtime`.
pub(crate) fn new_inbox<M: Send + 'static>(runtime: &Runtime) -> Inbox<M> {
    let slot = Slot::<M>::new(None, Disconnected::NoSenders);
    let id = Inboxes::of(&runtime.shared).insert(slot.clone() as Arc<dyn ErasedInbox>);
    Inbox { slot, id, runtime: runtime.clone() }
}

/// The handle an asked actor replies through, once. Dropping it without
/// replying tells the asker (`Disconnected::NoReply`).
pub struct ReplyTo<R: Send + 'static> {
    slot: Option<Arc<Slot<R>>>,
}

impl<R: Send + 'static> fmt::Debug for ReplyTo<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ReplyTo<{}>", core::any::type_name::<R>())
    }
}

impl<R: Send + 'static> ReplyTo<R> {
    /// Replies. `Err` hands the reply back if the asker has stopped
    /// waiting (a timeout, or the `Ask` was dropped): it is dropped, not
    /// kept.
    pub fn send(mut self, reply: R) -> Result<(), R> {
        match self.slot.take() {
            Some(slot) => {
                let sent = slot.push(reply);
                slot.update(|inner| {
                    if let Some(n) = inner.senders.as_mut() {
                        *n = n.saturating_sub(1);
                    }
                });
                sent
            }
            None => Err(reply),
        }
    }
}

impl<R: Send + 'static> Drop for ReplyTo<R> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            slot.update(|inner| {
                if let Some(n) = inner.senders.as_mut() {
                    *n = n.saturating_sub(1);
                }
            });
        }
    }
}

/// One reply on its way: wait for it on a thread, in a process
/// ([`wait`](Ask::wait), [`wait_timeout`](Ask::wait_timeout)), or `.await`
/// it. A target that is dead, or dies or drops the request unanswered, is
/// an error, never a hang; a reply that arrives after a timeout is dropped.
pub struct Ask<R: Send + 'static> {
    slot: Arc<Slot<R>>,
    /// The target's death hook, removed when the ask is dropped.
    watch: Option<(Weak<Shared>, Pid, DeathHookId)>,
    not_sent: bool,
}

impl<R: Send + 'static> fmt::Debug for Ask<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Ask<{}>", core::any::type_name::<R>())
    }
}

impl<R: Send + 'static> Ask<R> {
    /// Waits for the reply.
    #[track_caller]
    pub fn wait(self) -> Result<R, InboxRecvError> {
        if self.not_sent {
            return Err(InboxRecvError::NoActor);
        }
        self.slot.recv(None, WaitSite::here(WaitKind::Ask))
    }

    /// Waits for the reply at most `timeout`.
    #[track_caller]
    pub fn wait_timeout(self, timeout: Duration) -> Result<R, InboxRecvError> {
        if self.not_sent {
            return Err(InboxRecvError::NoActor);
        }
        self.slot.recv(Some(timeout), WaitSite::here(WaitKind::Ask))
    }

    /// The reply if it has arrived.
    pub fn try_get(&self) -> Result<R, InboxTryRecvError> {
        if self.not_sent {
            return Err(InboxTryRecvError::Disconnected(Disconnected::TargetDied));
        }
        self.slot.poll_now()
    }
}

impl<R: Send + 'static> Future for Ask<R> {
    type Output = Result<R, InboxRecvError>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if self.not_sent {
            return Poll::Ready(Err(InboxRecvError::NoActor));
        }
        self.slot.poll_task(cx)
    }
}

impl<R: Send + 'static> Drop for Ask<R> {
    fn drop(&mut self) {
        // A late reply finds the slot closed and is dropped by its sender.
        let mut queued = VecDeque::new();
        self.slot.update(|inner| {
            inner.closed = true;
            queued = core::mem::take(&mut inner.queue);
        });
        // Outside the lock: a reply may hold an inbox address, whose drop
        // takes its inbox's lock.
        drop(queued);
        if let Some((shared, pid, hook)) = self.watch.take() {
            if let Some(shared) = shared.upgrade() {
                shared.remove_death_hook(pid, hook);
            }
        }
    }
}

/// A pending reply and the handle to send it, bound to no actor (admin
/// replies).
pub(crate) fn ask_detached<R: Send + 'static>() -> (Ask<R>, ReplyTo<R>) {
    let slot = Slot::<R>::new(Some(1), Disconnected::NoReply);
    let reply = ReplyTo { slot: Some(slot.clone()) };
    (Ask { slot, watch: None, not_sent: false }, reply)
}

/// Asks actor `pid`: `send` gets the reply handle and sends the request
/// (`false`: it could not). Returns the pending reply, which fails rather
/// than hangs if `pid` dies first.
pub(crate) fn ask_with<R: Send + 'static>(
    runtime: &Runtime,
    pid: Pid,
    send: impl FnOnce(ReplyTo<R>) -> bool,
) -> Ask<R> {
    let shared = &runtime.shared;
    let slot = Slot::<R>::new(Some(1), Disconnected::NoReply);
    let watched = slot.clone();
    let hook = Box::new(move |_: &Shared, _: Pid, _: &crate::kernel::exit::ExitReason| {
        watched.update(|inner| inner.target_died = true);
    });
    let watch = shared.on_death(pid, hook).ok().map(|id| (Arc::downgrade(shared), pid, id));
    let not_sent = watch.is_none() || !send(ReplyTo { slot: Some(slot.clone()) });
    Ask { slot, watch, not_sent }
}
