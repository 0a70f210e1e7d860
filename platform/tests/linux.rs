//! The Linux backend against the conformance kit, plus what only Linux can
//! show: resident memory of lazily committed stacks, guard pages that fault,
//! overflow reports naming the process, and the mapping-budget policy.
//!
//! Tests that must die or must measure the whole process run in a forked
//! child (not a re-exec: under qemu-user there is no binfmt handler to run
//! an aarch64 binary from inside the emulator, while `fork` is emulated
//! faithfully). The child talks only through its exit status and stderr,
//! which the parent captures through a pipe; it writes with `libc::write`,
//! because the test harness captures `eprintln!` per thread. Every test
//! holds `SERIAL` so that no other test thread holds a lock (ours or
//! libc's) at the moment of a fork.
#![cfg(all(feature = "linux", target_os = "linux"))]

use std::hint::black_box;
use std::sync::{Arc, Mutex, MutexGuard};

use smarm_arch::{Arch, Context, Native};
use smarm_platform::conformance::{self, Capabilities};
use smarm_platform::linux::{ensure_alt_stack, install_overflow_handler, stacks, LinuxPlatform};
use smarm_platform::{stack_tag, Platform, Stack, StackGuard, STACK_CANARY};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

// ---------------------------------------------------------------------------
// Forked children.

/// How a child ended, and what it wrote to stderr.
#[derive(Debug)]
struct ChildOutcome {
    status: libc::c_int,
    stderr: String,
}

impl ChildOutcome {
    fn exit_code(&self) -> Option<i32> {
        libc::WIFEXITED(self.status).then(|| libc::WEXITSTATUS(self.status))
    }
    fn signal(&self) -> Option<i32> {
        libc::WIFSIGNALED(self.status).then(|| libc::WTERMSIG(self.status))
    }
}

/// Writes straight to fd 2 (the pipe to the parent, in a child).
fn say(text: &str) {
    // SAFETY: writes from a live buffer.
    unsafe { libc::write(2, text.as_ptr().cast(), text.len()) };
}

/// Runs `body` in a forked child whose stderr is captured; the child exits
/// with `body`'s return value (101 if it panics).
fn in_child(body: fn() -> i32) -> ChildOutcome {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for two descriptors.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let [read_end, write_end] = fds;
    // SAFETY: the child only runs `body` and exits; SERIAL keeps the other
    // test threads of this binary away from locks while we fork.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: plain descriptor calls on descriptors we own.
        unsafe {
            libc::close(read_end);
            libc::dup2(write_end, 2);
            libc::close(write_end);
        }
        let code = std::panic::catch_unwind(body).unwrap_or(101);
        // SAFETY: leave without running the parent's atexit handlers.
        unsafe { libc::_exit(code) };
    }
    // SAFETY: the parent's copy of the write end.
    unsafe { libc::close(write_end) };
    let mut captured = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        // SAFETY: `buffer` is writable for its length.
        let got = unsafe { libc::read(read_end, buffer.as_mut_ptr().cast(), buffer.len()) };
        if got > 0 {
            captured.extend_from_slice(&buffer[..got as usize]);
        } else if got == 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break;
        }
    }
    // SAFETY: our read end, closed once.
    unsafe { libc::close(read_end) };
    let mut status = 0;
    // SAFETY: waiting for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    ChildOutcome { status, stderr: String::from_utf8_lossy(&captured).into_owned() }
}

// ---------------------------------------------------------------------------
// Conformance kit.

fn linux_caps() -> Capabilities {
    Capabilities { guard_pages: true, readiness: true, stack_size: 256 * 1024 }
}

#[test]
fn conformance_kit_passes() {
    let _serial = serial();
    let platform = LinuxPlatform::new().unwrap();
    conformance::check_all(&platform, linux_caps()).unwrap();
}

#[test]
fn conformance_kit_passes_on_canary_stacks() {
    let _serial = serial();
    let platform = LinuxPlatform::with_guard_budget(0).unwrap();
    conformance::check_all(&platform, Capabilities { guard_pages: false, ..linux_caps() }).unwrap();
}

#[test]
fn unpark_from_another_thread_wakes_the_driver() {
    let _serial = serial();
    let platform: Arc<dyn Platform> = Arc::new(LinuxPlatform::new().unwrap());
    let spawn = |job: Box<dyn FnOnce() + Send>| {
        std::thread::spawn(job);
    };
    for _ in 0..5 {
        conformance::unpark_wakes_parked_driver(Arc::clone(&platform), &spawn).unwrap();
    }
}

