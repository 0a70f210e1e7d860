//! Envelopes: one owned, type-erased node per item for a stackless body
//! (a message, a signal, an install, an admin command), and the intrusive
//! MPSC queue that carries them whole from any thread to the worker that
//! owns the target.
//!
//! An envelope is a node with a header (the queue link, the target pid,
//! the node's kind and where its memory comes from) and a typed payload.
//! The kind's functions are monomorphized for the payload type, so the
//! consumer delivers or drops a node without knowing that type: the
//! payload is never cloned and is dropped exactly once. What a delivery
//! gets to work with — the *context* — is chosen by a [`Family`]: a type
//! with a lifetime (the worker's driver, borrowed for one pass) named
//! without that lifetime.
//!
//! # Where a node's memory comes from
//!
//! A node is either *boxed* ([`Envelope::new`]: one allocation, freed by
//! whoever is done with it) or a *block* of a worker's
//! [`BlockCache`] ([`Envelope::new_in`]), recycled so that a worker's
//! steady flow of messages does not touch the allocator:
//!
//! - a node small enough for a size class (see `recycle.rs`: up to 256
//!   bytes, 16-aligned) sent from a worker is a block of that worker's
//!   cache; a larger one, or one sent from a thread that drives no
//!   worker, is boxed;
//! - a block delivered with the cache that made it
//!   ([`Envelope::deliver_in`] on the same worker) goes straight back to
//!   that cache: a local send allocates nothing once the cache is warm;
//! - a block delivered on another worker joins the chain that worker's
//!   cache gathers for the block's maker, pushed onto the maker's
//!   [`Home`] (a list per class) a chain at a time, which the maker takes
//!   whole into its cache when that class runs dry and when it idles: the
//!   block is never freed on another thread's heap, and the consumer pays
//!   a share of one compare-and-swap for it;
//! - a node dropped undelivered (with a queue, a held list or a runtime
//!   that drops) and a node delivered without a cache
//!   ([`Envelope::deliver`]) go to the allocator: every block is an
//!   ordinary allocation of its class's layout, so freeing one anywhere is
//!   always sound, and a home that may be gone is never touched.
//!
//! Caches and homes are bounded (see `recycle.rs`) and free what they hold
//! when dropped.

use alloc::boxed::Box;
use core::alloc::Layout;
use core::marker::PhantomData;
use core::ptr::{self, NonNull};

use crate::kernel::pid::Pid;
use crate::kernel::ring::mpsc::{Link, Mpsc};
use crate::kernel::ring::recycle::{class_of, free_block, BlockCache, Home};

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

/// The class of a node allocated alone (boxed).
const BOXED: u8 = u8::MAX;

/// The start of every envelope node.
#[repr(C)]
struct Header<F: Family> {
    link: Link,
    dest: Pid,
    kind: &'static Kind<F>,
    /// Where the node goes once delivered elsewhere: the home of the
    /// cache that made it. Null for a boxed node.
    home: *const Home,
    /// The node's block class, or [`BOXED`].
    class: u8,
}

/// Delivers a node's payload with a context, releasing the node to a
/// cache if one is given.
type DeliverFn<F> =
    for<'a, 'b, 'c> unsafe fn(NonNull<Header<F>>, &'b <F as Family>::Of<'a>, Option<&'c BlockCache>) -> bool;

/// The payload-typed functions of a node.
struct Kind<F: Family> {
    /// Delivers the payload and releases the node (to `cache`, its home
    /// or the allocator): `true`; or puts the payload back and keeps the
    /// node: `false`.
    deliver: DeliverFn<F>,
    /// Drops the payload and gives the node to the allocator.
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
    /// The block class of this node, if it is small enough to recycle.
    const CLASS: Option<u8> = class_of(Layout::new::<Node<F, P>>());
}

