//! The scheduler kernel: slots and pids, state words, workers and their
//! passes, rings, timers, processes and the wait protocol, preemption
//! guards, the runtime spin lock, the host seam and configuration.
//!
//! The bottom layer of the core. It imports nothing from the `sync` or
//! `otp` layers; everything above is a client of what it exports —
//! the wait protocol ([`process::begin_wait`], [`process::park`]), death
//! hooks, and per-runtime extension slots.

pub(crate) mod asan;
pub(crate) mod atomic;
pub mod config;
pub mod coop;
pub(crate) mod current;
pub(crate) mod death;
pub mod error;
pub mod exit;
pub(crate) mod extension;
pub(crate) mod handle;
pub mod host;
pub mod join;
pub(crate) mod once;
pub mod pid;
pub(crate) mod plugin;
pub mod preempt;
pub mod process;
#[cfg(all(test, loom))]
mod protocol_models;
pub mod ring;
pub mod runtime;
pub(crate) mod segments;
pub mod single;
pub(crate) mod slab;
pub mod spin;
pub(crate) mod stackless;
pub mod state;
pub mod time;
pub mod timer;
pub mod trace;
pub mod worker;