#[test]
fn pipe_becomes_readable() {
    let _serial = serial();
    let platform = LinuxPlatform::new().unwrap();
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for two descriptors.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) }, 0);
    let [read_end, write_end] = fds;
    let make_readable = || {
        // SAFETY: writes one byte from a live buffer to our pipe.
        assert_eq!(unsafe { libc::write(write_end, b"x".as_ptr().cast(), 1) }, 1);
    };
    let outcome = conformance::pipe_becomes_readable(&platform, read_end, &make_readable);
    // SAFETY: our descriptors, closed once.
    unsafe {
        libc::close(read_end);
        libc::close(write_end);
    }
    outcome.unwrap();
}

#[test]
fn writable_interest_and_hang_up_are_reported() {
    let _serial = serial();
    let platform = LinuxPlatform::new().unwrap();
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for two descriptors.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let [read_end, write_end] = fds;
    let mut events = [smarm_platform::Event::default(); 4];
    platform.poll_register(write_end, 9, smarm_platform::Interest::WRITABLE).unwrap();
    assert_eq!(platform.poll(&mut events, Some(1_000_000_000)).unwrap(), 1);
    assert!(events[0].writable && events[0].token == 9);
    platform.poll_register(read_end, 10, smarm_platform::Interest::READABLE).unwrap();
    // SAFETY: closing our write end makes the read end hang up.
    unsafe { libc::close(write_end) };
    assert_eq!(platform.poll(&mut events, Some(1_000_000_000)).unwrap(), 1);
    assert!(events[0].readable && events[0].token == 10, "{:?}", events[0]);
    assert_eq!(platform.poll(&mut [], None), Ok(0));
    // SAFETY: our descriptor, closed once.
    unsafe { libc::close(read_end) };
}

#[test]
fn unpark_without_sleeper_leaves_a_pending_wake() {
    let _serial = serial();
    let platform = LinuxPlatform::new().unwrap();
    let token = smarm_platform::ParkToken::new();
    platform.unpark(&token);
    assert_eq!(token.state.load(std::sync::atomic::Ordering::Relaxed), smarm_platform::linux::NOTIFIED);
    platform.park(&token, None);
    assert_eq!(token.state.load(std::sync::atomic::Ordering::Relaxed), smarm_platform::linux::EMPTY);
}

#[test]
fn unpark_interrupts_a_driver_parked_in_the_poller() {
    let _serial = serial();
    let platform = Arc::new(LinuxPlatform::new().unwrap());
    let token = Arc::new(smarm_platform::ParkToken::new());
    for round in 0..20 {
        let (p, t) = (platform.clone(), token.clone());
        let waker = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(if round % 2 == 0 { 5 } else { 0 }));
            p.unpark(&t);
        });
        let started = std::time::Instant::now();
        let mut events = [smarm_platform::Event::default(); 4];
        // No registration, no deadline: only the wake can end this park
        // (a lost wake hangs the test).
        let mut count = platform.park_polling(&token, None, &mut events).unwrap();
        while count != 0 {
            count = platform.park_polling(&token, None, &mut events).unwrap();
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        waker.join().unwrap();
        // The wake was consumed, and its eventfd edge is never reported.
        assert_eq!(token.state.load(std::sync::atomic::Ordering::Relaxed), smarm_platform::linux::EMPTY);
        assert_eq!(platform.poll(&mut events, Some(0)), Ok(0));
    }
}

#[test]
fn park_polling_returns_readiness_and_honours_the_deadline() {
    let _serial = serial();
    let platform = LinuxPlatform::new().unwrap();
    let token = smarm_platform::ParkToken::new();
    let mut events = [smarm_platform::Event::default(); 4];
    let started = std::time::Instant::now();
    let deadline = smarm_platform::linux::monotonic_now() + 20_000_000;
    assert_eq!(platform.park_polling(&token, Some(deadline), &mut events), Ok(0));
    assert!(started.elapsed() >= std::time::Duration::from_millis(19));
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for two descriptors.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) }, 0);
    let [read_end, write_end] = fds;
    platform.poll_register_edge(read_end, 77).unwrap();
    // SAFETY: writes one byte from a live buffer to our pipe.
    assert_eq!(unsafe { libc::write(write_end, b"x".as_ptr().cast(), 1) }, 1);
    assert_eq!(platform.park_polling(&token, None, &mut events), Ok(1));
    assert!(events[0].readable && events[0].token == 77);
    // Edge-triggered: nothing new, nothing reported (the byte is unread).
    assert_eq!(platform.poll_pending(&mut events), Ok(0));
    // SAFETY: as above.
    assert_eq!(unsafe { libc::write(write_end, b"y".as_ptr().cast(), 1) }, 1);
    assert_eq!(platform.poll_pending(&mut events), Ok(1));
    platform.poll_deregister(read_end).unwrap();
    // SAFETY: our descriptors, closed once.
    unsafe {
        libc::close(read_end);
        libc::close(write_end);
    }
}

