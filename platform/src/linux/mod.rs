//! The Linux backend: libc clock, budgeted mmap stacks, futex parking, epoll
//! readiness and stack-overflow reports.
//!
//! What lives where:
//! - [`LinuxPlatform`] (this file): `CLOCK_MONOTONIC`, futex park / unpark on
//!   the [`ParkToken`] word, one epoll instance per platform.
//! - [`stacks`]: stack memory and the **mapping-budget policy** — guard-page
//!   stacks while `vm.max_map_count` allows, canary stacks carved from
//!   shared chunks beyond (read that module's doc before changing it).
//! - [`overflow`]: the process-wide guard-page registry, the SIGSEGV / SIGBUS
//!   handler that turns a guard-page fault into a report naming the process,
//!   the same report for overflows the core finds at a switch out, and
//!   per-thread alternate signal stacks.
//!
//! The library uses `libc` only (no `std`). A host that runs processes on
//! this platform calls [`install_overflow_handler`] once and
//! [`ensure_alt_stack`] on every thread that runs processes.
//!
//! # Park states
//!
//! The token word holds [`EMPTY`] (no wake pending), [`NOTIFIED`] (a wake is
//! pending) or [`PARKED`] (a driver sleeps in `FUTEX_WAIT` on the word).
//! `unpark` swaps in `NOTIFIED` and makes the `FUTEX_WAKE` system call only
//! if it replaced `PARKED`; `park` consumes `NOTIFIED` and goes to sleep
//! only after moving the word from `EMPTY` to `PARKED`, so a wake that lands
//! in between makes the futex wait return at once (the word no longer
//! equals `PARKED`). One driver parks on a token at a time.

pub mod overflow;
pub mod stacks;
mod sys;

use core::ptr;

pub use self::overflow::{ensure_alt_stack, install_overflow_handler, AltStack};
use self::stacks::StackAllocator;
use self::sys::errno;
pub use self::sys::OsError;
use crate::sync::{fence, AtomicUsize, Ordering};
use crate::{
    Event, Interest, Nanos, OverflowEvidence, OverflowReport, ParkToken, Platform, PollError, RawFd, Stack,
    StackError,
};

/// Token state: no wake pending, nobody asleep.
pub const EMPTY: u32 = 0;
/// Token state: a wake is pending; the next park consumes it.
pub const NOTIFIED: u32 = 1;
/// Token state: a driver sleeps on the word and needs `FUTEX_WAKE`.
pub const PARKED: u32 = 2;

const NANOS_PER_SECOND: u64 = 1_000_000_000;
/// Events fetched from the kernel per `poll` call.
const POLL_BATCH: usize = 64;
/// The token of the platform's wake eventfd in its epoll set; never
/// reported to callers (registrations must not use it).
pub const WAKE_TOKEN: u64 = u64::MAX;
/// Poller seat: free.
const SEAT_FREE: usize = 0;
/// Poller seat: held by a nonblocking poll (no real token lives at 1).
const SEAT_BUSY_POLL: usize = 1;

/// The Linux platform. One epoll instance per value, closed on drop.
#[derive(Debug)]
pub struct LinuxPlatform {
    epoll_fd: RawFd,
    /// Written to interrupt the poller seat's holder (see `unpark`).
    wake_fd: RawFd,
    /// Who sleeps in `epoll_wait`: [`SEAT_FREE`], [`SEAT_BUSY_POLL`] or the
    /// address of the parked driver's token.
    seat: AtomicUsize,
    stacks: StackAllocator,
}

impl LinuxPlatform {
    /// A platform with the process-wide guard-page budget (see [`stacks`]).
    pub fn new() -> Result<Self, PollError> {
        Self::with_guard_budget(stacks::process_guard_budget())
    }

