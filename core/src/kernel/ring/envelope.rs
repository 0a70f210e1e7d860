//! Envelopes: one owned, type-erased allocation per item for a stackless
//! body (a message, a signal, an install, an admin command), and the
//! intrusive MPSC queue that carries them whole from any thread to the
//! worker that owns the target.
//!
//! An envelope is a node with a header (the queue link, the target pid and
//! the node's kind) and a typed payload. The kind's functions are
//! monomorphized for the payload type, so the consumer delivers or drops
//! a node without knowing that type: the payload is never cloned and is
//! dropped exactly once. What a delivery gets to work with — the
//! *context* — is chosen by a [`Family`]: a type with a lifetime (the
//! worker's driver, borrowed for one pass) named without that lifetime.

use alloc::boxed::Box;
use core::marker::PhantomData;
use core::ptr::NonNull;

use crate::kernel::pid::Pid;
use crate::kernel::ring::mpsc::{Link, Mpsc};

/// Names the context a delivery runs with, for every lifetime of it.
pub(crate) trait Family: 'static {
    /// The context, borrowed for `'a`.
    type Of<'a>;
}

/// What the consumer does with one envelope's payload.
pub(crate) trait Deliver<F: Family>: Send + Sized + 'static {
    /// Hands the payload over. `Err` gives it back, to be held and
    /// delivered again later (its target is not ready yet).
    fn deliver(self, dest: Pid, cx: &F::Of<'_>) -> Result<(), Self>;
}

/// The start of every envelope node.
#[repr(C)]
struct Header<F: Family> {
    link: Link,
    dest: Pid,
    kind: &'static Kind<F>,
}

/// The payload-typed functions of a node.
struct Kind<F: Family> {
    /// Delivers the payload and frees the node: `true`; or puts the
    /// payload back and keeps the node: `false`.
    deliver: for<'a, 'b> unsafe fn(NonNull<Header<F>>, &'b F::Of<'a>) -> bool,
    /// Frees the node and its payload.
    free: unsafe fn(NonNull<Header<F>>),
}

#[repr(C)]
struct Node<F: Family, P> {
    header: Header<F>,
    /// `None` only while a delivery has taken it.
    payload: Option<P>,
}

impl<F: Family, P: Deliver<F>> Node<F, P> {
    const KIND: &'static Kind<F> = &Kind { deliver: deliver_node::<F, P>, free: free_node::<F, P> };
}

/// Delivers a node's payload and frees the node, or puts the payload back.
///
/// # Safety
///
/// `header` heads a live `Node<F, P>` made by [`Envelope::new`], owned by
/// the caller; if this returns `true` the node is freed and the caller
/// never touches it again.
unsafe fn deliver_node<F: Family, P: Deliver<F>>(header: NonNull<Header<F>>, cx: &F::Of<'_>) -> bool {
    let node = header.cast::<Node<F, P>>().as_ptr();
    // SAFETY: the caller owns the live node; no reference to it is held
    // across the payload's `deliver`, which only gets the payload.
    let (dest, payload) = unsafe { ((*node).header.dest, (*node).payload.take()) };
    let Some(payload) = payload else {
        // An envelope always holds its payload between deliveries.
        // SAFETY: as above; the node is freed once, here.
        unsafe { free_node::<F, P>(header) };
        return true;
    };
    match payload.deliver(dest, cx) {
        Ok(()) => {
            // SAFETY: as above; the node is freed once, here.
            unsafe { free_node::<F, P>(header) };
            true
        }
        Err(payload) => {
            // SAFETY: as above; the node is still the caller's.
            unsafe { (*node).payload = Some(payload) };
            false
        }
    }
}

/// Frees a node and what it still holds.
///
/// # Safety
///
/// `header` heads a live `Node<F, P>` made by [`Envelope::new`] and owned
/// by the caller, who never touches it again.
unsafe fn free_node<F: Family, P: Deliver<F>>(header: NonNull<Header<F>>) {
    // SAFETY: per the contract: a boxed `Node<F, P>`, freed once.
    drop(unsafe { Box::from_raw(header.cast::<Node<F, P>>().as_ptr()) });
}

/// An owned envelope: a payload on its way to `dest`.
pub(crate) struct Envelope<F: Family> {
    node: NonNull<Header<F>>,
    _owns: PhantomData<Box<Header<F>>>,
}

// SAFETY: the node holds a `Send` payload (`Deliver: Send`), a pid and a
// `'static` kind; the envelope owns it alone.
unsafe impl<F: Family> Send for Envelope<F> {}