/// Delivers a node's payload and releases the node, or puts the payload
/// back.
///
/// # Safety
///
/// `header` heads a live `Node<F, P>` made by [`Envelope::new`] or
/// [`Envelope::new_in`], owned by the caller. If this returns `true` the
/// node is released and the caller never touches it again.
unsafe fn deliver_node<F: Family, P: Deliver<F>>(
    header: NonNull<Header<F>>,
    cx: &F::Of<'_>,
    cache: Option<&BlockCache>,
) -> bool {
    let node = header.cast::<Node<F, P>>().as_ptr();
    // SAFETY: the caller owns the live node; no reference to it is held
    // across the payload's `deliver`, which only gets the payload.
    let (dest, payload) = unsafe { ((*node).header.dest, (*node).payload.take()) };
    let Some(payload) = payload else {
        // An envelope always holds its payload between deliveries.
        // SAFETY: as above; the node is released once, here.
        unsafe { release::<F, P>(header, cache) };
        return true;
    };
    match payload.deliver(dest, cx) {
        Ok(()) => {
            // SAFETY: as above; the payload is gone (delivered); the node
            // is released once, here.
            unsafe { release::<F, P>(header, cache) };
            true
        }
        Err(payload) => {
            // SAFETY: as above; the node is still the caller's.
            unsafe { (*node).payload = Some(payload) };
            false
        }
    }
}

/// Releases a node whose payload is gone: a boxed one to the allocator;
/// a block to `cache` if it made it, else to its home if that home is of
/// `cache`'s family (kept alive by the cache), else to the allocator.
///
/// # Safety
///
/// `header` heads a live `Node<F, P>` with no payload, owned by the
/// caller, who never touches it again.
unsafe fn release<F: Family, P: Deliver<F>>(header: NonNull<Header<F>>, cache: Option<&BlockCache>) {
    // SAFETY: the caller owns the live node.
    let (home, class) = unsafe { ((*header.as_ptr()).home, (*header.as_ptr()).class) };
    if class == BOXED {
        // SAFETY: a boxed `Node<F, P>` (made by `new`), freed once.
        drop(unsafe { Box::from_raw(header.cast::<Node<F, P>>().as_ptr()) });
        return;
    }
    // The header holds nothing to drop and the payload is `None`: the
    // block can be reused as it is. Blocks of one class are alike, so any
    // live home of the family may take it.
    match cache {
        // SAFETY: a block of `class` made by this cache, given up.
        Some(cache) if ptr::eq(cache.home(), home) => unsafe { cache.put(header.cast(), class) },
        Some(cache) => match cache.family_index(home) {
            // SAFETY: the block starts with its link and was made with
            // `class` by a cache of that home, one of `cache`'s family.
            Some(home) => unsafe { cache.send_home(home, header.cast(), class) },
            // SAFETY: a block of `class`, holding nothing to drop.
            None => unsafe { free_block(header.cast(), class) },
        },
        // SAFETY: a block of `class`, holding nothing to drop.
        None => unsafe { free_block(header.cast(), class) },
    }
}

/// Drops a node's payload and gives the node to the allocator, whatever
/// made it (its home is never touched: it may be gone).
///
/// # Safety
///
/// `header` heads a live `Node<F, P>` made by [`Envelope::new`] or
/// [`Envelope::new_in`] and owned by the caller, who never touches it
/// again.
unsafe fn free_node<F: Family, P: Deliver<F>>(header: NonNull<Header<F>>) {
    let node = header.cast::<Node<F, P>>().as_ptr();
    // SAFETY: the caller owns the live node.
    let class = unsafe { (*node).header.class };
    if class == BOXED {
        // SAFETY: per the contract: a boxed `Node<F, P>`, freed once.
        drop(unsafe { Box::from_raw(node) });
        return;
    }
    // SAFETY: the node is live and ours; its payload is dropped once,
    // here, and the block then freed with its class's layout.
    unsafe {
        ptr::drop_in_place(node);
        free_block(header.cast(), class);
    }
}

/// An owned envelope: a payload on its way to `dest`.
pub(crate) struct Envelope<F: Family> {
    node: NonNull<Header<F>>,
    _owns: PhantomData<Box<Header<F>>>,
}

