//! An intrusive, unbounded, multi-producer single-consumer list: the
//! per-worker ingress queues of handler actors carry their envelopes
//! through it.
//!
//! Producers (any thread: another worker, a process, a plain thread) link
//! a node in with one `swap` and one store; the owning worker's pass is the
//! only consumer. No lock, no allocation beyond the node the sender has
//! already made (the envelope itself), and per-producer FIFO: a producer's
//! pushes are linked in its program order.
//!
//! The list is the one of Dmitry Vyukov's intrusive MPSC design: `head` is
//! where producers append, `tail` where the consumer takes, and a stub node
//! lets the list never be empty in memory. Between a producer's `swap` and
//! its link store the list is briefly cut: the consumer then sees the
//! nodes before the cut only and reports empty. That is why every
//! producer notifies the consumer *after* its push returns: a consumer
//! that went idle on the cut is woken once the link is in place.

use alloc::boxed::Box;
use core::ptr::{self, NonNull};

use super::CachePadded;
use crate::kernel::atomic::{AtomicPtr, Ordering, UnsafeCell};

/// The link every queued node starts with.
#[derive(Debug)]
pub(crate) struct Link {
    next: AtomicPtr<Link>,
}

impl Link {
    pub(crate) fn new() -> Link {
        Link { next: AtomicPtr::new(ptr::null_mut()) }
    }

    /// A link to `next`, for lists other than an [`Mpsc`] that thread
    /// nodes through their links.
    pub(crate) fn to(next: *mut Link) -> Link {
        Link { next: AtomicPtr::new(next) }
    }

    /// The next node, as its owner last set it (`Relaxed`: publishing the
    /// list is the job of whoever hands it over).
    pub(crate) fn next(&self) -> *mut Link {
        self.next.load(Ordering::Relaxed)
    }

    /// Sets the next node (`Relaxed`, as [`next`](Self::next)).
    pub(crate) fn set_next(&self, next: *mut Link) {
        self.next.store(next, Ordering::Relaxed);
    }
}

/// An intrusive MPSC queue of nodes that begin with a [`Link`].
///
/// The producers' end and the consumer's live on cache lines of their own:
/// every push swaps `head` and every pop writes `tail`, and on one line
/// each would take the line from the other side, once per message.
pub(crate) struct Mpsc {
    /// Last node pushed (producers swap themselves in here).
    head: CachePadded<AtomicPtr<Link>>,
    /// Next node to take; the consumer's alone.
    tail: UnsafeCell<*mut Link>,
    /// The stub node, boxed so its address is stable.
    stub: NonNull<Link>,
}

// SAFETY: producers touch only `head` and the `next` links (atomics); the
// consumer side (`tail`) is reached only through `pop`, whose contract
// allows one consumer at a time. Nodes are handed over whole.
unsafe impl Send for Mpsc {}
// SAFETY: as above.
unsafe impl Sync for Mpsc {}

impl Mpsc {
    pub(crate) fn new() -> Mpsc {
        let stub = NonNull::from(Box::leak(Box::new(Link::new())));
        Mpsc { head: CachePadded(AtomicPtr::new(stub.as_ptr())), tail: UnsafeCell::new(stub.as_ptr()), stub }
    }

    /// Appends `node`; the queue owns it until `pop` hands it back.
    ///
    /// # Safety
    ///
    /// `node` points to a live `Link` at the start of a node that stays
    /// allocated and untouched by the caller until popped, and is in no
    /// queue.
    pub(crate) unsafe fn push(&self, node: NonNull<Link>) {
        // SAFETY: per this fn's contract.
        let prev = unsafe { self.begin_push(node) };
        // SAFETY: `prev` came from `begin_push` of this node.
        unsafe { Self::finish_push(prev, node) };
    }

    /// First half of a push: swaps `node` in as the newest. Until
    /// [`finish_push`](Self::finish_push) the list is cut before it.
    ///
    /// # Safety
    ///
    /// As [`push`](Self::push).
    pub(crate) unsafe fn begin_push(&self, node: NonNull<Link>) -> NonNull<Link> {
        // SAFETY: the node is ours until the swap publishes it.
        unsafe { node.as_ref() }.next.store(ptr::null_mut(), Ordering::Relaxed);
        // AcqRel: Release publishes the node's contents to whoever reaches
        // it through `head`; Acquire orders us after the previous pusher.
        let prev = self.head.swap(node.as_ptr(), Ordering::AcqRel);
        // SAFETY: `head` only ever holds live node or stub pointers.
        unsafe { NonNull::new_unchecked(prev) }
    }