// ---------------------------------------------------------------------------
// Resident memory.

fn resident_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * page_size()
}

const RSS_STACKS: usize = 64;
const RSS_STACK_SIZE: usize = 256 * 1024;
const RSS_LIMIT_PER_STACK: usize = 12 * 1024;

/// Under qemu-user, /proc/self/statm is the emulator's own (qemu does not
/// fake it), and guest anonymous mappings are host anonymous mappings of the
/// same size, so the deltas still measure our stacks; qemu's translation
/// cache adds a little noise, well inside the 12 KiB-per-stack limit.
fn measure_resident(guard_budget: usize) -> i32 {
    let platform = LinuxPlatform::with_guard_budget(guard_budget).unwrap();
    let expected = if guard_budget > 0 { StackGuard::GuardPage } else { StackGuard::Canary };
    let mut stacks: Vec<Stack> = Vec::with_capacity(RSS_STACKS);
    // Warm up: the first stack sets up process-wide bookkeeping once (a
    // 96 KiB segment of the overflow registry, the pool's size class), which
    // is not a per-stack cost.
    let warm_up = platform.allocate_stack(RSS_STACK_SIZE).unwrap();
    // SAFETY: ours, never run on.
    unsafe { platform.free_stack(warm_up) };
    let _ = resident_bytes();
    let before = resident_bytes();
    for _ in 0..RSS_STACKS {
        stacks.push(platform.allocate_stack(RSS_STACK_SIZE).unwrap());
    }
    let allocated = resident_bytes();
    for stack in &stacks {
        assert_eq!(stack.guard(), expected);
        // SAFETY: the top word of a live stack we own.
        unsafe { stack.top().cast::<u64>().sub(1).write_volatile(1) };
    }
    let touched = resident_bytes();
    let untouched_per_stack = allocated.saturating_sub(before) / RSS_STACKS;
    let touched_per_stack = touched.saturating_sub(before) / RSS_STACKS;
    say(&format!(
        "budget {guard_budget}: untouched {untouched_per_stack} B/stack, one page touched {touched_per_stack} B/stack\n"
    ));
    if untouched_per_stack >= RSS_LIMIT_PER_STACK || touched_per_stack >= RSS_LIMIT_PER_STACK {
        return 2;
    }
    // A canary costs no page of its own: it shares the top page of the
    // stack below, so a stack whose top is touched holds one page.
    if expected == StackGuard::Canary && touched_per_stack >= 2 * page_size() {
        say("a canary stack with its top touched holds two pages\n");
        return 5;
    }
    // The measurement must be live: touching one more page per stack (in
    // the middle, shared with no one) shows.
    for stack in &stacks {
        // SAFETY: a word in the middle of a live stack we own.
        unsafe { stack.bottom().add(stack.size() / 2).cast::<u64>().write_volatile(1) };
    }
    if resident_bytes().saturating_sub(touched) < RSS_STACKS * page_size() / 2 {
        say("touching a page per stack did not show in RSS\n");
        return 3;
    }
    // Touch every page of one stack, then trim it down to its top page.
    let whole = &stacks[0];
    for offset in (0..whole.size()).step_by(page_size()) {
        // SAFETY: inside the live stack.
        // (Offset 8: the canary word at the bottom stays intact.)
        unsafe { whole.bottom().add(offset + 8).write_volatile(7) };
    }
    let full = resident_bytes();
    platform.trim_stack(whole, page_size());
    let trimmed = resident_bytes();
    say(&format!("one stack fully touched: +{} B, trimmed: -{} B\n", full - touched, full - trimmed));
    if full.saturating_sub(trimmed) < RSS_STACK_SIZE / 2 {
        say("trim_stack did not release the stack's pages\n");
        return 4;
    }
    for stack in stacks {
        assert!(stack.canary_intact());
        // SAFETY: ours, dead.
        unsafe { platform.free_stack(stack) };
    }
    0
}