    /// A platform that hands out at most `guard_budget` guard-page stacks at
    /// a time (and never more than the process-wide budget); further stacks
    /// are canary stacks. `0` gives canary stacks only.
    pub fn with_guard_budget(guard_budget: usize) -> Result<Self, PollError> {
        // SAFETY: epoll_create1 has no memory-safety preconditions.
        let epoll_fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epoll_fd < 0 {
            return Err(PollError::Os(errno()));
        }
        // SAFETY: eventfd has no memory-safety preconditions.
        let wake_fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if wake_fd < 0 {
            let error = errno();
            // SAFETY: opened above, closed once here.
            unsafe { libc::close(epoll_fd) };
            return Err(PollError::Os(error));
        }
        let platform = LinuxPlatform {
            epoll_fd,
            wake_fd,
            seat: AtomicUsize::new(SEAT_FREE),
            stacks: StackAllocator::new(guard_budget),
        };
        // Edge-triggered: every write is one more edge, so the counter is
        // never read back.
        let mut event = libc::epoll_event { events: (libc::EPOLLIN | libc::EPOLLET) as u32, u64: WAKE_TOKEN };
        // SAFETY: `event` is a valid epoll_event for the call.
        if unsafe { libc::epoll_ctl(epoll_fd, libc::EPOLL_CTL_ADD, wake_fd, &mut event) } != 0 {
            return Err(PollError::Os(errno()));
        }
        Ok(platform)
    }

    /// This platform's guard-page budget, in stacks.
    pub fn guard_budget(&self) -> usize {
        self.stacks.guard_budget()
    }

    /// Guard-page stacks this platform has handed out and not had back.
    pub fn live_guarded_stacks(&self) -> usize {
        self.stacks.live_guarded()
    }

    /// The epoll descriptor (for diagnostics; do not close it).
    pub fn epoll_fd(&self) -> RawFd {
        self.epoll_fd
    }

    fn control(
        &self,
        operation: libc::c_int,
        fd: RawFd,
        token: u64,
        interest: Interest,
    ) -> Result<(), PollError> {
        let mut flags = libc::EPOLLONESHOT as u32;
        if interest.readable {
            flags |= (libc::EPOLLIN | libc::EPOLLRDHUP) as u32;
        }
        if interest.writable {
            flags |= libc::EPOLLOUT as u32;
        }
        let mut event = libc::epoll_event { events: flags, u64: token };
        // SAFETY: `event` is a valid epoll_event for the duration of the
        // call; the kernel copies it.
        if unsafe { libc::epoll_ctl(self.epoll_fd, operation, fd, &mut event) } == 0 {
            return Ok(());
        }
        Err(match errno() {
            libc::EEXIST => PollError::AlreadyRegistered,
            libc::ENOENT | libc::EBADF => PollError::NotRegistered,
            other => PollError::Os(other),
        })
    }
}

impl LinuxPlatform {
    /// Makes the driver in the poller seat return from `epoll_wait`.
    fn interrupt(&self) {
        let one: u64 = 1;
        // SAFETY: `one` is 8 readable bytes, as eventfd's write wants. A
        // full counter (after 2^64 - 2 writes) would say EAGAIN: ignored.
        let _ = unsafe { libc::write(self.wake_fd, (&raw const one).cast(), 8) };
    }
}

impl Drop for LinuxPlatform {
    fn drop(&mut self) {
        // SAFETY: the descriptors were opened by `with_guard_budget` and
        // are closed exactly once, here.
        unsafe {
            libc::close(self.wake_fd);
            libc::close(self.epoll_fd);
        }
    }
}

/// The monotonic clock every Linux platform reads ([`Platform::now`]).
pub fn monotonic_now() -> Nanos {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid, writable timespec.
    let result = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    debug_assert_eq!(result, 0, "CLOCK_MONOTONIC is always available on Linux");
    (now.tv_sec as u64).saturating_mul(NANOS_PER_SECOND).saturating_add(now.tv_nsec as u64)
}

/// `FUTEX_WAIT_PRIVATE` while `*word == expected`, for at most `timeout`
/// nanoseconds (None = no limit). Returns on wake, timeout, signal or a
/// changed word; the caller re-checks.
fn futex_wait(word: &crate::sync::AtomicU32, expected: u32, timeout: Option<Nanos>) {
    let relative = timeout.map(|nanos| libc::timespec {
        tv_sec: (nanos / NANOS_PER_SECOND) as libc::time_t,
        tv_nsec: (nanos % NANOS_PER_SECOND) as libc::c_long,
    });
    let timeout_pointer = relative.as_ref().map_or(ptr::null(), |spec| spec as *const libc::timespec);
    // SAFETY: `word` is a live, aligned 32-bit atomic; the timeout pointer is
    // null or points to a timespec that outlives the call. FUTEX_WAIT only
    // reads the word.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            timeout_pointer,
            ptr::null::<u32>(),
            0u32,
        )
    };
}

fn futex_wake_one(word: &crate::sync::AtomicU32) {
    // SAFETY: `word` is a live, aligned 32-bit atomic; FUTEX_WAKE does not
    // touch memory.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1i32)
    };
}

