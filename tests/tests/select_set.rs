//! `Select`: a set of arms built once and waited on many times. On one
//! worker, four workers on one thread, and the four-thread Engine.

mod common;
use common::*;

use std::time::Duration;

use smarm::{Never, Receiver, Select, Selectable, TryRecvError};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Arm {
    A,
    B,
    C,
}

fn pick<'a>(
    a: &'a Receiver<u32>,
    b: &'a Receiver<u32>,
    c: &'a Receiver<u32>,
) -> impl Fn(Arm) -> &'a dyn Selectable {
    move |arm| match arm {
        Arm::A => a as &dyn Selectable,
        Arm::B => b,
        Arm::C => c,
    }
}

/// With several arms ready, the first in priority order wins; `insert`
/// and `remove` change the order.
fn priority(drive: Drive) {
    drive.run(move || {
        let (a_tx, a) = smarm::channel();
        let (b_tx, b) = smarm::channel();
        let (c_tx, c) = smarm::channel();
        let mut select = Select::new();
        select.add(Arm::B);
        select.add(Arm::C);
        assert_eq!(select.try_ready(pick(&a, &b, &c)), None);
        c_tx.send(3).unwrap();
        b_tx.send(2).unwrap();
        assert_eq!(select.wait(pick(&a, &b, &c)), Arm::B);
        select.insert(0, Arm::A);
        a_tx.send(1).unwrap();
        assert_eq!(select.keys(), &[Arm::A, Arm::B, Arm::C]);
        assert_eq!(select.wait(pick(&a, &b, &c)), Arm::A);
        assert_eq!(a.try_recv(), Ok(1));
        assert_eq!(select.wait(pick(&a, &b, &c)), Arm::B);
        assert!(select.remove(Arm::B));
        assert!(!select.remove(Arm::B), "removed twice");
        assert_eq!(select.wait(pick(&a, &b, &c)), Arm::C);
        assert_eq!(c.try_recv(), Ok(3));
        assert_eq!(select.try_ready(pick(&a, &b, &c)), None, "B was removed but still picked");
    });
}
drive_tests!(priority => select_picks_the_first_ready_arm_in_priority_order, select_priority_on_4_workers, select_priority_on_4_threads);

/// One `Select` waited on for every message of three senders on other
/// workers: every message arrives exactly once, in order per sender, and
/// closed arms are removed so they do not starve the others.
fn many_waits(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        const PER_SENDER: u32 = 10_000;
        let (a_tx, a) = smarm::channel();
        let (b_tx, b) = smarm::channel();
        let (c_tx, c) = smarm::channel();
        for (k, tx) in [a_tx, b_tx, c_tx].into_iter().enumerate() {
            smarm::spawn_on((k + 1) % workers, move || {
                for n in 0..PER_SENDER {
                    tx.send(n).unwrap();
                    if n % 64 == 0 {
                        smarm::yield_now();
                    }
                }
            })
            .unwrap();
        }
        let mut select = Select::with_capacity(3);
        for arm in [Arm::A, Arm::B, Arm::C] {
            select.add(arm);
        }
        let mut next = [0u32; 3];
        while !select.is_empty() {
            let arm = select.wait(pick(&a, &b, &c));
            let (rx, slot) = match arm {
                Arm::A => (&a, 0),
                Arm::B => (&b, 1),
                Arm::C => (&c, 2),
            };
            match rx.try_recv() {
                Ok(n) => {
                    assert_eq!(n, next[slot], "arm {arm:?} out of order");
                    next[slot] += 1;
                }
                Err(TryRecvError::Disconnected) => {
                    assert!(select.remove(arm));
                }
                Err(TryRecvError::Empty) => panic!("arm {arm:?} picked but empty"),
            }
        }
        assert_eq!(next, [PER_SENDER; 3], "a message was lost or duplicated");
    });
}
drive_tests!(many_waits => one_select_receives_every_message_exactly_once, one_select_many_waits_on_4_workers, one_select_many_waits_on_4_threads);

/// `wait_timeout` is `None` when nothing comes, and the key when a message
/// arrives before the deadline; a `Never` arm never wins.
fn timeouts(drive: Drive) {
    let workers = drive.workers();
    drive.run(move || {
        let (a_tx, a) = smarm::channel::<u32>();
        let mut select = Select::new();
        select.add(0usize);
        select.add(1usize);
        let arms = |key: usize| -> &dyn Selectable {
            match key {
                0 => &Never,
                _ => &a,
            }
        };
        assert_eq!(select.wait_timeout(Duration::from_millis(5), arms), None);
        smarm::spawn_on(next_worker(workers), move || {
            smarm::sleep(Duration::from_millis(2));
            a_tx.send(7).unwrap();
        })
        .unwrap();
        assert_eq!(select.wait_timeout(Duration::from_secs(10), arms), Some(1));
        assert_eq!(a.try_recv(), Ok(7));
    });
}
drive_tests!(timeouts => select_wait_timeout_times_out_and_wakes, select_timeouts_on_4_workers, select_timeouts_on_4_threads);
