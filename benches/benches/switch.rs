//! The raw context switch: one round trip from the bench thread into a
//! context that at once switches back, i.e. two switches.
//!
//! - `smarm/arch_switch` is `smarm_arch::Native::switch` (symmetric: entered
//!   by a call, leaves by a return to the other side) on a stack this file
//!   allocates, with nothing around it.
//! - `smarm/arch_resume_suspend` is the same round trip through the pair the
//!   scheduler uses: `Native::resume` in, `Native::suspend` back, which keeps
//!   call / return balanced for the return-address predictor: the floor
//!   under every smarm yield.
//! - `corosensei/resume_suspend` is one `Coroutine::resume(())` whose body
//!   loops on `Yielder::suspend(())`: the same round trip through
//!   corosensei's safe API, the peer the switch is measured against.
//!
//! Both are measured with `Bencher::iter` in the same group, so the loop and
//! `black_box` cost is the same on both sides, and both contexts are set up
//! before timing starts and torn down after it.

use std::alloc::{self, Layout};
use std::hint::black_box;
use std::ptr::{self, NonNull};

use corosensei::stack::DefaultStack;
use corosensei::Coroutine;
use criterion::{criterion_group, criterion_main, Criterion};
use smarm_arch::{Arch, Context, Native};

/// Stack size for both sides; the bouncing context needs only a few frames.
const STACK_SIZE: usize = 64 * 1024;

/// What the bench thread and the bouncing context share. It lives in a heap
/// allocation that both reach through one raw pointer, so neither side holds
/// a Rust reference across a switch.
#[repr(C)]
struct Shared {
    /// Where the bench thread is saved while the bouncer runs.
    bench: Context,
    /// Where the bouncer is saved while the bench thread runs.
    bouncer: Context,
    /// Set by the bench thread before its last switch in: the bouncer then
    /// switches back one final time and is never resumed.
    finish: bool,
}

/// A context that answers every switch into it with a switch straight back:
/// `switch` both ways, or (`PAIR`) `resume` in and `suspend` back.
struct Bouncer<const PAIR: bool> {
    shared: NonNull<Shared>,
    stack: NonNull<u8>,
    stack_layout: Layout,
}

impl<const PAIR: bool> Bouncer<PAIR> {
    fn new() -> Self {
        let stack_layout = Layout::from_size_align(STACK_SIZE, Native::STACK_ALIGN.max(16))
            .expect("stack size and alignment form a valid layout");
        // SAFETY: the layout has a non-zero size.
        let stack = unsafe { alloc::alloc(stack_layout) };
        let Some(stack) = NonNull::new(stack) else { alloc::handle_alloc_error(stack_layout) };
        let shared = NonNull::from(Box::leak(Box::new(Shared {
            bench: Context::empty(),
            bouncer: Context::empty(),
            finish: false,
        })));
        // SAFETY: `stack_top` is one past the end of a live allocation of
        // STACK_SIZE bytes aligned to at least STACK_ALIGN, and STACK_SIZE is
        // a multiple of it, so the top is aligned too. The stack stays
        // allocated until `drop`, after the bouncer's final switch out.
        let bouncer_context = unsafe {
            Native::init_context(stack.as_ptr().add(STACK_SIZE), bounce::<PAIR>, shared.as_ptr() as usize)
        };
        // SAFETY: `shared` is a live, exclusively owned allocation.
        unsafe { (*shared.as_ptr()).bouncer = bouncer_context };
        let bouncer = Bouncer { shared, stack, stack_layout };
        // Run the entry once so its first-call frame setup stays out of
        // the measured round trips.
        bouncer.round_trip();
        bouncer
    }

    /// Switches into the bouncer and back.
    #[inline(always)]
    fn round_trip(&self) {
        let shared = self.shared.as_ptr();
        // SAFETY: `bouncer` holds the context saved by the bouncer's previous
        // switch out (or the fresh one from `init_context`), not resumed
        // since; its stack is allocated for as long as `self` lives. The two
        // fields are distinct, so save and load do not alias. The bouncer
        // has not finished: only `drop` sets `finish`.
        unsafe {
            let (bench, bouncer) = (ptr::addr_of_mut!((*shared).bench), ptr::addr_of!((*shared).bouncer));
            if PAIR {
                Native::resume(bench, bouncer)
            } else {
                Native::switch(bench, bouncer)
            }
        }
    }
}

