//! The scheduler kernel: slots and pids, state words, workers and their
//! passes, rings, timers, processes and the wait protocol, preemption
//! guards, the runtime spin lock, the host seam and configuration.
//!
//! The bottom layer of the core. It imports nothing from the `sync` or
//! `otp` layers; everything above is a client of what it exports —
//! the wait protocol ([`process::begin_wait`], [`process::park`]), death
//! hooks, and per-runtime extension slots.
//!
//! # The scheduler proper, and the leaves
//!
//! Most files here are leaves: they import only other leaves, never the
//! scheduler (`scripts/check-layers.sh` fails on a leaf that does). The
//! running worker is known to them only through `current`'s record, the
//! first field of the worker's core. Five files import one another, and
//! only these edges close the circle (`runtime`, `worker`, `process`,
//! `slab`, `stackless`):
//!
//! - `runtime` → `worker`: the runtime builds its workers and pushes a
//!   local wake straight onto the calling worker's ready queue;
//!   `worker` → `runtime`: a pass drains the runtime's per-worker queues
//!   and finalizes through it.
//! - `runtime` → `process`: a new process's context starts at
//!   `process::entry`; `process` → `runtime`: what a process does to
//!   itself (spawn, wake, stop, sleep) goes through its runtime.
//! - `process` → `worker`: a switch saves into and loads from the worker's
//!   core; `worker` → `process`: the pass finishes an abandoned process
//!   and yields a process whose budget is spent.
//! - `slab` → `runtime`: a death hook is called with the runtime it ran
//!   in; `slab` → `stackless`: a slot holds a stackless body's cell;
//!   `runtime`, `worker`, `process`, `stackless` → `slab`: the slot a pid
//!   names.
//! - `stackless` → `runtime`, `worker`: the stackless bodies' plugin runs
//!   in each pass with the runtime it serves, and its driver is made from
//!   the running worker's core; `runtime`, `worker` → `stackless`: the
//!   runtime holds the plugin and each worker's envelope lanes, each pass
//!   drains the admin lane and calls the plugin.
//!
//! The other scheduler files (`death`, `handle`, `join`, `single`, `wait`)
//! import the circle and are imported by none of it.

pub(crate) mod asan;
pub(crate) mod atomic;
pub mod config;
pub mod coop;
pub(crate) mod current;
pub mod deadlock;
pub(crate) mod death;
pub mod error;
pub mod exit;
pub(crate) mod extension;
pub(crate) mod handle;
pub mod host;
pub mod join;
pub(crate) mod once;
pub(crate) mod parker;
pub mod pid;
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
pub mod wait;
pub mod worker;