// SAFETY: the node holds a `Send` payload (`Deliver: Send`), a pid, a
// `'static` kind and a pointer to a home that any thread may give back
// to; the envelope owns it alone.
unsafe impl<F: Family> Send for Envelope<F> {}

impl<F: Family> Envelope<F> {
    /// Boxes `payload` for `dest`: the one allocation of a send.
    pub(crate) fn new<P: Deliver<F>>(dest: Pid, payload: P) -> Envelope<F> {
        let node = Box::new(Node::<F, P> {
            header: Header {
                link: Link::new(),
                dest,
                kind: Node::<F, P>::KIND,
                home: ptr::null(),
                class: BOXED,
            },
            payload: Some(payload),
        });
        Envelope { node: NonNull::from(Box::leak(node)).cast(), _owns: PhantomData }
    }

    /// Puts `payload` for `dest` in a block of `cache` (a recycled one in
    /// steady state), or boxes it if it is too large for a block.
    pub(crate) fn new_in<P: Deliver<F>>(cache: &BlockCache, dest: Pid, payload: P) -> Envelope<F> {
        let Some(class) = Node::<F, P>::CLASS else { return Envelope::new(dest, payload) };
        let block = cache.take(class).cast::<Node<F, P>>();
        let node = Node::<F, P> {
            header: Header {
                link: Link::new(),
                dest,
                kind: Node::<F, P>::KIND,
                home: ptr::from_ref(cache.home()),
                class,
            },
            payload: Some(payload),
        };
        // SAFETY: a block of `class` is large and aligned enough for this
        // node (`class_of`), and ours.
        unsafe { block.as_ptr().write(node) };
        Envelope { node: block.cast(), _owns: PhantomData }
    }

    /// The target.
    pub(crate) fn dest(&self) -> Pid {
        // SAFETY: we own the live node.
        unsafe { self.node.as_ref() }.dest
    }

    /// Delivers the payload with `cx`; `Err` gives the envelope back, to
    /// be held and delivered again. A delivered node goes to the
    /// allocator.
    pub(crate) fn deliver(self, cx: &F::Of<'_>) -> Result<(), Envelope<F>> {
        self.deliver_with(cx, None)
    }

    /// [`deliver`](Self::deliver) on a worker with `cache`: a delivered
    /// node goes back to `cache` if it made it, else to the home of the
    /// cache that did if that home is of `cache`'s family, else to the
    /// allocator.
    pub(crate) fn deliver_in(self, cx: &F::Of<'_>, cache: &BlockCache) -> Result<(), Envelope<F>> {
        self.deliver_with(cx, Some(cache))
    }

