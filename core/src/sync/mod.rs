//! Blocking primitives for processes: channels, select, and the parking
//! mutex.
//!
//! Each is built on the kernel's wait protocol and nothing else: open a
//! wait, register its waker where the wake will come from, park (or retire
//! the wait when the condition already holds). This layer imports only
//! [`crate::kernel`].

pub mod block_on;
pub mod channel;
pub mod mutex;
pub mod select;
