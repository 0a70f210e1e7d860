//! Loom models of the blocking primitives' wake protocols.
//!
//! The channel, select and mutex code parks processes through the worker,
//! which loom cannot run (it switches stacks). These models replay each
//! protocol step for step on the same pieces the real code uses — the
//! [`StateWord`] transitions and a [`SpinLock`] around the primitive's
//! state — with one loom thread per process. A "parked" model process
//! waits until a waker has moved its word to `Queued` and then resumes
//! (`begin_run`), which is exactly what its worker does for it.
//!
//! Theorems (one named test each):
//! - `sender_racing_receiver_park`: a message sent while the receiver is
//!   between registering and parking is never lost, and the receiver ends up
//!   with it.
//! - `sender_racing_receiver_open_under_lock`: the same with the wait
//!   opened under the lock of the look that found nothing, as a process's
//!   `recv` does.
//! - `select_racing_two_senders`: two senders racing into both arms of a
//!   select wake it exactly once; the losing arm's registration cannot wake
//!   the process's next wait.
//! - `timeout_racing_grant`: a mutex grant racing the waiter's timeout timer
//!   is never lost: the waiter owns the lock, or the lock is free.
//! - `handed_values_racing_a_stray_wake`: on an unbounded channel, values
//!   handed to a receiver parked in `recv` (the hand slot) come out once
//!   each and in order, even when a wake that is not the hand's (a
//!   deadline's timer) lets the receiver look under the lock before it
//!   sees the hand; `a_look_that_skips_the_hand_slot_loses_a_value` shows
//!   the model fails when that look leaves the slot alone.

use alloc::collections::VecDeque;
use loom::sync::Arc;
use loom::thread;

use crate::kernel::atomic::{AtomicBool, Ordering, UnsafeCell};
use crate::kernel::spin::SpinLock;
use crate::kernel::state::{Park, StateWord, Unpark};

const G: u32 = 3;

/// A spawned, running process.
fn process() -> Arc<StateWord> {
    let w = StateWord::new(G);
    w.claim(G).unwrap();
    w.begin_run(G).unwrap();
    Arc::new(w)
}

/// The owner's side of `park()`: if parked, wait for the worker to be
/// handed the process (a waker made it `Queued`), then resume it.
fn park(word: &StateWord) {
    if word.park(G) == Park::Parked {
        while word.begin_run(G).is_err() {
            thread::yield_now();
        }
    }
}

/// A waker's side: returns whether the wake landed.
fn wake(word: &StateWord, epoch: u32) -> bool {
    match word.unpark_at(G, epoch) {
        Unpark::Enqueue | Unpark::Notified => true,
        Unpark::Stale => false,
    }
}

struct Chan {
    queue: VecDeque<u32>,
    receiver: Option<u32>,
}

fn chan() -> Arc<SpinLock<Chan>> {
    Arc::new(SpinLock::new(Chan { queue: VecDeque::new(), receiver: None }))
}

/// `Sender::try_send`: push, take the registration under the lock, wake
/// after releasing it.
fn send(ch: &SpinLock<Chan>, word: &StateWord, value: u32) -> bool {
    let waiter = {
        let mut c = ch.lock();
        c.queue.push_back(value);
        c.receiver.take()
    };
    waiter.is_some_and(|epoch| wake(word, epoch))
}

/// A thread that sends `value` on `ch` to the process of `word`.
fn spawn_sender(word: &Arc<StateWord>, ch: &Arc<SpinLock<Chan>>, value: u32) -> thread::JoinHandle<bool> {
    let (word, ch) = (word.clone(), ch.clone());
    thread::spawn(move || send(&ch, &word, value))
}

#[test]
fn sender_racing_receiver_park() {
    loom::model(|| {
        let word = process();
        let ch = chan();
        let sender = spawn_sender(&word, &ch, 42);
        // `Receiver::recv`: open a wait, look, register, park, loop.
        let got = loop {
            let epoch = word.begin_wait(G);
            {
                let mut c = ch.lock();
                if let Some(v) = c.queue.pop_front() {
                    drop(c);
                    let _ = word.retire_wait(G);
                    break v;
                }
                c.receiver = Some(epoch);
            }
            park(&word);
        };
        assert_eq!(got, 42);
        sender.join().unwrap();
        // The process is running and owes nothing: no stray notification.
        assert!(!word.clear_notify(G));
    });
}

