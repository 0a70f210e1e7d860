//! The bare backend on the host, over a fake board whose clock is
//! `std::time::Instant` and whose "wait for event" is a short sleep.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use smarm_platform::bare::{BarePlatform, Board};
use smarm_platform::conformance::{self, Capabilities};
use smarm_platform::{Event, Interest, ParkToken, Platform, PollError, StackError, StackGuard};

#[derive(Debug)]
struct HostBoard {
    boot: Instant,
    waits: AtomicUsize,
    events_sent: AtomicUsize,
}

impl HostBoard {
    fn new() -> Self {
        HostBoard { boot: Instant::now(), waits: AtomicUsize::new(0), events_sent: AtomicUsize::new(0) }
    }
}

impl Board for HostBoard {
    fn now(&self) -> u64 {
        self.boot.elapsed().as_nanos() as u64
    }
    fn write(&self, bytes: &[u8]) {
        eprint!("{}", String::from_utf8_lossy(bytes));
    }
    fn exit(&self, status: i32) -> ! {
        std::process::exit(status)
    }
    fn wait_for_event(&self) {
        self.waits.fetch_add(1, Ordering::Relaxed);
        std::thread::sleep(Duration::from_micros(200));
    }
    fn send_event(&self) {
        self.events_sent.fetch_add(1, Ordering::Relaxed);
    }
}

fn bare_caps() -> Capabilities {
    Capabilities { guard_pages: false, readiness: false, stack_size: 64 * 1024 }
}

#[test]
fn conformance_kit_passes() {
    let platform = BarePlatform::new(HostBoard::new());
    conformance::check_all(&platform, bare_caps()).unwrap();
    assert_eq!(platform.name(), "bare");
}

#[test]
fn unpark_from_another_thread_wakes_the_driver() {
    let platform: Arc<dyn Platform> = Arc::new(BarePlatform::new(HostBoard::new()));
    let spawn = |job: Box<dyn FnOnce() + Send>| {
        std::thread::spawn(job);
    };
    conformance::unpark_wakes_parked_driver(platform, &spawn).unwrap();
}

#[test]
fn stacks_are_aligned_canary_stacks() {
    let platform = BarePlatform::new(HostBoard::new());
    for size in [1, 15, 16, 17, 4096, 100_000] {
        let stack = platform.allocate_stack(size).unwrap();
        assert_eq!(stack.guard(), StackGuard::Canary);
        assert!(stack.size() >= size && stack.size() % 16 == 0);
        assert_eq!(stack.bottom() as usize % 16, 0);
        assert!(stack.canary_intact());
        // SAFETY: ours, dead.
        unsafe { platform.free_stack(stack) };
    }
    assert_eq!(platform.allocate_stack(0).unwrap_err(), StackError::InvalidSize(0));
    assert_eq!(platform.allocate_stack(usize::MAX).unwrap_err(), StackError::InvalidSize(usize::MAX));
}

#[test]
fn park_waits_for_events_and_unpark_signals() {
    let platform = BarePlatform::new(HostBoard::new());
    let token = ParkToken::new();
    let deadline = platform.now() + 5_000_000;
    platform.park(&token, Some(deadline));
    assert!(platform.now() >= deadline);
    assert!(platform.board().waits.load(Ordering::Relaxed) > 0, "idle parking goes through the board");
    platform.unpark(&token);
    assert_eq!(platform.board().events_sent.load(Ordering::Relaxed), 1);
    let waits = platform.board().waits.load(Ordering::Relaxed);
    platform.park(&token, None);
    assert_eq!(platform.board().waits.load(Ordering::Relaxed), waits, "a pending wake returns at once");
}

#[test]
fn readiness_is_unsupported() {
    let platform = BarePlatform::new(HostBoard::new());
    assert_eq!(platform.poll_register(3, 1, Interest::READABLE), Err(PollError::Unsupported));
    assert_eq!(platform.poll(&mut [Event::default()], None), Err(PollError::Unsupported));
}
