//! The bare-metal backend: everything by polling, over a [`Board`].
//!
//! (Skeleton: the Board trait is fixed; the backend is being filled in.)

use crate::Nanos;

/// What a bare-metal image supplies to the `bare` platform: a clock, a
/// console and a way to end. Everything else (stacks, parking) the backend
/// builds on top of `alloc` and polling.
pub trait Board: Send + Sync + 'static {
    /// Monotonic time in nanoseconds since boot.
    fn now(&self) -> Nanos;
    /// Writes bytes to the console (e.g. a PL011 UART).
    fn write(&self, bytes: &[u8]);
    /// Ends the program with `status` (0 = success), e.g. semihosting SYS_EXIT.
    fn exit(&self, status: i32) -> !;
    /// Waits for an event or interrupt (e.g. WFE), or returns at once. Used by
    /// idle parking between deadline checks; must not sleep past a few
    /// milliseconds unless an event wakes it.
    fn wait_for_event(&self) {}
    /// Signals other cores waiting in `wait_for_event` (e.g. SEV).
    fn send_event(&self) {}
}