/// `Receiver::recv` in a process: one lock per look. The look that finds
/// nothing opens the wait (on the word's own epoch when it can) and
/// registers it under the same lock, and the stop observation (not
/// modelled: no stop here) comes after the lock.
#[test]
fn sender_racing_receiver_open_under_lock() {
    loom::model(|| {
        let word = process();
        let ch = chan();
        let sender = spawn_sender(&word, &ch, 42);
        let got = loop {
            {
                let mut c = ch.lock();
                if let Some(v) = c.queue.pop_front() {
                    break v;
                }
                c.receiver = Some(word.begin_wait_reusing(G));
            }
            park(&word);
        };
        assert_eq!(got, 42);
        sender.join().unwrap();
        // The process is running and owes nothing: no stray notification.
        assert!(!word.clear_notify(G));
    });
}

#[test]
fn select_racing_two_senders() {
    loom::model(|| {
        let word = process();
        let (a, b) = (chan(), chan());
        let senders: [_; 2] = [a.clone(), b.clone()].map(|ch| {
            let word = word.clone();
            thread::spawn(move || send(&ch, &word, 1))
        });
        // `select`: one wait, registered in each arm in order; an arm ready
        // at registration retires the wait instead of parking.
        let epoch = word.begin_wait(G);
        let mut ready_at_registration = false;
        for ch in [&a, &b] {
            let mut c = ch.lock();
            if !c.queue.is_empty() {
                ready_at_registration = true;
                break;
            }
            c.receiver = Some(epoch);
        }
        if ready_at_registration {
            let _ = word.retire_wait(G);
        } else {
            park(&word);
        }
        assert!(!a.lock().queue.is_empty() || !b.lock().queue.is_empty(), "woken with no arm ready");
        // The next wait: nobody registered it, so nothing may wake it; the
        // loser arm's registration (old epoch) must be inert.
        let next = word.begin_wait(G);
        let landed: usize = senders.map(|s| usize::from(s.join().unwrap())).into_iter().sum();
        assert!(landed <= 1, "two wakes landed on one wait");
        assert_eq!(word.park(G), Park::Parked, "a stale arm woke a later wait");
        assert!(!wake(&word, next.wrapping_sub(1)), "an old stamp landed");
    });
}

struct Lock {
    locked: bool,
    waiters: VecDeque<u32>,
    granted: Option<u32>,
}

#[test]
fn timeout_racing_grant() {
    loom::model(|| {
        let word = process();
        let lock = Arc::new(SpinLock::new(Lock { locked: true, waiters: VecDeque::new(), granted: None }));
        // The waiter registers before the race starts.
        let epoch = word.begin_wait(G);
        lock.lock().waiters.push_back(epoch);

        // The holder unlocks: hands the lock to the first waiter.
        let holder = {
            let (lock, word) = (lock.clone(), word.clone());
            thread::spawn(move || {
                let next = {
                    let mut l = lock.lock();
                    match l.waiters.pop_front() {
                        Some(e) => {
                            l.granted = Some(e);
                            Some(e)
                        }
                        None => {
                            l.locked = false;
                            None
                        }
                    }
                };
                if let Some(e) = next {
                    wake(&word, e);
                }
            })
        };
        // The waiter's timer fires (same stamp).
        let timer = {
            let word = word.clone();
            thread::spawn(move || {
                wake(&word, epoch);
            })
        };
        park(&word);
        // `lock_timeout` after its wake: grant first.
        let owns = {
            let mut l = lock.lock();
            if l.granted == Some(epoch) {
                l.granted = None;
                true
            } else {
                l.waiters.retain(|e| *e != epoch);
                false
            }
        };
        holder.join().unwrap();
        timer.join().unwrap();
        let l = lock.lock();
        // Either we own it (it stays locked, by us), or it is free; never
        // locked-and-granted to nobody.
        assert!(owns || !l.locked, "the grant was lost: locked with no owner");
        assert!(l.granted.is_none());
    });
}

