//! Envelopes: one allocation per message, moved whole from the sender to
//! the worker that owns the target, through `pending_local` or a worker's
//! ingress queue.
//!
//! An envelope is a node with a [`Header`] (the queue link, the target
//! pid and the node's kind) and a typed payload. The kind's functions are
//! monomorphized for the payload type, so the worker delivers or drops a
//! node without knowing that type: the payload is type-erased, never
//! cloned, and dropped exactly once.

use alloc::boxed::Box;
use core::ptr::NonNull;

use crate::actor::system::Local;
use crate::kernel::pid::Pid;
use crate::kernel::ring::mpsc::{Link, Mpsc};
use crate::kernel::runtime::Shared;

/// What a worker does with one envelope's payload.
pub(crate) trait Payload: Send + Sized + 'static {
    /// Hands the payload over on worker `local` (its driver, outside any
    /// process). `Err` gives it back to be held and retried on a later
    /// pass (its target is not installed yet).
    fn deliver(self, dest: Pid, local: &Local, shared: &Shared) -> Result<(), Self>;
}

/// The start of every envelope node.
#[repr(C)]
pub(crate) struct Header {
    link: Link,
    dest: Pid,
    kind: &'static Kind,
}

/// The payload-typed functions of a node.
struct Kind {
    /// Delivers the payload; `false` if it was put back to be held.
    deliver: unsafe fn(NonNull<Header>, &Local, &Shared) -> bool,
    /// Frees the node (and its payload, if still there).
    free: unsafe fn(NonNull<Header>),
}

#[repr(C)]
struct Node<P> {
    header: Header,
    /// `None` once delivered.
    payload: Option<P>,
}

impl<P: Payload> Node<P> {
    const KIND: &'static Kind = &Kind { deliver: deliver_node::<P>, free: free_node::<P> };
}

/// Delivers a node's payload and frees the node, or puts the payload back.
///
/// # Safety
///
/// `header` heads a live `Node<P>` owned by the caller.
unsafe fn deliver_node<P: Payload>(header: NonNull<Header>, local: &Local, shared: &Shared) -> bool {
    let node = header.cast::<Node<P>>().as_ptr();
    // SAFETY: the caller owns the live node.
    let (dest, payload) = unsafe { ((*node).header.dest, (*node).payload.take()) };
    let Some(payload) = payload else {
        // SAFETY: as above; an empty node is just freed.
        unsafe { free_node::<P>(header) };
        return true;
    };
    match payload.deliver(dest, local, shared) {
        Ok(()) => {
            // SAFETY: as above.
            unsafe { free_node::<P>(header) };
            true
        }
        Err(payload) => {
            // SAFETY: as above.
            unsafe { (*node).payload = Some(payload) };
            false
        }
    }
}

/// # Safety
///
/// `header` heads a live `Node<P>` made by `Envelope::new` and owned by
/// the caller, who never touches it again.
unsafe fn free_node<P: Payload>(header: NonNull<Header>) {
    // SAFETY: per the contract: a boxed `Node<P>`.
    drop(unsafe { Box::from_raw(header.cast::<Node<P>>().as_ptr()) });
}

/// An owned envelope.
pub(crate) struct Envelope(NonNull<Header>);

// SAFETY: the node owns a `Send` payload and nothing else that is shared.
unsafe impl Send for Envelope {}

impl Envelope {
    /// Boxes `payload` for `dest`.
    pub(crate) fn new<P: Payload>(dest: Pid, payload: P) -> Envelope {
        let node = Box::new(Node {
            header: Header { link: Link::new(), dest, kind: Node::<P>::KIND },
            payload: Some(payload),
        });
        Envelope(NonNull::from(Box::leak(node)).cast())
    }

    /// The target.
    pub(crate) fn dest(&self) -> Pid {
        // SAFETY: we own the live node.
        unsafe { self.0.as_ref() }.dest
    }

    /// Delivers on worker `local` (its driver, outside any process); `Err`
    /// gives the envelope back to be held and retried.
    pub(crate) fn deliver(self, local: &Local, shared: &Shared) -> Result<(), Envelope> {
        let header = self.0;
        core::mem::forget(self);
        // SAFETY: we owned the node (forgotten above, so freed once: by
        // `deliver` or, when it is put back, by the envelope we return).
        let kind = unsafe { header.as_ref() }.kind;
        // SAFETY: `kind` was made for this node's payload type.
        if unsafe { (kind.deliver)(header, local, shared) } {
            Ok(())
        } else {
            Err(Envelope(header))
        }
    }

    /// Pushes the envelope onto `queue`.
    pub(crate) fn push_onto(self, queue: &Mpsc) {
        let link = self.0.cast::<Link>();
        core::mem::forget(self);
        // SAFETY: the header (and so the link) starts the node, which the
        // queue owns from here until `pop_from` hands it back.
        unsafe { queue.push(link) };
    }

    /// Takes the oldest envelope off `queue`.
    ///
    /// # Safety
    ///
    /// The caller is `queue`'s one consumer, and the queue holds only
    /// envelopes pushed by [`push_onto`](Self::push_onto).
    pub(crate) unsafe fn pop_from(queue: &Mpsc) -> Option<Envelope> {
        // SAFETY: per the contract; the link starts a header.
        unsafe { queue.pop() }.map(|link| Envelope(link.cast()))
    }
}

impl Drop for Envelope {
    fn drop(&mut self) {
        // SAFETY: we own the live node.
        let kind = unsafe { self.0.as_ref() }.kind;
        // SAFETY: `kind` matches the node; it is not used again.
        unsafe { (kind.free)(self.0) };
    }
}
