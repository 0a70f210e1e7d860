//! The platform a hosted runtime runs on: the Linux backend, plus the
//! hosted crate's guarantee that every stack carries the pid of the process
//! running on it.
//!
//! The core labels a stack through [`Platform::tag_stack`] at every spawn
//! (recycled stacks included); the Linux backend keeps the label in its
//! guard-page registry through [`Platform::set_stack_tag`]. This wrapper
//! forwards the one to the other, so an overflow report names the process
//! whichever of the two the backend implements.

use smarm_platform::linux::LinuxPlatform;
use smarm_platform::{Event, Interest, Nanos, ParkToken, Platform, PollError, RawFd, Stack, StackError};

/// [`LinuxPlatform`] with stack tagging routed to its overflow registry.
#[derive(Debug)]
pub(crate) struct HostedPlatform {
    inner: LinuxPlatform,
}

impl HostedPlatform {
    /// A Linux platform with the process-wide guard-page budget (one epoll
    /// instance of its own).
    pub(crate) fn new() -> Result<HostedPlatform, PollError> {
        Ok(HostedPlatform { inner: LinuxPlatform::new()? })
    }
}

impl Platform for HostedPlatform {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    #[inline]
    fn now(&self) -> Nanos {
        self.inner.now()
    }

    fn allocate_stack(&self, size: usize) -> Result<Stack, StackError> {
        self.inner.allocate_stack(size)
    }

    unsafe fn free_stack(&self, stack: Stack) {
        // SAFETY: forwarded contract — `stack` came from this platform's
        // `allocate_stack` (which is the inner one's) and is dead.
        unsafe { self.inner.free_stack(stack) }
    }

    fn trim_stack(&self, stack: &Stack, keep_top_bytes: usize) {
        self.inner.trim_stack(stack, keep_top_bytes);
    }

    fn set_stack_tag(&self, stack: &Stack, tag: u64) {
        self.inner.set_stack_tag(stack, tag);
    }

    fn tag_stack(&self, stack: &Stack, tag: u64) {
        // Both: whichever the backend implements records the tag; setting
        // the same tag twice is harmless.
        self.inner.tag_stack(stack, tag);
        self.inner.set_stack_tag(stack, tag);
    }

    #[inline]
    fn park(&self, token: &ParkToken, deadline: Option<Nanos>) {
        self.inner.park(token, deadline);
    }

    #[inline]
    fn unpark(&self, token: &ParkToken) {
        self.inner.unpark(token);
    }

    fn poll_register(&self, fd: RawFd, token: u64, interest: Interest) -> Result<(), PollError> {
        self.inner.poll_register(fd, token, interest)
    }

    fn poll_modify(&self, fd: RawFd, token: u64, interest: Interest) -> Result<(), PollError> {
        self.inner.poll_modify(fd, token, interest)
    }

    fn poll_deregister(&self, fd: RawFd) -> Result<(), PollError> {
        self.inner.poll_deregister(fd)
    }

    fn poll(&self, events: &mut [Event], timeout: Option<Nanos>) -> Result<usize, PollError> {
        self.inner.poll(events, timeout)
    }
}