    fn deliver_with(self, cx: &F::Of<'_>, cache: Option<&BlockCache>) -> Result<(), Envelope<F>> {
        let node = self.node;
        // Ownership passes to `deliver` below (which releases the node),
        // or back to the envelope returned: never both.
        core::mem::forget(self);
        // SAFETY: we own the live node.
        let kind = unsafe { node.as_ref() }.kind;
        // SAFETY: `kind` was made for this node's payload type, and we own
        // the node.
        if unsafe { (kind.deliver)(node, cx, cache) } {
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

    /// A payload too large for any block class.
    struct Big([u64; 64], Arc<AtomicUsize>);
    impl Drop for Big {
        fn drop(&mut self) {
            self.1.fetch_add(1, Ordering::Relaxed);
        }
    }
    impl Deliver<Test> for Big {
        fn deliver(self, dest: Pid, cx: &Log<'_>) -> Result<(), Self> {
            cx.seen.borrow_mut().push((dest.index(), self.0[63]));
            Ok(())
        }
    }

    /// The caches of a runtime of `N` workers (one family of homes).
    fn workers<const N: usize>() -> [BlockCache; N] {
        let homes: Arc<[Home]> = Arc::from(core::array::from_fn::<Home, N, _>(|_| Home::new()));
        core::array::from_fn(|index| BlockCache::new(homes.clone(), index))
    }

    #[test]
    fn a_local_delivery_reuses_its_block() {
        let [cache] = workers();
        let drops = Arc::new(AtomicUsize::new(0));
        let seen = RefCell::new(Vec::new());
        let cx = Log { seen: &seen, accept: true };
        let class = Node::<Test, Counted>::CLASS.expect("a small node has a class");
        let first = Envelope::<Test>::new_in(&cache, Pid::from_parts(1, 1), Counted(1, drops.clone()));
        let address = first.node;
        assert!(first.deliver_in(&cx, &cache).is_ok());
        assert_eq!(cache.len(class), 1, "the block went back to the cache");
        let second = Envelope::<Test>::new_in(&cache, Pid::from_parts(2, 1), Counted(2, drops.clone()));
        assert_eq!(second.node, address, "and was reused");
        assert_eq!(cache.len(class), 0);
        // A held delivery keeps the block; the payload is dropped once.
        let held = second.deliver_in(&Log { seen: &seen, accept: false }, &cache);
        let held = held.expect_err("refused: given back");
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        drop(held);
        assert_eq!(drops.load(Ordering::Relaxed), 2, "an undelivered block drops its payload once");
        assert_eq!(cache.len(class), 0, "an undelivered block goes to the allocator");
        assert_eq!(*seen.borrow(), [(1, 1)]);
        drop(cache);
    }

    #[test]
    fn a_delivery_on_another_worker_sends_the_block_home() {
        let [cache_a, cache_b] = workers();
        let [stranger] = workers();
        let drops = Arc::new(AtomicUsize::new(0));
        let seen = RefCell::new(Vec::new());
        let cx = Log { seen: &seen, accept: true };
        let class = Node::<Test, Counted>::CLASS.expect("a small node has a class");
        let queue = EnvelopeQueue::<Test>::new();
        for i in 0..4 {
            queue.push(Envelope::new_in(
                &cache_a,
                Pid::from_parts(i, 1),
                Counted(u64::from(i), drops.clone()),
            ));
        }
        // Worker B consumes A's envelopes.
        // SAFETY: one consumer.
        while let Some(envelope) = unsafe { queue.pop() } {
            assert!(envelope.deliver_in(&cx, &cache_b).is_ok());
        }
        assert_eq!(drops.load(Ordering::Relaxed), 4, "each payload dropped once");
        assert_eq!(cache_b.len(class), 0, "B keeps none of A's blocks");
        assert_eq!(cache_a.len(class), 0, "they wait in B's chain for A's home");
        cache_a.trim();
        assert_eq!(cache_a.len(class), 0, "a chain shorter than a batch waits for B's flush");
        cache_b.flush();
        assert_eq!(cache_a.len(class), 0, "then in A's home");
        cache_a.trim();
        assert_eq!(cache_a.len(class), 4, "A takes them back");
        // A block of another runtime's worker goes to the allocator: its
        // home is not one B's cache keeps alive.
        let foreign = Envelope::<Test>::new_in(&stranger, Pid::from_parts(8, 1), Counted(8, drops.clone()));
        assert!(foreign.deliver_in(&cx, &cache_b).is_ok());
        assert_eq!(cache_b.len(class), 0, "B keeps no stranger's block");
        cache_b.flush();
        stranger.trim();
        assert_eq!(stranger.len(class), 0, "nor does it send it to a home it cannot vouch for");
        // A large payload is boxed and freed, never cached.
        let big = Envelope::<Test>::new_in(&cache_a, Pid::from_parts(9, 1), Big([7; 64], drops.clone()));
        assert!(big.deliver_in(&cx, &cache_b).is_ok());
        assert_eq!(drops.load(Ordering::Relaxed), 6);
        drop(queue);
        drop((cache_a, cache_b, stranger));
    }

    #[test]
    fn blocks_in_flight_when_everything_drops_are_freed_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let [cache] = workers();
        let queue = EnvelopeQueue::<Test>::new();
        for i in 0..3 {
            queue.push(Envelope::new_in(&cache, Pid::from_parts(i, 1), Counted(u64::from(i), drops.clone())));
        }
        // The home and cache go first, as they may when a runtime drops.
        drop(cache);
        drop(queue);
        assert_eq!(drops.load(Ordering::Relaxed), 3);
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
