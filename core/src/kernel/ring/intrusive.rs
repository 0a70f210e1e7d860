//! Wake queues with no capacity: a bounded ring in front of an unbounded
//! intrusive list threaded through the slots.
//!
//! # Why nothing can overflow
//!
//! A process is pushed into a worker's wake or spawn queue only by the
//! thread whose CAS moved its state word to `Queued`, and leaves it only
//! when the worker pops it and then claims it (`Queued` → `Running`); so
//! **each process is in at most one queue, at most once** (see
//! [`super`]). One link per slot is therefore enough to chain every
//! process that is waiting in any queue, whatever their number: the
//! [`IntrusiveQueue`] needs no memory of its own and cannot be full. The
//! slab that holds the links grows (`kernel::segments::Segments`), so no queue
//! is sized to it.
//!
//! # The ring in front
//!
//! A [`WakeQueue`] pushes into its bounded [`WakeRing`] first and into the
//! intrusive list only when the ring is full. The ring is the common path
//! (a cache line per wake, no pointer chasing through the slab) and keeps
//! the `rq-*` ring variants comparable in the benches; the list takes the
//! bursts that would once have needed a slab-sized ring. The consumer
//! alternates between the two while both hold values, so neither starves.
//! Across the two there is no FIFO order; wakes never promised one.
//!
//! # The intrusive list
//!
//! Producers push onto a Treiber stack (`head`, compare-and-swap with
//! Release); the one consumer takes the whole stack at once (`swap` with
//! Acquire), reverses it into a private batch (oldest first) and pops from
//! that. Taking everything at once means a node is never popped from the
//! shared stack singly, so the stack has no ABA problem; the Acquire swap
//! synchronises with every push it takes (each push's CAS is a
//! read-modify-write, so later pushes continue earlier ones' release
//! sequences), and the links written before those pushes are visible to it.
//! Everything is an atomic on a `u32` index: no `unsafe`, and a contract
//! breach (two consumers) loses or repeats wakes but never touches freed
//! memory.

use super::{CachePadded, Ring, WakeRing};
use crate::kernel::atomic::{AtomicBool, AtomicU32, Ordering};

/// The end-of-list marker: no slot has this index (the slab stops one
/// short of it).
pub(crate) const NIL: u32 = u32::MAX;

/// A value with a queue link: a slot.
pub(crate) trait Linked {
    /// The link to the next entry while the value sits in a queue.
    fn link(&self) -> &AtomicU32;
}

/// Where an intrusive queue finds the link of entry `index`: the slab.
pub(crate) trait Links {
    /// The link of entry `index`. Every index pushed is in the table.
    fn link(&self, index: u32) -> &AtomicU32;
}

/// An unbounded MPSC queue of indices whose links live in the entries
/// themselves; see the [module docs](self). One consumer: only the owning
/// worker pops.
pub(crate) struct IntrusiveQueue {
    /// Producers' stack, newest first; [`NIL`] when empty.
    head: CachePadded<AtomicU32>,
    /// The consumer's batch, oldest first; [`NIL`] when empty. Touched by
    /// the consumer only (Relaxed).
    batch: AtomicU32,
}

impl Default for IntrusiveQueue {
    fn default() -> Self {
        IntrusiveQueue { head: CachePadded(AtomicU32::new(NIL)), batch: AtomicU32::new(NIL) }
    }
}

impl IntrusiveQueue {
    /// Pushes `index`, which is in no queue. Never fails, never blocks, never
    /// allocates.
    pub(crate) fn push(&self, links: &impl Links, index: u32) {
        debug_assert_ne!(index, NIL);
        let link = links.link(index);
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            link.store(head, Ordering::Relaxed);
            // Release: the consumer's Acquire swap sees the link (and what
            // the producer did before the push).
            match self.head.compare_exchange_weak(head, index, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return,
                Err(now) => head = now,
            }
        }
    }

    /// Pops the oldest index of the current batch, taking a new batch from
    /// the producers when it is empty. Consumer only.
    pub(crate) fn pop(&self, links: &impl Links) -> Option<u32> {
        let mut first = self.batch.load(Ordering::Relaxed);
        if first == NIL {
            // A plain load first: an empty queue (the common case) costs no
            // read-modify-write.
            if self.head.load(Ordering::Relaxed) == NIL {
                return None;
            }
            // Acquire: pairs with every taken push's Release.
            let mut taken = self.head.swap(NIL, Ordering::Acquire);
            // Reverse newest-first into oldest-first, reusing the links:
            // the entries are now the consumer's alone.
            while taken != NIL {
                let link = links.link(taken);
                let next = link.load(Ordering::Relaxed);
                link.store(first, Ordering::Relaxed);
                first = taken;
                taken = next;
            }
            if first == NIL {
                return None;
            }
        }
        self.batch.store(links.link(first).load(Ordering::Relaxed), Ordering::Relaxed);
        Some(first)
    }

    /// Whether the queue looks empty (a racing push may be missed).
    pub(crate) fn is_empty(&self) -> bool {
        self.batch.load(Ordering::Relaxed) == NIL && self.head.load(Ordering::Relaxed) == NIL
    }
}

