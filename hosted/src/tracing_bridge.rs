//! The `tracing` feature: runtime events forwarded to the `tracing`
//! ecosystem, under the target `smarm`.
//!
//! | event | level | fields |
//! |---|---|---|
//! | `spawn` | DEBUG | `pid`, `worker`, `parent` |
//! | `exit` | DEBUG if normal, else WARN | `pid`, `reason` |
//! | `panic` | ERROR (before its `exit`) | `pid`, `panic` (the message) |
//! | `stop` (a stop was requested) | DEBUG | `pid` |
//! | `restart` (a supervisor restarts a child) | WARN | `supervisor`, `child`, `pid`, `reason` |
//!
//! Installed with the first runtime the program builds; a subscriber set
//! before or after sees every event from then on.

use smarm_core::kernel::trace::{set_tracer, TraceEvent, Tracer};
use smarm_core::ExitReason;

fn forward(event: &TraceEvent<'_>) {
    match *event {
        TraceEvent::Spawn { pid, worker, parent } => {
            tracing::debug!(target: "smarm", %pid, worker, parent = ?parent.map(|p| p.to_string()), "spawn");
        }
        TraceEvent::Exit { pid, reason } => match reason {
            ExitReason::Normal => tracing::debug!(target: "smarm", %pid, reason = ?reason, "exit"),
            ExitReason::Panicked(message) => {
                tracing::error!(target: "smarm", %pid, panic = %message, "panic");
                tracing::warn!(target: "smarm", %pid, reason = ?reason, "exit");
            }
            _ => tracing::warn!(target: "smarm", %pid, reason = ?reason, "exit"),
        },
        TraceEvent::StopRequested { pid } => tracing::debug!(target: "smarm", %pid, "stop"),
        TraceEvent::Restart { supervisor, child, pid, reason } => {
            tracing::warn!(target: "smarm", %supervisor, child, %pid, reason = ?reason, "restart");
        }
        _ => {}
    }
}

static FORWARD: Tracer = forward;

/// Installs the forwarding tracer (once per program; a tracer set earlier
/// by the program itself wins).
pub(crate) fn install() {
    let _ = set_tracer(&FORWARD);
}