#[test]
fn stacks_commit_only_touched_pages() {
    let _serial = serial();
    let outcome = in_child(|| measure_resident(1024));
    println!("{}", outcome.stderr);
    assert_eq!(outcome.exit_code(), Some(0), "{outcome:?}");
}

#[test]
fn canary_stacks_commit_only_touched_pages() {
    let _serial = serial();
    let outcome = in_child(|| measure_resident(0));
    println!("{}", outcome.stderr);
    assert_eq!(outcome.exit_code(), Some(0), "{outcome:?}");
}

#[test]
fn trim_zeroes_below_the_kept_top() {
    let _serial = serial();
    let page = page_size();
    for budget in [1, 0] {
        let platform = LinuxPlatform::with_guard_budget(budget).unwrap();
        let stack = platform.allocate_stack(16 * page).unwrap();
        let words = stack.size() / 8;
        let base = stack.bottom().cast::<u64>();
        for index in 1..words {
            // SAFETY: inside the live stack (word 0 is the canary's).
            unsafe { base.add(index).write_volatile(0xAB) };
        }
        platform.trim_stack(&stack, 2 * page + 1); // rounds up to 3 pages
                                                   // Released up to the page boundary at or below `top - 3 pages` (a
                                                   // canary stack's top lies 16 bytes short of a page boundary).
        let boundary = (stack.top() as usize - 3 * page) / page * page;
        let kept_from = (boundary - stack.bottom() as usize) / 8;
        // SAFETY: `index < words`: inside the live stack.
        let read = |index: usize| unsafe { base.add(index).read_volatile() };
        assert_eq!(read(kept_from), 0xAB);
        assert_eq!(read(kept_from - 1), 0, "budget {budget}");
        assert_eq!(read(page / 8), 0);
        assert!(stack.canary_intact(), "trim kept the canary page");
        // Keeping more than the stack is a no-op.
        platform.trim_stack(&stack, usize::MAX);
        // SAFETY: ours, dead.
        unsafe { platform.free_stack(stack) };
    }
}

// ---------------------------------------------------------------------------
// Guard pages and overflow reports.

#[test]
fn guard_page_faults() {
    let _serial = serial();
    let outcome = in_child(|| {
        let platform = LinuxPlatform::new().unwrap();
        let stack = platform.allocate_stack(64 * 1024).unwrap();
        if stack.guard() != StackGuard::GuardPage {
            return 2;
        }
        // SAFETY: deliberately not safe — the byte below the usable range is
        // the guard page, and this write must kill the child.
        unsafe { stack.bottom().sub(1).write_volatile(1) };
        3
    });
    assert_eq!(outcome.signal(), Some(libc::SIGSEGV), "{outcome:?}");
    assert!(!outcome.stderr.contains("stack overflow"), "{outcome:?}");
}

const OVERFLOW_STACK_SIZE: usize = 256 * 1024;

fn recurse(depth: u64) -> u64 {
    let frame = [depth as u8; 512];
    let frame = black_box(frame);
    if black_box(depth) == u64::MAX {
        return 0;
    }
    recurse(depth + 1).wrapping_add(u64::from(frame[7]))
}

unsafe extern "C" fn overflow_entry(_arg: usize) -> ! {
    recurse(0);
    // SAFETY: unreachable in practice: recursion ends in the guard page.
    unsafe { libc::_exit(5) }
}

#[test]
fn overflow_is_reported_with_pid_and_size() {
    let _serial = serial();
    let outcome = in_child(|| {
        install_overflow_handler().unwrap();
        let _alt = ensure_alt_stack().unwrap();
        let platform = LinuxPlatform::new().unwrap();
        let stack = platform.allocate_stack(OVERFLOW_STACK_SIZE).unwrap();
        if stack.guard() != StackGuard::GuardPage {
            return 2;
        }
        platform.set_stack_tag(&stack, stack_tag(5, 2));
        let mut main = Context::empty();
        // SAFETY: the top of a live, 16-aligned stack nothing else uses,
        // which stays allocated until the child dies.
        let fresh = unsafe { Native::init_context(stack.top(), overflow_entry, 0) };
        // SAFETY: `fresh` was just made for a live stack; `main` is ours.
        unsafe { Native::switch(&mut main, &fresh) };
        4
    });
    let expected_size = format!("size {OVERFLOW_STACK_SIZE} bytes");
    assert!(outcome.stderr.contains("smarm: stack overflow in process 5.2"), "{outcome:?}");
    assert!(outcome.stderr.contains(&expected_size), "{outcome:?}");
    assert!(outcome.stderr.contains("fault at 0x"), "{outcome:?}");
    assert_eq!(outcome.signal(), Some(libc::SIGSEGV), "{outcome:?}");
}