    /// Second half of a push: links `node` after `prev`.
    ///
    /// # Safety
    ///
    /// `prev` is what `begin_push(node)` returned, and this is its only
    /// call.
    pub(crate) unsafe fn finish_push(prev: NonNull<Link>, node: NonNull<Link>) {
        // Release: the consumer that Acquires this link sees the node.
        // SAFETY: `prev` stays allocated until the consumer has moved past
        // it, which it cannot before this store links the rest.
        unsafe { prev.as_ref() }.next.store(node.as_ptr(), Ordering::Release);
    }

    /// Takes the oldest node, or `None` if the queue is empty — or cut by a
    /// push in progress, whose producer notifies the consumer afterwards.
    ///
    /// # Safety
    ///
    /// One consumer at a time.
    pub(crate) unsafe fn pop(&self) -> Option<NonNull<Link>> {
        let stub = self.stub.as_ptr();
        self.tail.with_mut(|tail_slot| {
            // SAFETY: the consumer's own field (one consumer at a time).
            let tail_slot = unsafe { &mut *tail_slot };
            let mut tail = *tail_slot;
            // SAFETY: `tail` is the stub or a node pushed and not yet
            // returned; both are live.
            let mut next = unsafe { &*tail }.next.load(Ordering::Acquire);
            if tail == stub {
                if next.is_null() {
                    return None;
                }
                *tail_slot = next;
                tail = next;
                // SAFETY: as above.
                next = unsafe { &*tail }.next.load(Ordering::Acquire);
            }
            if !next.is_null() {
                *tail_slot = next;
                return NonNull::new(tail);
            }
            if tail != self.head.load(Ordering::Acquire) {
                // A push is between its swap and its link: cut.
                return None;
            }
            // `tail` is the last node: put the stub behind it so it can go.
            // SAFETY: the stub is in no queue (the tail moved past it).
            unsafe { self.push(self.stub) };
            // SAFETY: as above.
            next = unsafe { &*tail }.next.load(Ordering::Acquire);
            if next.is_null() {
                // A producer swapped in between: it will link after `tail`.
                return None;
            }
            *tail_slot = next;
            NonNull::new(tail)
        })
    }

    /// Whether nothing is queued (or a push is cut half-way). Consumer only.
    ///
    /// # Safety
    ///
    /// One consumer at a time.
    pub(crate) unsafe fn is_empty(&self) -> bool {
        let stub = self.stub.as_ptr();
        self.tail.with(|tail| {
            // SAFETY: the consumer's own field; the node is live.
            let tail = unsafe { *tail };
            // SAFETY: `tail` is live (see `pop`).
            tail == stub && unsafe { &*tail }.next.load(Ordering::Acquire).is_null()
        })
    }
}