impl<const PAIR: bool> Drop for Bouncer<PAIR> {
    fn drop(&mut self) {
        let shared = self.shared.as_ptr();
        // SAFETY: the bouncer is suspended, so nothing else touches `shared`.
        unsafe { (*shared).finish = true };
        // The bouncer sees `finish` and switches back for the last time.
        self.round_trip();
        // SAFETY: the bouncer is suspended for good (it is never switched to
        // again), so its stack and `shared` are no longer in use. Both were
        // allocated in `new` with exactly these layouts.
        unsafe {
            alloc::dealloc(self.stack.as_ptr(), self.stack_layout);
            drop(Box::from_raw(shared));
        }
    }
}

/// The bouncer's entry: switch back, and again on every switch in, until
/// told to finish.
///
/// # Safety
///
/// `arg` is the address of the `Shared` of the [`Bouncer`] that made this
/// context, and this runs only on that bouncer's stack.
unsafe extern "C" fn bounce<const PAIR: bool>(arg: usize) -> ! {
    let shared = arg as *mut Shared;
    loop {
        // SAFETY: `bench` was saved by the switch that entered this context
        // and is not resumed anywhere else; `bouncer` is a distinct field of
        // the same live `Shared` (the caller's contract).
        unsafe { back_to_bench::<PAIR>(shared) };
        // SAFETY: the bench thread is suspended while this runs, and it
        // wrote `finish` before switching in; the switch is a call the
        // compiler cannot see through, so the read is not hoisted.
        if unsafe { (*shared).finish } {
            break;
        }
    }
    // SAFETY: as in the loop. The bench thread never switches to `bouncer`
    // again, so this switch does not return.
    unsafe { back_to_bench::<PAIR>(shared) };
    unreachable!("a finished bouncer was resumed");
}

/// The bouncer's way back: `suspend` for the pair, `switch` otherwise.
///
/// # Safety
///
/// `shared` is the bouncer's live `Shared`, this runs on the bouncer's
/// stack, and `bench` holds the context that entered it.
#[inline(always)]
unsafe fn back_to_bench<const PAIR: bool>(shared: *mut Shared) {
    // SAFETY: the caller's contract: `bench` is resumable, `bouncer` a
    // distinct field valid for writes.
    unsafe {
        let (bouncer, bench) = (ptr::addr_of_mut!((*shared).bouncer), ptr::addr_of!((*shared).bench));
        if PAIR {
            Native::suspend(bouncer, bench)
        } else {
            Native::switch(bouncer, bench)
        }
    }
}

fn switch_round_trip(criterion: &mut Criterion) {
    let mut group = criterion.benchmark_group("switch_round_trip");

    // Both contexts are made once, before criterion's warm-up, and dropped
    // after the group: criterion calls each routine once per sample.
    let bouncer = Bouncer::<false>::new();
    group.bench_function("smarm/arch_switch", |bencher| bencher.iter(|| bouncer.round_trip()));
    drop(bouncer);

    let bouncer = Bouncer::<true>::new();
    group.bench_function("smarm/arch_resume_suspend", |bencher| bencher.iter(|| bouncer.round_trip()));
    drop(bouncer);

    let stack = DefaultStack::new(STACK_SIZE).expect("corosensei could not map its stack");
    let mut coroutine: Coroutine<(), (), (), DefaultStack> =
        Coroutine::with_stack(stack, |yielder, ()| loop {
            yielder.suspend(());
        });
    // Same warm start as the smarm side: the body is already running.
    black_box(coroutine.resume(()));
    group.bench_function("corosensei/resume_suspend", |bencher| bencher.iter(|| coroutine.resume(())));
    // Dropping the suspended coroutine unwinds its stack (the body's loop
    // included) before unmapping it.
    drop(coroutine);

    group.finish();
}

criterion_group!(benches, switch_round_trip);
criterion_main!(benches);