impl<F: Family> Envelope<F> {
    /// Boxes `payload` for `dest`: the one allocation of a send.
    pub(crate) fn new<P: Deliver<F>>(dest: Pid, payload: P) -> Envelope<F> {
        let node = Box::new(Node::<F, P> {
            header: Header { link: Link::new(), dest, kind: Node::<F, P>::KIND },
            payload: Some(payload),
        });
        Envelope { node: NonNull::from(Box::leak(node)).cast(), _owns: PhantomData }
    }

    /// The target.
    pub(crate) fn dest(&self) -> Pid {
        // SAFETY: we own the live node.
        unsafe { self.node.as_ref() }.dest
    }

    /// Delivers the payload with `cx`; `Err` gives the envelope back, to
    /// be held and delivered again.
    pub(crate) fn deliver(self, cx: &F::Of<'_>) -> Result<(), Envelope<F>> {
        let node = self.node;
        // Ownership passes to `deliver` below (which frees the node), or
        // back to the envelope returned: never both.
        core::mem::forget(self);
        // SAFETY: we own the live node.
        let kind = unsafe { node.as_ref() }.kind;
        // SAFETY: `kind` was made for this node's payload type, and we own
        // the node.
        if unsafe { (kind.deliver)(node, cx) } {
            Ok(())
        } else {
            Err(Envelope { node, _owns: PhantomData })
        }
    }
}

impl<F: Family> Drop for Envelope<F> {
    fn drop(&mut self) {
        // SAFETY: we own the live node.
        let kind = unsafe { self.node.as_ref() }.kind;
        // SAFETY: `kind` matches the node; the envelope is not used again.
        unsafe { (kind.free)(self.node) };
    }
}

/// An unbounded MPSC queue of envelopes: any thread pushes, one consumer
/// pops. Per producer, envelopes come out in the order they went in.
pub(crate) struct EnvelopeQueue<F: Family> {
    list: Mpsc,
    _holds: PhantomData<fn() -> Envelope<F>>,
}

impl<F: Family> EnvelopeQueue<F> {
    pub(crate) fn new() -> EnvelopeQueue<F> {
        EnvelopeQueue { list: Mpsc::new(), _holds: PhantomData }
    }

    /// Appends `envelope`. The consumer must be told afterwards (it may
    /// have found the queue empty while the push was half done).
    pub(crate) fn push(&self, envelope: Envelope<F>) {
        let link = envelope.node.cast::<Link>();
        core::mem::forget(envelope);
        // SAFETY: the header (and so the link) starts the node, which is in
        // no queue; the queue owns it until `pop` hands it back.
        unsafe { self.list.push(link) };
    }

    /// Takes the oldest envelope.
    ///
    /// # Safety
    ///
    /// The caller is the queue's one consumer: no other `pop` or
    /// `is_empty` of this queue runs at the same time.
    pub(crate) unsafe fn pop(&self) -> Option<Envelope<F>> {
        // SAFETY: one consumer (the contract); every node was pushed by
        // `push` and begins with an envelope header.
        unsafe { self.list.pop() }.map(|link| Envelope { node: link.cast(), _owns: PhantomData })
    }

    /// Whether nothing is queued (or a push is half done).
    ///
    /// # Safety
    ///
    /// As [`pop`](Self::pop).
    pub(crate) unsafe fn is_empty(&self) -> bool {
        // SAFETY: one consumer (the contract).
        unsafe { self.list.is_empty() }
    }
}

impl<F: Family> Drop for EnvelopeQueue<F> {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no producer or consumer is left.
        while let Some(envelope) = unsafe { self.pop() } {
            drop(envelope);
        }
    }
}

