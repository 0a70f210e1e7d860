//! Loom model of `block_on`'s hand-off: a wake from another thread racing
//! the caller between its poll and its park.
//!
//! The caller is a plain thread whose sleep yields to loom (a spurious
//! return, which a thread's park tolerates by looking again), so a lost
//! wake shows as a caller that never finishes.
//!
//! Theorem (`a_wake_racing_the_park_is_never_lost`): whatever the
//! interleaving, a future made ready and woken by another thread is
//! polled again and `drive` returns its output — including when the
//! future kept the waker of an earlier poll. Fails if the caller looks at
//! `notified` before storing its wait in the slot (a wake in between
//! reads the old slot and the caller parks for good), or if the wake
//! skips the slot.

use alloc::sync::Arc;
use core::future::Future;
use core::pin::{pin, Pin};
use core::task::{Context, Poll, Waker};

use loom::sync::Mutex;
use loom::thread;

use super::{drive, Notify};
use crate::kernel::atomic::{AtomicBool, Ordering};
use crate::kernel::host::ThreadHooks;
use crate::kernel::spin::RuntimeMutex;
use crate::kernel::wait::Wait;
use smarm_platform::{Nanos, ParkToken};

fn park_yield(_: &ParkToken, _: Option<Nanos>) {
    thread::yield_now();
}

fn unpark_nothing(_: &ParkToken) {}

fn clock() -> Nanos {
    0
}

static HOOKS: ThreadHooks = ThreadHooks { park: park_yield, unpark: unpark_nothing, now: clock };

/// Ready once `ready` is set; keeps only the first waker it is given.
struct Flag {
    ready: Arc<AtomicBool>,
    waker: Arc<Mutex<Option<Waker>>>,
}

impl Future for Flag {
    type Output = u32;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
        {
            let mut kept = self.waker.lock().unwrap();
            if kept.is_none() {
                *kept = Some(cx.waker().clone());
            }
        }
        if self.ready.load(Ordering::Acquire) {
            Poll::Ready(7)
        } else {
            Poll::Pending
        }
    }
}

#[test]
fn a_wake_racing_the_park_is_never_lost() {
    loom::model(|| {
        let ready = Arc::new(AtomicBool::new(false));
        let kept: Arc<Mutex<Option<Waker>>> = Arc::new(Mutex::new(None));
        let notify = Arc::new(Notify { notified: AtomicBool::new(false), waiter: RuntimeMutex::leaf(None) });
        let setter = {
            let (ready, kept) = (ready.clone(), kept.clone());
            thread::spawn(move || {
                ready.store(true, Ordering::Release);
                // The waker the future kept, if it has polled yet; if not,
                // its first poll sees `ready`.
                let waker = kept.lock().unwrap().clone();
                if let Some(waker) = waker {
                    waker.wake();
                }
            })
        };
        let future = pin!(Flag { ready, waker: kept });
        assert_eq!(drive(future, &notify, || Some(Wait::on_thread(&HOOKS))), 7);
        setter.join().unwrap();
    });
}
