//! Erlang's layer: monitors, links and exit trapping, the registry,
//! supervisors, gen_server, and actor-local storage.
//!
//! Everything here is a client of the layers below: death notifications
//! arrive through kernel death hooks, per-runtime tables live in kernel
//! extension slots, and every wait is a [`crate::sync`] channel or select.

pub mod gen_server;
pub mod link;
pub mod local;
pub mod monitor;
pub mod registry;
mod restarts;
pub mod supervisor;