#[test]
fn guard_write_on_untagged_stack_is_reported_as_unknown() {
    let _serial = serial();
    let outcome = in_child(|| {
        install_overflow_handler().unwrap();
        install_overflow_handler().unwrap(); // idempotent
        let _alt = ensure_alt_stack().unwrap();
        let platform = LinuxPlatform::new().unwrap();
        let stack = platform.allocate_stack(64 * 1024).unwrap();
        // SAFETY: deliberately faults in the guard page.
        unsafe { stack.bottom().sub(8).write_volatile(1) };
        3
    });
    assert!(outcome.stderr.contains("stack overflow in process unknown"), "{outcome:?}");
    assert!(outcome.stderr.contains("size 65536 bytes"), "{outcome:?}");
    assert_eq!(outcome.signal(), Some(libc::SIGSEGV), "{outcome:?}");
}

#[test]
fn freed_guard_is_forgotten_and_other_faults_stay_crashes() {
    let _serial = serial();
    let outcome = in_child(|| {
        install_overflow_handler().unwrap();
        let _alt = ensure_alt_stack().unwrap();
        let platform = LinuxPlatform::new().unwrap();
        let stack = platform.allocate_stack(64 * 1024).unwrap();
        // SAFETY: the stack is dead; it goes back to the platform.
        unsafe { platform.free_stack(stack) };
        // A fault nowhere near a registered guard page: an ordinary crash.
        let wild = black_box(16usize) as *mut u64;
        // SAFETY: deliberately faults (the zero page is never mapped).
        unsafe { wild.write_volatile(1) };
        3
    });
    assert!(!outcome.stderr.contains("stack overflow"), "{outcome:?}");
    assert_eq!(outcome.signal(), Some(libc::SIGSEGV), "{outcome:?}");
}

#[test]
fn alt_stack_is_installed_once_and_restored() {
    let _serial = serial();
    // A fresh std thread has std's alternate stack (std installs one when it
    // handles SIGSEGV); a raw pthread would not. Either way we end with one.
    std::thread::spawn(|| {
        let first = ensure_alt_stack().unwrap();
        let second = ensure_alt_stack().unwrap();
        assert!(!second.installed_here(), "a second call finds the first stack in place");
        drop(second);
        drop(first);
    })
    .join()
    .unwrap();
}

// ---------------------------------------------------------------------------
// The mapping budget.

#[test]
fn beyond_the_guard_budget_stacks_are_recycled_canary_stacks() {
    let _serial = serial();
    let platform = LinuxPlatform::with_guard_budget(2).unwrap();
    let size = 64 * 1024;
    let first = platform.allocate_stack(size).unwrap();
    let second = platform.allocate_stack(size).unwrap();
    assert_eq!((first.guard(), second.guard()), (StackGuard::GuardPage, StackGuard::GuardPage));
    assert_eq!(platform.live_guarded_stacks(), 2);

    let third = platform.allocate_stack(size).unwrap();
    assert_eq!(third.guard(), StackGuard::Canary, "stack n+1 is a canary stack");
    assert!(third.canary_intact());
    // SAFETY: the canary sits at the lowest usable word.
    assert_eq!(unsafe { third.bottom().cast::<u64>().read() }, STACK_CANARY);
    let third_bottom = third.bottom();
    // SAFETY: ours, dead.
    unsafe { platform.free_stack(third) };
    let recycled = platform.allocate_stack(size).unwrap();
    assert_eq!(recycled.bottom(), third_bottom, "a freed canary stack is reused");
    assert!(recycled.canary_intact());

    // Giving a guarded stack back frees budget for the next one.
    // SAFETY: ours, dead.
    unsafe { platform.free_stack(first) };
    assert_eq!(platform.live_guarded_stacks(), 1);
    let again = platform.allocate_stack(size).unwrap();
    assert_eq!(again.guard(), StackGuard::GuardPage);

    for stack in [second, recycled, again] {
        // SAFETY: ours, dead.
        unsafe { platform.free_stack(stack) };
    }
    assert_eq!(platform.live_guarded_stacks(), 0);
}

