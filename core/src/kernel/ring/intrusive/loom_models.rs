//! Loom models of the wake queues: the intrusive list alone, and the ring
//! with the list behind it. Each payload is read through loom's cell, so a
//! pop not ordered after its push is a causality violation.

use super::test_node::{table, NodeTable};
use super::*;
use alloc::vec::Vec;
use loom::sync::Arc;
use loom::thread;

/// Pops `count` indices (yielding while a push is in flight) and returns
/// them with the payloads read through them.
fn pop_count(queue: impl Fn() -> Option<u32>, table: &NodeTable, count: usize) -> Vec<(u32, usize)> {
    let mut out = Vec::new();
    while out.len() < count {
        match queue() {
            Some(index) => {
                let node = table.get(index).expect("a pushed index is in the table");
                out.push((index, node.value()));
            }
            None => thread::yield_now(),
        }
    }
    out
}

/// Pushes `index` after writing its payload (`10 + index`), as a waker
/// changes a process's state before queueing it.
fn set_and_push(queue: &IntrusiveQueue, table: &NodeTable, index: u32) {
    // SAFETY: the node is in no queue; this thread pushes it next.
    unsafe { table.get(index).expect("in the table").set(10 + index as usize) };
    queue.push(table, index);
}

/// Two producers each write a node's payload and push it onto the list
/// while the consumer pops; both come out exactly once, with the payloads
/// written. Fails with the push's CAS Relaxed or the consumer's swap
/// Relaxed (the payload read races the producer's write), or without the
/// batch reversal's link rewrite (an index is lost or repeated).
#[test]
fn intrusive_push_pop_race() {
    loom::model(|| {
        let table = Arc::new(table(2));
        let queue = Arc::new(IntrusiveQueue::default());
        let producers: Vec<_> = (0..2u32)
            .map(|index| {
                let (table, queue) = (table.clone(), queue.clone());
                thread::spawn(move || set_and_push(&queue, &table, index))
            })
            .collect();
        let mut got = pop_count(|| queue.pop(&*table), &table, 2);
        for producer in producers {
            producer.join().expect("producer panicked");
        }
        got.sort_unstable();
        assert_eq!(got, [(0, 10), (1, 11)]);
        assert_eq!(queue.pop(&*table), None);
        assert!(queue.is_empty());
    });
}

/// Pushes onto the list while the consumer holds a batch: the new entry
/// comes after the batch, and nothing is lost between the two.
#[test]
fn intrusive_push_during_batch() {
    loom::model(|| {
        let table = Arc::new(table(3));
        let queue = Arc::new(IntrusiveQueue::default());
        queue.push(&*table, 0);
        queue.push(&*table, 1);
        let producer = {
            let (table, queue) = (table.clone(), queue.clone());
            thread::spawn(move || queue.push(&*table, 2))
        };
        let got = pop_count(|| queue.pop(&*table), &table, 3);
        producer.join().expect("producer panicked");
        let order: Vec<u32> = got.iter().map(|&(index, _)| index).collect();
        // 0 before 1 always; 2 anywhere (it may join the first batch).
        let position = |wanted| order.iter().position(|&index| index == wanted).expect("popped");
        assert!(position(0) < position(1), "{order:?}");
        assert_eq!(queue.pop(&*table), None);
    });
}

/// The ring in front is full (capacity two under loom): two producers race,
/// one value at least goes to the list, and the consumer gets all four
/// exactly once. Fails if `WakeQueue::pop` stops looking at the list when
/// the ring is empty (the overflowed index is never popped: the model
/// never ends — loom reports the livelock as a branch limit).
#[test]
fn wake_queue_overflow_race() {
    loom::model(|| {
        let table = Arc::new(table(4));
        let queue = Arc::new(WakeQueue::try_new().expect("ring memory"));
        queue.push(&*table, 0);
        queue.push(&*table, 1);
        let producers: Vec<_> = (2..4u32)
            .map(|index| {
                let (table, queue) = (table.clone(), queue.clone());
                thread::spawn(move || {
                    // SAFETY: the node is in no queue; this thread pushes it.
                    unsafe { table.get(index).expect("in the table").set(10 + index as usize) };
                    queue.push(&*table, index);
                })
            })
            .collect();
        let mut got = pop_count(|| queue.pop(&*table), &table, 4);
        for producer in producers {
            producer.join().expect("producer panicked");
        }
        got.sort_unstable();
        assert_eq!(got, [(0, 0), (1, 1), (2, 12), (3, 13)]);
        assert_eq!(queue.pop(&*table), None);
    });
}
