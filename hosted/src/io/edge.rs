//! Edge-triggered registrations: one per socket, made on its first wait
//! and removed when the socket drops, with the readiness cached per
//! direction so a call that cannot block is made without a wait.
//!
//! A [`Readiness`] is the socket's half the poller sees: a word of two
//! ready bits and a tick, and the waiters of each direction. The poller
//! sets bits (and bumps the tick) on every edge; a call that hits
//! `EAGAIN` clears its bit — only if the tick is still the one it read
//! before the call, so an edge that came in between is never lost. A wait
//! parks only while its bit is clear.
//!
//! The table from token to readiness is sharded: a socket's token picks
//! its shard, so registrations and events of different sockets rarely
//! meet on a lock. Tokens are never reused (a 63-bit counter), so an event
//! fetched for a socket that has since dropped finds nothing and is
//! ignored.
//!
//! Invariant: a waiter is added under the readiness's lock only while the
//! direction's bit is clear; an edge sets the bit before it takes that
//! lock to take the waiters. So either the waiter sees the bit, or the
//! edge sees the waiter.
#![deny(unsafe_code)]

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use smarm_core::kernel::wait::Waiter;

// The readiness protocol's atomics and lock, swapped for loom's in its
// models (`--cfg loom`).
#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(loom)]
use loom::sync::{Mutex, MutexGuard};
use smarm_platform::linux::LinuxPlatform;
use smarm_platform::{Event, Platform, PollError, RawFd};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
use std::sync::{Mutex, MutexGuard};

/// Tokens of edge registrations carry this bit; the one-shot fd waits of
/// the reactor never do.
pub(crate) const EDGE_BIT: u64 = 1 << 63;
/// Shards of the token table.
const SHARDS: usize = 64;

/// Which readiness a call or a wait is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    Read = 0,
    Write = 1,
}

impl Direction {
    const fn bit(self) -> u64 {
        1 << self as u64
    }

    /// Sticky: the direction will not block again (the peer closed, the
    /// socket failed). A call that drains the socket never clears it, so
    /// the end of a stream is seen even when its edge came with the last
    /// data.
    const fn closed_bit(self) -> u64 {
        1 << (self as u64 + 2)
    }
}

/// The tick lives above the two ready bits.
const TICK_SHIFT: u32 = 32;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // No user code runs under these locks; recover from poison rather
    // than panic.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn lock_shard(shard: &Shard) -> std::sync::MutexGuard<'_, HashMap<u64, Weak<Readiness>>> {
    shard.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What the readiness protocol needs of a waiter: a process's or a
/// thread's [`Waiter`], or a flag in the loom models.
pub(crate) trait Wake: Clone {
    fn wake(&self);
    /// Whether `self` and `other` are waits of the same process (so the
    /// older one is stale).
    fn same_process(&self, other: &Self) -> bool;
    fn same_wait(&self, other: &Self) -> bool;
}

impl Wake for Waiter {
    fn wake(&self) {
        Waiter::wake(self);
    }

    fn same_process(&self, other: &Self) -> bool {
        self.pid().is_some() && self.pid() == other.pid()
    }

    fn same_wait(&self, other: &Self) -> bool {
        Waiter::same_wait(self, other)
    }
}

/// A socket's readiness as the poller reports it, and who waits for it.
#[derive(Debug)]
pub(crate) struct Readiness<W: Wake = Waiter> {
    /// Bit 0 readable, bit 1 writable, bits 32.. a tick bumped by every
    /// edge. Both bits start set: a fresh socket is tried before it is
    /// waited on.
    word: AtomicU64,
    /// The waiters of each direction: at most one per process (a process
    /// waits once at a time, so an older entry of the same process is
    /// stale and replaced), plus plain threads' waits.
    waiters: Mutex<[Waiters<W>; 2]>,
}

/// The waiters of one direction: the first inline (a connection's one
/// reader or writer allocates nothing per wait), more in a vector.
#[derive(Debug)]
struct Waiters<W> {
    first: Option<W>,
    more: Vec<W>,
}

impl<W> Default for Waiters<W> {
    fn default() -> Self {
        Waiters { first: None, more: Vec::new() }
    }
}

impl<W: Wake> Waiters<W> {
    fn add(&mut self, waiter: &W) {
        // A process waits once at a time: an older entry of the same
        // process is stale, and replaced. A task polled again before an
        // edge leaves the same waker: it is kept once.
        let same = |other: &W| waiter.same_process(other) || waiter.same_wait(other);
        match &mut self.first {
            slot @ None => *slot = Some(waiter.clone()),
            Some(first) if same(first) => *first = waiter.clone(),
            Some(_) => match self.more.iter_mut().find(|other| same(other)) {
                Some(stale) => *stale = waiter.clone(),
                None => self.more.push(waiter.clone()),
            },
        }
    }