/// Takes a pending wake, if there is one.
fn consume_wake(token: &ParkToken) -> bool {
    // Acquire pairs with the Release in `unpark`: what the waker wrote before
    // waking is visible once the wake is consumed.
    token.state.compare_exchange(NOTIFIED, EMPTY, Ordering::Acquire, Ordering::Relaxed).is_ok()
}

/// Sleeps on `token` until it is woken or `deadline` passes (a wake that
/// came first is taken at once): [`Platform::park`] without a platform,
/// for a plain thread.
pub fn park_token(token: &ParkToken, deadline: Option<Nanos>) {
    if consume_wake(token) {
        return;
    }
    // Announce the sleep. Failure means a wake arrived (or another
    // driver broke the one-parker rule and the word is PARKED already).
    match token.state.compare_exchange(EMPTY, PARKED, Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => {}
        Err(NOTIFIED) => {
            let _ = consume_wake(token);
            return;
        }
        Err(_) => {}
    }
    loop {
        let timeout = match deadline {
            None => None,
            Some(deadline) => {
                let now = monotonic_now();
                if now >= deadline {
                    break;
                }
                Some(deadline - now)
            }
        };
        futex_wait(&token.state, PARKED, timeout);
        if token.state.load(Ordering::Relaxed) != PARKED {
            break;
        }
        // Still PARKED: timeout (re-checked at the top), EINTR or a
        // spurious return. Sleep again.
    }
    // Leave: either take the wake or withdraw the announcement. If the
    // CAS loses, a wake replaced PARKED and is taken by `consume_wake`.
    if token.state.compare_exchange(PARKED, EMPTY, Ordering::Relaxed, Ordering::Relaxed).is_err() {
        let _ = consume_wake(token);
    }
}

/// Wakes whoever sleeps (or is about to sleep) on `token`.
pub fn unpark_token(token: &ParkToken) {
    // Release pairs with the Acquire in `consume_wake`.
    if token.state.swap(NOTIFIED, Ordering::Release) == PARKED {
        futex_wake_one(&token.state);
    }
}