impl Drop for Mpsc {
    fn drop(&mut self) {
        // The owner drains and frees the nodes first (it knows their
        // type); only the stub is ours.
        // SAFETY: made by `Box::leak` in `new`, freed only here.
        drop(unsafe { Box::from_raw(self.stub.as_ptr()) });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[repr(C)]
    struct Node {
        link: Link,
        value: u32,
    }

    fn node(value: u32) -> NonNull<Link> {
        NonNull::from(Box::leak(Box::new(Node { link: Link::new(), value }))).cast()
    }

    fn take(q: &Mpsc) -> Option<u32> {
        // SAFETY: one consumer (the test); every node is a boxed `Node`.
        unsafe { q.pop().map(|p| Box::from_raw(p.cast::<Node>().as_ptr()).value) }
    }

    #[test]
    fn fifo_through_the_stub_and_back() {
        let q = Mpsc::new();
        // SAFETY: the test is the only consumer.
        assert!(unsafe { q.is_empty() });
        assert_eq!(take(&q), None);
        for round in 0..3 {
            for i in 0..5 {
                // SAFETY: fresh nodes.
                unsafe { q.push(node(round * 10 + i)) };
            }
            let got: Vec<u32> = core::iter::from_fn(|| take(&q)).collect();
            assert_eq!(got, (0..5).map(|i| round * 10 + i).collect::<Vec<_>>());
            // SAFETY: the test is the only consumer.
            assert!(unsafe { q.is_empty() });
        }
    }

    #[test]
    fn a_push_behind_a_cut_one_waits_for_it() {
        let q = Mpsc::new();
        let (a, b) = (node(1), node(2));
        // SAFETY: fresh nodes; `a` is completed below.
        let prev = unsafe { q.begin_push(a) };
        // SAFETY: fresh node.
        unsafe { q.push(b) };
        assert_eq!(take(&q), None, "b sits behind a's cut");
        // SAFETY: `prev` from begin_push(a).
        unsafe { Mpsc::finish_push(prev, a) };
        assert_eq!(take(&q), Some(1));
        assert_eq!(take(&q), Some(2));
        assert_eq!(take(&q), None);
    }

    #[test]
    fn a_cut_push_is_seen_once_linked() {
        let q = Mpsc::new();
        let a = node(1);
        // SAFETY: fresh node; finish_push below completes it.
        let prev = unsafe { q.begin_push(a) };
        assert_eq!(take(&q), None, "a cut push is not visible yet");
        // SAFETY: `prev` from begin_push(a).
        unsafe { Mpsc::finish_push(prev, a) };
        assert_eq!(take(&q), Some(1));
        assert_eq!(take(&q), None);
    }
}

/// Loom models: producers depositing while the consumer drains and goes
/// idle. The consumer's park is modelled by a permit, as the platform's
/// park token: a producer sets it after its push with a read-modify-write
/// (the token's `swap`, so every notify is in one release sequence); the consumer, finding nothing, takes
/// the permit and drains again, or — with no permit — would sleep until
/// the next one. At the end, a consumer that went to sleep with envelopes
/// still queued must have a permit waiting (it would be woken): otherwise
/// a wake was lost. No envelope may come out twice or be lost.
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use crate::kernel::atomic::AtomicBool;
    use loom::sync::Arc;
    use loom::thread;

    #[repr(C)]
    struct Node {
        link: Link,
        value: u32,
    }

    fn node(value: u32) -> NonNull<Link> {
        NonNull::from(Box::leak(Box::new(Node { link: Link::new(), value }))).cast()
    }

    /// Two producers, one consumer. `notify_early`: the broken protocol
    /// that wakes the consumer between the swap and the link.
    fn model(notify_early: bool) {
        loom::model(move || {
            let q = Arc::new(Mpsc::new());
            let permit = Arc::new(AtomicBool::new(false));
            let producers: alloc::vec::Vec<_> = (0..2u32)
                .map(|p| {
                    let (q, permit) = (q.clone(), permit.clone());
                    thread::spawn(move || {
                        let n = node(p);
                        if notify_early {
                            // SAFETY: fresh node, completed below.
                            let prev = unsafe { q.begin_push(n) };
                            let _ = permit.swap(true, Ordering::Release);
                            // SAFETY: `prev` from begin_push(n).
                            unsafe { Mpsc::finish_push(prev, n) };
                        } else {
                            // SAFETY: fresh node.
                            unsafe { q.push(n) };
                            let _ = permit.swap(true, Ordering::Release);
                        }
                    })
                })
                .collect();
            let mut seen = [false; 2];
            let mut got = 0;
            loop {
                // SAFETY: this thread is the only consumer.
                while let Some(p) = unsafe { q.pop() } {
                    // SAFETY: every node is a boxed `Node`.
                    let v = unsafe { Box::from_raw(p.cast::<Node>().as_ptr()) }.value;
                    assert!(!seen[v as usize], "an envelope came out twice");
                    seen[v as usize] = true;
                    got += 1;
                }
                if got == 2 || !permit.swap(false, Ordering::AcqRel) {
                    break;
                }
            }
            for p in producers {
                p.join().unwrap();
            }
            if got < 2 {
                // Asleep with work queued: a permit must be waiting.
                assert!(
                    permit.load(Ordering::Acquire),
                    "the consumer sleeps with an envelope queued: a lost wake (took {got}: {seen:?})"
                );
                // (Woken, it drains the rest.)
                // SAFETY: the only consumer; producers are done.
                while let Some(p) = unsafe { q.pop() } {
                    // SAFETY: every node is a boxed `Node`.
                    drop(unsafe { Box::from_raw(p.cast::<Node>().as_ptr()) });
                    got += 1;
                }
            }
            assert_eq!(got, 2, "an envelope was lost");
        });
    }

    #[test]
    fn deposit_racing_drain_and_idle_loses_nothing() {
        model(false);
    }

    /// The model fails when the wake comes before the link.
    #[test]
    #[should_panic(expected = "lost wake")]
    fn waking_before_linking_loses_a_wake() {
        model(true);
    }
}
