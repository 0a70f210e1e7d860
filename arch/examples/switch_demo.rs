//! smarm's current main demo: ping-pong between two contexts and time it.
//!
//! Usage: `cargo run --release -p smarm-arch --example switch_demo [ROUND_TRIPS]`
//! (default 1,000,000). Each round trip is two switches (main → worker →
//! main). Prints the count, cycles per switch from the architecture's
//! timestamp counter, and nanoseconds per switch from `Instant`. Exits 1 if
//! the worker's count disagrees with main's, 2 on a bad argument.

use std::process::ExitCode;
use std::time::Instant;

use smarm_arch::{Arch, Context, Native};

const DEFAULT_ROUND_TRIPS: u64 = 1_000_000;
const STACK_BYTES: usize = 64 * 1024;

/// One 16-aligned unit of the worker's stack.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct StackUnit([u8; 16]);

/// Shared by the two contexts through a raw pointer.
struct PingPong {
    main: Context,
    worker: Context,
    /// Incremented by the worker once per round trip.
    count: u64,
}

unsafe extern "C" fn worker(arg: usize) -> ! {
    let ping_pong = arg as *mut PingPong;
    loop {
        // SAFETY: main keeps `*ping_pong` alive for as long as it switches
        // here and is suspended while this runs; both contexts are valid.
        unsafe {
            (*ping_pong).count += 1;
            Native::switch(&raw mut (*ping_pong).worker, &raw const (*ping_pong).main);
        }
    }
}

fn main() -> ExitCode {
    let round_trips = match std::env::args().nth(1).map(|text| text.replace('_', "").parse::<u64>()) {
        None => DEFAULT_ROUND_TRIPS,
        Some(Ok(count)) if count > 0 => count,
        Some(_) => {
            eprintln!("usage: switch_demo [ROUND_TRIPS > 0]  (default {DEFAULT_ROUND_TRIPS})");
            return ExitCode::from(2);
        }
    };

    let mut stack = vec![StackUnit([0; 16]); STACK_BYTES / size_of::<StackUnit>()].into_boxed_slice();
    let stack_top = stack.as_mut_ptr_range().end.cast::<u8>();
    let ping_pong =
        Box::into_raw(Box::new(PingPong { main: Context::empty(), worker: Context::empty(), count: 0 }));
    // SAFETY: `stack_top` is the 16-aligned end of a 64 KiB allocation that
    // outlives every switch into the worker; `ping_pong` stays alive until
    // after the last switch.
    unsafe { (*ping_pong).worker = Native::init_context(stack_top, worker, ping_pong as usize) };

    let started = Instant::now();
    let ticks_before = Native::timestamp();
    for _ in 0..round_trips {
        // SAFETY: the worker is suspended (or fresh) whenever main runs.
        unsafe { Native::switch(&raw mut (*ping_pong).main, &raw const (*ping_pong).worker) };
    }
    let ticks = Native::timestamp().wrapping_sub(ticks_before);
    let elapsed = started.elapsed();

    // SAFETY: the worker is suspended for good; nothing else uses the box.
    let ping_pong = unsafe { Box::from_raw(ping_pong) };
    drop(stack);

    let switches = 2 * round_trips;
    let ticks_per_switch = ticks as f64 / switches as f64;
    let nanoseconds_per_switch = elapsed.as_nanos() as f64 / switches as f64;
    println!("arch:            {}", Native::NAME);
    println!("round trips:     {round_trips} requested, {} counted by the worker", ping_pong.count);
    println!("switches:        {switches}");
    match Native::timestamp_frequency() {
        Some(hertz) => println!(
            "cycles/switch:   {ticks_per_switch:.1} (timestamp ticks at {:.3} MHz)",
            hertz as f64 / 1e6
        ),
        None => println!("cycles/switch:   {ticks_per_switch:.1} (timestamp ticks; frequency not reported)"),
    }
    println!("ns/switch:       {nanoseconds_per_switch:.2} (wall clock, {elapsed:?} total)");

    if ping_pong.count == round_trips {
        ExitCode::SUCCESS
    } else {
        eprintln!("FAIL: the worker counted {} round trips, expected {round_trips}", ping_pong.count);
        ExitCode::FAILURE
    }
}