impl Platform for LinuxPlatform {
    fn name(&self) -> &'static str {
        "linux"
    }

    fn now(&self) -> Nanos {
        monotonic_now()
    }

    fn allocate_stack(&self, size: usize) -> Result<Stack, StackError> {
        self.stacks.allocate(size)
    }

    unsafe fn free_stack(&self, stack: Stack) {
        // SAFETY: forwarded contract — `stack` came from this platform's
        // `allocate_stack` and is dead.
        unsafe { self.stacks.free(stack) }
    }

    fn trim_stack(&self, stack: &Stack, keep_top_bytes: usize) {
        self.stacks.trim(stack, keep_top_bytes);
    }

    fn set_stack_tag(&self, stack: &Stack, tag: u64) {
        self.stacks.set_tag(stack, tag);
    }

    /// Prints the report line on stderr and aborts (SIGABRT).
    fn report_overflow(&self, stack: &Stack, tag: u64, evidence: OverflowEvidence) -> ! {
        overflow::report_and_abort(OverflowReport::new(stack, tag, evidence))
    }

    fn park(&self, token: &ParkToken, deadline: Option<Nanos>) {
        park_token(token, deadline);
    }

    /// `num_threads` of `/proc/self/stat`.
    fn threads(&self) -> Option<usize> {
        sys::thread_count()
    }

    fn unpark(&self, token: &ParkToken) {
        unpark_token(token);
        // The store-load pair of `park_polling` mirrored: SeqCst fences on
        // both sides, so either the poller sees NOTIFIED before it sleeps,
        // or this sees it in the seat and interrupts the sleep.
        fence(Ordering::SeqCst);
        if self.seat.load(Ordering::Relaxed) == token as *const ParkToken as usize {
            self.interrupt();
        }
    }

    fn poll_register(&self, fd: RawFd, token: u64, interest: Interest) -> Result<(), PollError> {
        self.control(libc::EPOLL_CTL_ADD, fd, token, interest)
    }

    fn poll_register_edge(&self, fd: RawFd, token: u64) -> Result<(), PollError> {
        let flags = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32;
        let mut event = libc::epoll_event { events: flags, u64: token };
        // SAFETY: `event` is a valid epoll_event for the duration of the
        // call; the kernel copies it.
        if unsafe { libc::epoll_ctl(self.epoll_fd, libc::EPOLL_CTL_ADD, fd, &mut event) } == 0 {
            return Ok(());
        }
        Err(match errno() {
            libc::EEXIST => PollError::AlreadyRegistered,
            libc::ENOENT | libc::EBADF => PollError::NotRegistered,
            other => PollError::Os(other),
        })
    }

    fn poll_modify(&self, fd: RawFd, token: u64, interest: Interest) -> Result<(), PollError> {
        self.control(libc::EPOLL_CTL_MOD, fd, token, interest)
    }

    fn poll_deregister(&self, fd: RawFd) -> Result<(), PollError> {
        // A non-null event pointer keeps pre-2.6.9 kernels happy.
        let mut unused = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: `unused` is a valid epoll_event the kernel may read.
        if unsafe { libc::epoll_ctl(self.epoll_fd, libc::EPOLL_CTL_DEL, fd, &mut unused) } == 0 {
            return Ok(());
        }
        Err(match errno() {
            libc::ENOENT | libc::EBADF => PollError::NotRegistered,
            other => PollError::Os(other),
        })
    }

    fn park_polling(
        &self,
        token: &ParkToken,
        deadline: Option<Nanos>,
        events: &mut [Event],
    ) -> Result<usize, PollError> {
        if consume_wake(token) {
            return Ok(0);
        }
        let me = token as *const ParkToken as usize;
        // Relaxed: the seat only elects one sleeper; the fence below orders
        // it against the token word.
        if self.seat.compare_exchange(SEAT_FREE, me, Ordering::Relaxed, Ordering::Relaxed).is_err() {
            self.park(token, deadline);
            return Ok(0);
        }
        fence(Ordering::SeqCst);
        let result = if token.state.load(Ordering::Relaxed) == NOTIFIED {
            Ok(0)
        } else {
            let timeout = deadline.map(|deadline| deadline.saturating_sub(monotonic_now()));
            self.poll(events, timeout)
        };
        self.seat.store(SEAT_FREE, Ordering::Release);
        // A wake that came meanwhile is taken (its eventfd edge, if still
        // pending, makes some later poll return early: harmless).
        let _ = consume_wake(token);
        result
    }

    fn poll_pending(&self, events: &mut [Event]) -> Result<usize, PollError> {
        if self
            .seat
            .compare_exchange(SEAT_FREE, SEAT_BUSY_POLL, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Ok(0);
        }
        let result = self.poll(events, Some(0));
        self.seat.store(SEAT_FREE, Ordering::Release);
        result
    }

    /// Waits with millisecond resolution, rounding a timeout up so it never
    /// returns early. An empty `events` slice returns `Ok(0)` at once (epoll
    /// cannot wait without a place to put events), and so does a wait
    /// interrupted by a signal.
    fn poll(&self, events: &mut [Event], timeout: Option<Nanos>) -> Result<usize, PollError> {
        if events.is_empty() {
            return Ok(0);
        }
        let timeout_ms: libc::c_int = match timeout {
            None => -1,
            Some(nanos) => nanos.div_ceil(1_000_000).min(libc::c_int::MAX as u64) as libc::c_int,
        };
        let mut raw = [libc::epoll_event { events: 0, u64: 0 }; POLL_BATCH];
        let capacity = events.len().min(POLL_BATCH);
        // SAFETY: `raw` has room for `capacity` (≤ POLL_BATCH, > 0) events.
        let fetched =
            unsafe { libc::epoll_wait(self.epoll_fd, raw.as_mut_ptr(), capacity as libc::c_int, timeout_ms) };
        if fetched < 0 {
            return match errno() {
                libc::EINTR => Ok(0),
                other => Err(PollError::Os(other)),
            };
        }
        let mut count = 0;
        for from in raw.iter().take(fetched as usize) {
            // Copy out of the (possibly packed) kernel struct before use.
            let flags = from.events;
            let token = from.u64;
            if token == WAKE_TOKEN {
                continue;
            }
            let out = &mut events[count];
            count += 1;
            *out = Event {
                token,
                readable: flags & (libc::EPOLLIN | libc::EPOLLHUP | libc::EPOLLERR | libc::EPOLLRDHUP) as u32
                    != 0,
                writable: flags & (libc::EPOLLOUT | libc::EPOLLERR) as u32 != 0,
                read_closed: flags & (libc::EPOLLHUP | libc::EPOLLERR | libc::EPOLLRDHUP) as u32 != 0,
                write_closed: flags & (libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0,
            };
        }
        Ok(count)
    }
}