/// Capacity of the ring in front of each wake and spawn queue. Values
/// beyond it wait in the intrusive list. Two under loom, so that a model
/// overflows with three pushes.
#[cfg(not(loom))]
pub const WAKE_RING_CAPACITY: usize = 1024;
/// Capacity of the ring in front of each wake and spawn queue (loom).
#[cfg(loom)]
pub const WAKE_RING_CAPACITY: usize = 2;

/// A worker's wake (or spawn) queue: a [`WakeRing`] of
/// [`WAKE_RING_CAPACITY`] with an [`IntrusiveQueue`] behind it. Multi
/// producer, one consumer; never full. See the [module docs](self).
pub(crate) struct WakeQueue {
    ring: WakeRing<u32>,
    overflow: IntrusiveQueue,
    /// Consumer only: take from the list first on the next pop.
    list_first: AtomicBool,
}

impl WakeQueue {
    /// An empty queue, or `Err` when the ring's memory cannot be had.
    pub(crate) fn try_new() -> Result<WakeQueue, super::AllocError> {
        Ok(WakeQueue {
            ring: WakeRing::try_with_capacity(WAKE_RING_CAPACITY)?,
            overflow: IntrusiveQueue::default(),
            list_first: AtomicBool::new(false),
        })
    }

    /// Pushes `index`, which is in no queue (the caller's `Queued` CAS
    /// proves it). Never fails; never allocates.
    pub(crate) fn push(&self, links: &impl Links, index: u32) {
        if let Err(index) = self.ring.push(index) {
            self.overflow.push(links, index);
        }
    }

    /// Whether both the ring and the list look empty. For the consumer:
    /// a push that finished before the call (as the caller's fences order
    /// them) is seen.
    pub(crate) fn is_empty(&self) -> bool {
        self.ring.is_empty() && self.overflow.is_empty()
    }

    /// Pops an index, or `None` when both the ring and the list look empty.
    /// Consumer only. While both hold values it alternates between them.
    pub(crate) fn pop(&self, links: &impl Links) -> Option<u32> {
        if self.list_first.load(Ordering::Relaxed) {
            if let Some(index) = self.overflow.pop(links) {
                self.list_first.store(false, Ordering::Relaxed);
                return Some(index);
            }
            return self.ring.pop();
        }
        if let Some(index) = self.ring.pop() {
            if !self.overflow.is_empty() {
                self.list_first.store(true, Ordering::Relaxed);
            }
            return Some(index);
        }
        self.overflow.pop(links)
    }
}

/// A stand-in for a slot in the tests and loom models: a link and a
/// payload that loom watches (written by its creator, read by the consumer).
#[cfg(test)]
pub(crate) mod test_node {
    use super::{Linked, Links, NIL};
    use crate::kernel::atomic::{AtomicU32, UnsafeCell};
    use alloc::vec::Vec;

    pub(crate) struct Node {
        link: AtomicU32,
        value: UnsafeCell<usize>,
    }

    impl Node {
        pub(crate) fn new(value: usize) -> Node {
            Node { link: AtomicU32::new(NIL), value: UnsafeCell::new(value) }
        }

        /// The payload. Under loom, a read not ordered after the node's
        /// creation (or last `set`) is a causality violation.
        pub(crate) fn value(&self) -> usize {
            // SAFETY: the payload is written only by `new` and by `set`,
            // whose callers own the node (it is in no queue, and no one
            // else reads it until they push it).
            self.value.with(|value| unsafe { *value })
        }

        /// Writes the payload, as a waker's state change before its push.
        ///
        /// # Safety
        ///
        /// The caller owns the node: it is in no queue and no other thread
        /// reads it until the caller pushes it.
        #[cfg(loom)]
        pub(crate) unsafe fn set(&self, value: usize) {
            // SAFETY: the caller owns the node (this fn's contract).
            self.value.with_mut(|slot| unsafe { *slot = value });
        }
    }