    fn remove(&mut self, waiter: &W) {
        if self.first.as_ref().is_some_and(|first| first.same_wait(waiter)) {
            self.first = self.more.pop();
        } else {
            self.more.retain(|other| !other.same_wait(waiter));
        }
    }
}

/// What [`Readiness::snapshot`] saw: its bits and its tick.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Snapshot(u64);

impl Snapshot {
    pub(crate) fn is_ready(self, direction: Direction) -> bool {
        self.0 & (direction.bit() | direction.closed_bit()) != 0
    }
}

impl<W: Wake> Default for Readiness<W> {
    fn default() -> Self {
        Readiness {
            word: AtomicU64::new(Direction::Read.bit() | Direction::Write.bit()),
            waiters: Mutex::new([Waiters::default(), Waiters::default()]),
        }
    }
}

impl<W: Wake> Readiness<W> {
    /// The cached readiness now. Acquire pairs with the Release of
    /// [`set`](Self::set): what the edge reported is visible.
    pub(crate) fn snapshot(&self) -> Snapshot {
        Snapshot(self.word.load(Ordering::Acquire))
    }

    /// Clears `direction`'s bit after a call that would block, unless an
    /// edge came since `seen` was taken (then the next call tries again).
    pub(crate) fn clear(&self, direction: Direction, seen: Snapshot) {
        let tick = seen.0 >> TICK_SHIFT;
        // Relaxed on failure: the CAS only keeps the bit when the tick
        // moved, which it reads from the word itself.
        let _ = self.word.fetch_update(Ordering::AcqRel, Ordering::Relaxed, |word| {
            (word >> TICK_SHIFT == tick).then_some(word & !direction.bit())
        });
    }

    /// Marks the directions closed for good (see [`Direction::closed_bit`]),
    /// then ready, waking their waiters.
    pub(crate) fn set_closed(&self, read_closed: bool, write_closed: bool) {
        let bits = if read_closed { Direction::Read.closed_bit() } else { 0 }
            | if write_closed { Direction::Write.closed_bit() } else { 0 };
        if bits != 0 {
            // Release pairs with `snapshot`'s Acquire.
            self.word.fetch_or(bits, Ordering::AcqRel);
        }
        self.set(read_closed, write_closed);
    }

    /// Marks the directions ready, bumps the tick, and wakes their waiters.
    pub(crate) fn set(&self, readable: bool, writable: bool) {
        let bits = if readable { Direction::Read.bit() } else { 0 }
            | if writable { Direction::Write.bit() } else { 0 };
        if bits == 0 {
            return;
        }
        // Release pairs with `snapshot`'s Acquire.
        let _ = self.word.fetch_update(Ordering::AcqRel, Ordering::Relaxed, |word| {
            Some((word | bits).wrapping_add(1 << TICK_SHIFT))
        });
        let mut first: [Option<W>; 2] = [None, None];
        let mut more: Vec<W> = Vec::new();
        {
            let mut waiters = lock(&self.waiters);
            for (direction, ready) in [readable, writable].into_iter().enumerate() {
                if ready {
                    first[direction] = waiters[direction].first.take();
                    if !waiters[direction].more.is_empty() {
                        more.append(&mut waiters[direction].more);
                    }
                }
            }
        }
        for waiter in first.iter().flatten().chain(more.iter()) {
            waiter.wake();
        }
    }

    /// Leaves `waiter` for `direction`, unless the direction is ready
    /// already: then nothing is left and the answer is `true`.
    pub(crate) fn add_waiter(&self, direction: Direction, waiter: &W) -> bool {
        let mut waiters = lock(&self.waiters);
        if self.snapshot().is_ready(direction) {
            return true;
        }
        waiters[direction as usize].add(waiter);
        false
    }

    /// Takes `waiter` out of `direction`'s waiters if it is still there (a
    /// wait that ended by its timer or a stop).
    pub(crate) fn remove_waiter(&self, direction: Direction, waiter: &W) {
        let mut waiters = lock(&self.waiters);
        waiters[direction as usize].remove(waiter);
    }

    /// Wakes every waiter with both directions marked ready: the socket is
    /// going away, and each wait's next call reports why.
    pub(crate) fn close(&self) {
        self.set(true, true);
    }
}

/// One shard of the token table.
type Shard = std::sync::Mutex<HashMap<u64, Weak<Readiness>>>;