/// An unbounded channel with its hand slot: the queue and `receiving`
/// under the lock, the slot and its flag beside it (`sync::channel`).
struct HandChan {
    inner: SpinLock<HandInner>,
    slot: UnsafeCell<Option<u32>>,
    ready: AtomicBool,
}

struct HandInner {
    queue: VecDeque<u32>,
    receiver: Option<u32>,
    receiving: bool,
}

impl HandChan {
    fn new() -> Arc<HandChan> {
        Arc::new(HandChan {
            inner: SpinLock::new(HandInner { queue: VecDeque::new(), receiver: None, receiving: false }),
            slot: UnsafeCell::new(None),
            ready: AtomicBool::new(false),
        })
    }

    /// `Sender::send`: hand the value over if the receiver is parked in
    /// `recv`, else queue it; wake after the lock.
    fn send(&self, word: &StateWord, value: u32) -> bool {
        let waiter = {
            let mut c = self.inner.lock();
            if c.receiving {
                c.receiving = false;
                // SAFETY: the lock is held and `receiving` was set: the
                // slot is this sender's (the protocol under test; loom
                // reports any access that races this one).
                self.slot.with_mut(|slot| unsafe {
                    assert!((*slot).is_none(), "a handed value was overwritten before it was taken");
                    *slot = Some(value);
                });
                self.ready.store(true, Ordering::Release);
            } else {
                c.queue.push_back(value);
            }
            c.receiver.take()
        };
        waiter.is_some_and(|epoch| wake(word, epoch))
    }

    /// The receiver's take from the slot, without the lock.
    fn take_handed(&self) -> Option<u32> {
        if !self.ready.load(Ordering::Acquire) {
            return None;
        }
        self.ready.store(false, Ordering::Relaxed);
        // SAFETY: the flag's Acquire saw the hand's write; no sender writes
        // the slot again before the receiver registers once more.
        self.slot.with_mut(|slot| unsafe { (*slot).take() })
    }
}

/// A sender sends 1 then 2 to a process receiving twice in a plain
/// `recv`; a timer wakes the receiver's first wait (a deadline's wake,
/// which is not the hand's). `look_in_slot`: the look under the lock
/// takes a handed value first, as `Receiver::take_locked` does.
fn hand_model(look_in_slot: bool) {
    loom::model(move || {
        let word = process();
        let ch = HandChan::new();
        let sent = Arc::new(AtomicBool::new(false));
        let sender = {
            let (word, ch, sent) = (word.clone(), ch.clone(), sent.clone());
            thread::spawn(move || {
                ch.send(&word, 1);
                ch.send(&word, 2);
                sent.store(true, Ordering::Release);
            })
        };
        let mut timer = None;
        let mut got = alloc::vec::Vec::new();
        while got.len() < 2 {
            {
                let mut c = ch.inner.lock();
                c.receiving = false;
                if look_in_slot {
                    if let Some(v) = ch.take_handed() {
                        got.push(v);
                        continue;
                    }
                }
                if let Some(v) = c.queue.pop_front() {
                    got.push(v);
                    continue;
                }
                // Both sends done and their values not here: nobody
                // would wake this wait.
                assert!(!sent.load(Ordering::Acquire), "a handed value was lost (got {got:?})");
                let epoch = word.begin_wait_reusing(G);
                c.receiver = Some(epoch);
                c.receiving = true;
                if timer.is_none() {
                    let word = word.clone();
                    timer = Some(thread::spawn(move || wake(&word, epoch)));
                }
            }
            park(&word);
            if let Some(v) = ch.take_handed() {
                got.push(v);
            }
        }
        assert_eq!(got, [1, 2], "a handed value came out of order");
        sender.join().unwrap();
        if let Some(timer) = timer {
            let _ = timer.join().unwrap();
        }
    });
}

#[test]
fn handed_values_racing_a_stray_wake() {
    hand_model(true);
}

/// The model fails when the look under the lock leaves the hand slot
/// alone: the receiver registers again over a value it has not taken, and
/// the next hand overwrites it (or no hand comes and it is lost).
#[test]
#[should_panic(expected = "a handed value")]
fn a_look_that_skips_the_hand_slot_loses_a_value() {
    hand_model(false);
}
