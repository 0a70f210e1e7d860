//! smarm-core: the `no_std` heart of smarm.
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]

extern crate alloc;
#[cfg(any(test, loom))]
extern crate std;

pub(crate) mod sync;
pub mod lock;
pub mod ring;
pub mod state;