/// The token table of one runtime's edge registrations.
#[derive(Debug)]
pub(crate) struct EdgeTable {
    shards: Box<[Shard]>,
    sequence: std::sync::atomic::AtomicU64,
}

impl Default for EdgeTable {
    fn default() -> Self {
        EdgeTable {
            shards: (0..SHARDS).map(|_| std::sync::Mutex::new(HashMap::new())).collect(),
            sequence: std::sync::atomic::AtomicU64::new(0),
        }
    }
}

impl EdgeTable {
    fn shard(&self, token: u64) -> &Shard {
        &self.shards[(token as usize) % SHARDS]
    }

    /// Registers `fd` with `platform`'s poller, edge-triggered, reporting to
    /// `readiness`. Returns the token to deregister with.
    pub(crate) fn register(
        &self,
        platform: &LinuxPlatform,
        fd: RawFd,
        readiness: &Arc<Readiness>,
    ) -> Result<u64, PollError> {
        // Relaxed: the counter only has to hand out distinct values.
        let token = EDGE_BIT | (self.sequence.fetch_add(1, std::sync::atomic::Ordering::Relaxed) & !EDGE_BIT);
        // In the table before the kernel can report it.
        lock_shard(self.shard(token)).insert(token, Arc::downgrade(readiness));
        if let Err(error) = platform.poll_register_edge(fd, token) {
            lock_shard(self.shard(token)).remove(&token);
            return Err(error);
        }
        Ok(token)
    }

    /// Removes the registration `token` of `fd` (before `fd` is closed).
    pub(crate) fn deregister(&self, platform: &LinuxPlatform, fd: RawFd, token: u64) {
        let _ = platform.poll_deregister(fd);
        lock_shard(self.shard(token)).remove(&token);
    }

    /// Hands an event to its socket's readiness; `false` if the token is
    /// not an edge registration's (the caller handles it).
    pub(crate) fn dispatch(&self, event: &Event) -> bool {
        if event.token & EDGE_BIT == 0 {
            return false;
        }
        let readiness = lock_shard(self.shard(event.token)).get(&event.token).and_then(Weak::upgrade);
        if let Some(readiness) = readiness {
            readiness.set_closed(event.read_closed, event.write_closed);
            readiness.set(event.readable, event.writable);
        }
        true
    }

    /// Live edge registrations (diagnostics and tests).
    pub(crate) fn registered(&self) -> usize {
        self.shards.iter().map(|shard| lock_shard(shard).len()).sum()
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    //! The readiness protocol under loom: an edge that comes while a call
    //! finds the socket empty is never lost — the caller either sees the
    //! readiness when it leaves its waiter, or the edge takes the waiter
    //! and wakes it.

    use loom::sync::atomic::{AtomicBool, Ordering};
    use loom::sync::Arc;

    use super::{Direction, Readiness, Wake};

    /// A waiter that records its wake.
    #[derive(Clone)]
    struct Flag(Arc<AtomicBool>);

    impl Wake for Flag {
        fn wake(&self) {
            self.0.store(true, Ordering::SeqCst);
        }
        fn same_process(&self, _other: &Self) -> bool {
            false
        }
        fn same_wait(&self, other: &Self) -> bool {
            Arc::ptr_eq(&self.0, &other.0)
        }
    }

    #[test]
    fn an_edge_during_a_would_block_call_is_never_lost() {
        loom::model(|| {
            let readiness = Arc::new(Readiness::<Flag>::default());
            // The socket's receive queue, as the kernel holds it.
            let data = Arc::new(AtomicBool::new(false));
            let flag = Flag(Arc::new(AtomicBool::new(false)));
            let edge = {
                let (readiness, data) = (readiness.clone(), data.clone());
                loom::thread::spawn(move || {
                    // Data arrives, then its edge is reported.
                    data.store(true, Ordering::SeqCst);
                    readiness.set(true, false);
                })
            };
            // The caller: a read that finds nothing would block, clears
            // the readiness it saw, and leaves its waiter.
            let seen = readiness.snapshot();
            assert!(seen.is_ready(Direction::Read));
            let outcome = if data.load(Ordering::SeqCst) {
                "read"
            } else {
                readiness.clear(Direction::Read, seen);
                if readiness.add_waiter(Direction::Read, &flag) {
                    "ready"
                } else {
                    "parked"
                }
            };
            edge.join().unwrap();
            if outcome == "parked" {
                assert!(flag.0.load(Ordering::SeqCst), "the edge was lost: the caller would sleep forever");
            }
        });
    }
}