/// Delivery, holding back, drop-once and queueing of envelopes, without a
/// runtime (run under miri too).
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use alloc::sync::Arc;
    use alloc::vec::Vec;
    use core::cell::RefCell;
    use core::sync::atomic::{AtomicUsize, Ordering};

    /// The test's context: a log of deliveries and whether targets accept.
    struct Log<'a> {
        seen: &'a RefCell<Vec<(u32, u64)>>,
        accept: bool,
    }
    struct Test;
    impl Family for Test {
        type Of<'a> = Log<'a>;
    }

    /// Counts its drops.
    struct Counted(u64, Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.1.fetch_add(1, Ordering::Relaxed);
        }
    }
    impl Deliver<Test> for Counted {
        fn deliver(self, dest: Pid, cx: &Log<'_>) -> Result<(), Self> {
            if !cx.accept {
                return Err(self);
            }
            cx.seen.borrow_mut().push((dest.index(), self.0));
            Ok(())
        }
    }
    /// A second payload type in the same queue.
    struct Word(&'static str);
    impl Deliver<Test> for Word {
        fn deliver(self, dest: Pid, cx: &Log<'_>) -> Result<(), Self> {
            cx.seen.borrow_mut().push((dest.index(), self.0.len() as u64));
            Ok(())
        }
    }

    #[test]
    fn a_held_envelope_is_delivered_later_and_dropped_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let seen = RefCell::new(Vec::new());
        let envelope = Envelope::<Test>::new(Pid::from_parts(4, 1), Counted(9, drops.clone()));
        assert_eq!(envelope.dest(), Pid::from_parts(4, 1));
        let held = envelope.deliver(&Log { seen: &seen, accept: false }).expect_err("refused: given back");
        assert_eq!(drops.load(Ordering::Relaxed), 0, "a held payload is not dropped");
        assert!(held.deliver(&Log { seen: &seen, accept: true }).is_ok());
        assert_eq!(*seen.borrow(), [(4, 9)]);
        assert_eq!(drops.load(Ordering::Relaxed), 1, "delivered, then dropped once");
    }

    #[test]
    fn an_undelivered_envelope_drops_its_payload_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        drop(Envelope::<Test>::new(Pid::from_parts(1, 1), Counted(1, drops.clone())));
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        let queue = EnvelopeQueue::<Test>::new();
        for i in 0..3 {
            queue.push(Envelope::new(Pid::from_parts(i, 1), Counted(u64::from(i), drops.clone())));
        }
        drop(queue);
        assert_eq!(drops.load(Ordering::Relaxed), 4, "a dropped queue drops what it holds");
    }

    #[test]
    fn queued_envelopes_of_mixed_payloads_come_out_in_order() {
        let drops = Arc::new(AtomicUsize::new(0));
        let seen = RefCell::new(Vec::new());
        let queue = EnvelopeQueue::<Test>::new();
        // SAFETY: the test is the one consumer.
        assert!(unsafe { queue.is_empty() });
        queue.push(Envelope::new(Pid::from_parts(1, 1), Counted(10, drops.clone())));
        queue.push(Envelope::new(Pid::from_parts(2, 1), Word("four")));
        queue.push(Envelope::new(Pid::from_parts(3, 1), Counted(30, drops.clone())));
        let cx = Log { seen: &seen, accept: true };
        // SAFETY: as above.
        while let Some(envelope) = unsafe { queue.pop() } {
            assert!(envelope.deliver(&cx).is_ok());
        }
        assert_eq!(*seen.borrow(), [(1, 10), (2, 4), (3, 30)]);
        assert_eq!(drops.load(Ordering::Relaxed), 2);
    }

    /// Producers on several threads, one consumer: every envelope arrives
    /// once, each producer's in its order.
    #[test]
    fn producers_on_threads_lose_nothing() {
        extern crate std;
        let producers: u32 = 3;
        let each: u32 = if cfg!(miri) { 20 } else { 2_000 };
        let drops = Arc::new(AtomicUsize::new(0));
        let queue = Arc::new(EnvelopeQueue::<Test>::new());
        let threads: Vec<_> = (0..producers)
            .map(|p| {
                let queue = queue.clone();
                let drops = drops.clone();
                std::thread::spawn(move || {
                    for i in 0..each {
                        queue
                            .push(Envelope::new(Pid::from_parts(p, 1), Counted(u64::from(i), drops.clone())));
                    }
                })
            })
            .collect();
        let seen = RefCell::new(Vec::new());
        let cx = Log { seen: &seen, accept: true };
        let total = (producers * each) as usize;
        let mut got = 0;
        while got < total {
            // SAFETY: this thread is the one consumer.
            match unsafe { queue.pop() } {
                Some(envelope) => {
                    assert!(envelope.deliver(&cx).is_ok());
                    got += 1;
                }
                None => std::thread::yield_now(),
            }
        }
        for t in threads {
            t.join().unwrap();
        }
        let seen = seen.into_inner();
        for p in 0..producers {
            let mine: Vec<u64> = seen.iter().filter(|(d, _)| *d == p).map(|(_, v)| *v).collect();
            assert_eq!(mine, (0..u64::from(each)).collect::<Vec<_>>(), "producer {p} in order, once each");
        }
        assert_eq!(drops.load(Ordering::Relaxed), total);
    }
}