#[test]
fn canary_stacks_fill_several_chunks_without_overlap_and_are_reused() {
    let _serial = serial();
    let platform = LinuxPlatform::with_guard_budget(0).unwrap();
    let size = 16 * 1024;
    let count = stacks::CHUNK_STACKS * 2 + 3;
    let mut live: Vec<Stack> = (0..count).map(|_| platform.allocate_stack(size).unwrap()).collect();
    let mut ranges: Vec<(usize, usize)> =
        live.iter().map(|s| (s.bottom() as usize, s.top() as usize)).collect();
    ranges.sort_unstable();
    for pair in ranges.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "stacks overlap: {pair:?}");
    }
    for stack in &live {
        assert_eq!(stack.guard(), StackGuard::Canary);
        assert!(stack.canary_intact());
        // Scribble over the whole stack, canary included, as a dead process
        // may have.
        // SAFETY: inside the live stack.
        unsafe { stack.bottom().write_bytes(0xEE, stack.size()) };
    }
    for stack in live.drain(..) {
        // SAFETY: ours, dead.
        unsafe { platform.free_stack(stack) };
    }
    // Same count again: every stack comes from the free lists.
    let again: Vec<Stack> = (0..count).map(|_| platform.allocate_stack(size).unwrap()).collect();
    let mut reused: Vec<(usize, usize)> =
        again.iter().map(|s| (s.bottom() as usize, s.top() as usize)).collect();
    reused.sort_unstable();
    assert_eq!(reused, ranges, "no new chunk was mapped");
    for stack in again {
        assert!(stack.canary_intact(), "recycled stacks get a fresh canary");
        // SAFETY: inside the stack, above the canary: zeroed on free.
        assert_eq!(unsafe { stack.bottom().add(64).read() }, 0);
        // SAFETY: ours, dead.
        unsafe { platform.free_stack(stack) };
    }
    // A different size is a different class, not a reuse.
    let other = platform.allocate_stack(size * 2).unwrap();
    assert_eq!(other.size(), size * 2);
    assert!(ranges.iter().all(|&(bottom, _)| bottom != other.bottom() as usize));
    // SAFETY: ours, dead.
    unsafe { platform.free_stack(other) };
}

#[test]
fn guard_budget_defaults_from_max_map_count() {
    let _serial = serial();
    let platform = LinuxPlatform::new().unwrap();
    assert_eq!(platform.guard_budget(), stacks::process_guard_budget());
    assert!(stacks::max_map_count() >= 1024);
    assert!(platform.guard_budget() > 0, "a default machine gets guard pages");
}

#[test]
fn sizes_round_up_to_pages() {
    let _serial = serial();
    let platform = LinuxPlatform::new().unwrap();
    let stack = platform.allocate_stack(1).unwrap();
    assert_eq!(stack.size(), page_size());
    assert_eq!(stack.top() as usize % page_size(), 0);
    // SAFETY: ours, dead.
    unsafe { platform.free_stack(stack) };
}

#[test]
fn a_leaked_alt_stack_stays_installed() {
    let _serial = serial();
    std::thread::spawn(|| {
        // SAFETY: all-zero is a valid stack_t to be overwritten.
        let mut disabled: libc::stack_t = unsafe { std::mem::zeroed() };
        disabled.ss_flags = libc::SS_DISABLE;
        // SAFETY: disabling the (std-provided) alternate stack of this
        // thread, which no handler is running on.
        assert_eq!(unsafe { libc::sigaltstack(&disabled, std::ptr::null_mut()) }, 0);
        let alt = ensure_alt_stack().unwrap();
        assert!(alt.installed_here());
        alt.leak();
        // SAFETY: all-zero is a valid stack_t to be overwritten.
        let mut current: libc::stack_t = unsafe { std::mem::zeroed() };
        // SAFETY: query only.
        assert_eq!(unsafe { libc::sigaltstack(std::ptr::null(), &mut current) }, 0);
        assert_eq!(current.ss_flags & libc::SS_DISABLE, 0);
        assert!(current.ss_size >= 8 * 1024);
    })
    .join()
    .unwrap();
}
