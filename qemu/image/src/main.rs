//! The smarm bare-metal image: boots on QEMU `-M virt` (AArch64), runs the
//! scenarios one after the other, and exits through semihosting with 0 only
//! if every scenario passed.
//!
//! Boot (`_start`, the vectors, semihosting) is in
//! `smarm_arch::aarch64_bare`; this crate supplies the two symbols it calls:
//! [`smarm_bare_main`] here and [`fault::smarm_bare_exception`]. The memory
//! map (heap, stacks) is `linker/qemu-virt.ld`. Run it with
//! `qemu/run-bare.sh`.
//!
//! Each scenario prints `scenario <name>: ok` or
//! `scenario <name>: FAILED: <why>`; the last line is
//! `N passed, N failed`. A CPU exception, or a panic outside any process,
//! ends the image at once with a non-zero status; a panic inside a process
//! abandons that process only (see [`fault`]). The scheduler scenarios run
//! the core runtime on the bare host in [`host`]: all but the last on the
//! boot core alone (one worker, `SingleThreadRuntime`); the last,
//! `smp_ping_pong`, starts the three secondary cores ([`smp`]) and runs one
//! worker per core.
#![no_std]
#![no_main]
#![deny(unsafe_op_in_unsafe_fn)]

extern crate alloc;

mod board;
mod fault;
mod handler;
mod host;
mod scheduler;
mod smp;
mod switch;

use alloc::string::String;

use linked_list_allocator::LockedHeap;
use smarm_arch::{aarch64_bare, Arch, Native};
use smarm_platform::bare::{BarePlatform, Board};

use crate::board::VirtBoard;

/// The platform the scenarios run on: the polling `bare` backend over the
/// QEMU `virt` board. Its board is also what the console macros and the
/// fault handlers use (see [`board()`]).
pub static PLATFORM: BarePlatform<VirtBoard> = BarePlatform::new(VirtBoard::new());

/// The board underneath [`PLATFORM`].
pub fn board() -> &'static VirtBoard {
    PLATFORM.board()
}

/// The global allocator; its arena is the linker script's heap region,
/// handed over at the start of [`smarm_bare_main`].
#[global_allocator]
static HEAP: LockedHeap = LockedHeap::empty();

/// Exit status when at least one scenario failed.
const SCENARIO_FAILED_EXIT_STATUS: i32 = 1;
/// Exit status when the board could not be brought up.
const BOARD_INIT_EXIT_STATUS: i32 = 2;

/// Prints to the board's UART.
#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => {{
        use core::fmt::Write as _;
        // The console never fails: a UART write only waits for FIFO space.
        let _ = write!($crate::board().console(), $($arg)*);
    }};
}

/// Prints a line to the board's UART.
#[macro_export]
macro_rules! println {
    () => { $crate::print!("\n") };
    ($($arg:tt)*) => {{
        use core::fmt::Write as _;
        // The console never fails: a UART write only waits for FIFO space.
        let _ = writeln!($crate::board().console(), $($arg)*);
    }};
}

/// One named check run by the image. `run` returns why it failed.
struct Scenario {
    name: &'static str,
    run: fn() -> Result<(), String>,
}

/// Everything the image checks, in order: the raw context switch first,
/// then the core runtime's scenarios (see [`scheduler`]).
const SCENARIOS: &[Scenario] = &[
    Scenario { name: "switch", run: switch::run },
    Scenario { name: "spawn_join", run: scheduler::spawn_join },
    Scenario { name: "ping_pong", run: scheduler::ping_pong },
    Scenario { name: "sleep_order", run: scheduler::sleep_order },
    Scenario { name: "select", run: scheduler::select },
    Scenario { name: "stop", run: scheduler::stop },
    Scenario { name: "panic", run: scheduler::panic },
    Scenario { name: "registry", run: scheduler::registry },
    // Last: it starts the secondary cores, which then stay up.
    Scenario { name: "smp_ping_pong", run: scheduler::smp_ping_pong },
    Scenario { name: "smp_actors", run: scheduler::smp_actors },
];

extern "C" {
    // Bounds of the heap region, from linker/qemu-virt.ld. Only their
    // addresses are used.
    static __heap_start: u8;
    static __heap_end: u8;
}

/// Hands the linker script's heap region to the global allocator.
fn init_heap() {
    let start = core::ptr::addr_of!(__heap_start) as *mut u8;
    let end = core::ptr::addr_of!(__heap_end) as usize;
    let size = end - start as usize;
    // SAFETY: `__heap_start..__heap_end` is a NOLOAD region of RAM that the
    // linker script reserves for the heap and that nothing else uses (it
    // lies after .bss and the stacks); this runs once, before any
    // allocation.
    unsafe { HEAP.lock().init(start, size) };
}

/// The image's entry point, called once by `_start` on the boot core.
#[no_mangle]
pub extern "C" fn smarm_bare_main() -> ! {
    if let Err(error) = board().init() {
        println!("board init failed: {error}");
        board().exit(BOARD_INIT_EXIT_STATUS);
    }
    init_heap();
    println!(
        "smarm bare image: {} on QEMU virt, counter at {} Hz (emulated generic timer), {}",
        Native::NAME,
        board().counter_frequency(),
        if aarch64_bare::mmu_and_caches_enabled() { "MMU on (identity map) with caches" } else { "MMU OFF" }
    );

    let mut passed = 0;
    let mut failed = 0;
    for scenario in SCENARIOS {
        match (scenario.run)() {
            Ok(()) => {
                passed += 1;
                println!("scenario {}: ok", scenario.name);
            }
            Err(why) => {
                failed += 1;
                println!("scenario {}: FAILED: {why}", scenario.name);
            }
        }
    }
    // What the abandoned (stopped, panicked) processes left behind: their
    // stacks are recycled, but whatever their frames owned is never dropped.
    let (used, size) = {
        let heap = HEAP.lock();
        (heap.used(), heap.size())
    };
    println!("heap: {used} of {size} bytes in use after the scenarios");
    println!("{passed} passed, {failed} failed");
    board().exit(if failed == 0 { 0 } else { SCENARIO_FAILED_EXIT_STATUS })
}