    impl Linked for Node {
        fn link(&self) -> &AtomicU32 {
            &self.link
        }
    }

    // SAFETY: the payload is written only by `new`, and by `set` under its
    // contract (the writer owns the node); the link is atomic.
    unsafe impl Sync for Node {}

    /// A fixed table of nodes, standing in for the slab.
    pub(crate) struct NodeTable(Vec<Node>);

    impl NodeTable {
        /// Node `index`, if the table has it.
        pub(crate) fn get(&self, index: u32) -> Option<&Node> {
            self.0.get(index as usize)
        }
    }

    impl Links for NodeTable {
        fn link(&self, index: u32) -> &AtomicU32 {
            self.0[index as usize].link()
        }
    }

    /// A table of `count` nodes whose payloads are their indices.
    pub(crate) fn table(count: usize) -> NodeTable {
        NodeTable((0..count).map(Node::new).collect())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::test_node::table;
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn the_list_is_fifo_across_batches() {
        let table = table(8);
        let queue = IntrusiveQueue::default();
        assert!(queue.is_empty());
        assert_eq!(queue.pop(&table), None);
        for index in 0..4 {
            queue.push(&table, index);
        }
        assert_eq!(queue.pop(&table), Some(0));
        // Pushed while a batch is out: they come after it.
        queue.push(&table, 4);
        queue.push(&table, 5);
        let rest: Vec<u32> = core::iter::from_fn(|| queue.pop(&table)).collect();
        assert_eq!(rest, [1, 2, 3, 4, 5]);
        assert!(queue.is_empty());
    }

    /// Far more values than the ring holds go through one queue, in bursts
    /// and one by one; every value comes out once, and a burst's overflow
    /// does not wait behind later ring values forever.
    #[test]
    fn a_wake_queue_takes_more_than_its_ring() {
        let count = if cfg!(miri) { 3 * WAKE_RING_CAPACITY / 2 } else { 10 * WAKE_RING_CAPACITY };
        let table = table(count);
        let queue = WakeQueue::try_new().expect("ring memory");
        assert!(queue.is_empty());
        for index in 0..count as u32 {
            queue.push(&table, index);
        }
        assert!(!queue.is_empty());
        let mut seen = alloc::vec![false; count];
        // Pop half, then interleave pushes of what came out with pops.
        let mut out = Vec::new();
        for _ in 0..count / 2 {
            out.push(queue.pop(&table).expect("a value is there"));
        }
        let overflowed_seen_early = out.iter().any(|&index| index as usize >= WAKE_RING_CAPACITY);
        assert!(overflowed_seen_early, "the list was served while the ring still held values");
        for index in out {
            assert!(!seen[index as usize], "{index} popped twice");
            seen[index as usize] = true;
        }
        while !queue.is_empty() {
            let index = queue.pop(&table).expect("not empty, so a value is there");
            assert!(!seen[index as usize], "{index} popped twice");
            seen[index as usize] = true;
        }
        assert_eq!(queue.pop(&table), None);
        assert!(seen.iter().all(|&s| s), "a value was lost");
    }

    /// Four producers push disjoint index ranges (each index once) while one
    /// consumer pops: every index comes out exactly once.
    #[test]
    fn a_wake_queue_under_contention_loses_and_repeats_nothing() {
        use std::thread;
        const PRODUCERS: usize = 4;
        let per_producer: usize = if cfg!(miri) { 40 } else { 20_000 };
        let total = PRODUCERS * per_producer;
        let table = table(total);
        let queue = WakeQueue::try_new().expect("ring memory");
        let mut seen = alloc::vec![false; total];
        thread::scope(|scope| {
            for producer in 0..PRODUCERS {
                let (table, queue) = (&table, &queue);
                scope.spawn(move || {
                    for i in 0..per_producer {
                        queue.push(table, (producer * per_producer + i) as u32);
                    }
                });
            }
            let mut popped = 0;
            while popped < total {
                match queue.pop(&table) {
                    Some(index) => {
                        assert_eq!(table.get(index).map(|node| node.value()), Some(index as usize));
                        assert!(!seen[index as usize], "{index} popped twice");
                        seen[index as usize] = true;
                        popped += 1;
                    }
                    None => thread::yield_now(),
                }
            }
        });
        assert_eq!(queue.pop(&table), None);
    }
}

#[cfg(all(test, loom))]
mod loom_models;
