//! Loom models of the segmented storage: growth racing a lookup, and growth
//! racing a push onto a wake queue whose links live in the new segment.
//! Under loom the first segment holds two entries, so index 2 opens
//! segment 1.

use super::Segments;
use crate::kernel::ring::test_node::Node;
use crate::kernel::ring::IntrusiveQueue;
use alloc::vec::Vec;
use loom::sync::Arc;
use loom::thread;

/// Segmented storage holding `count` nodes whose payloads are their indices.
fn table(count: usize) -> Segments<Node> {
    let table = Segments::new();
    for index in 0..count {
        // SAFETY: one pusher (the caller, before sharing the table).
        let pushed = unsafe { table.push(Node::new(index)) };
        assert_eq!(pushed, Ok(index as u32));
    }
    table
}

/// One thread appends entries 1 and 2 (the second opens a new segment)
/// while another looks both up: a lookup finds either nothing or the
/// whole entry, payload included. Fails with `Segments::push` storing the
/// length Relaxed (the payload read races its creation).
#[test]
fn slab_growth_races_lookup() {
    loom::model(|| {
        let table = Arc::new(table(1));
        let grower = {
            let table = table.clone();
            thread::spawn(move || {
                for value in 1..3 {
                    // SAFETY: the only pusher.
                    let index = unsafe { table.push(Node::new(value)) };
                    assert_eq!(index, Ok(value as u32));
                }
            })
        };
        // Newest first: seeing entry 2 implies seeing entry 1. The first
        // look may come before, during or after the growth; then wait for
        // entry 2, so that every model reads it across threads.
        let late = table.get(2).map(Node::value);
        let early = table.get(1).map(Node::value);
        assert!(late.is_none() || early.is_some(), "entry 2 visible before entry 1");
        assert!(late.is_none_or(|value| value == 2));
        assert!(early.is_none_or(|value| value == 1));
        let value = loop {
            match table.get(2) {
                Some(node) => break node.value(),
                None => thread::yield_now(),
            }
        };
        assert_eq!(value, 2);
        assert_eq!(table.get(1).map(Node::value), Some(1));
        assert_eq!(table.get(0).map(Node::value), Some(0));
        grower.join().expect("grower panicked");
        assert_eq!(table.len(), 3);
        assert_eq!(table.get(3).map(Node::value), None);
    });
}

/// A spawner appends entry 2 (opening segment 1) and pushes it onto the
/// wake list — the spawn path — while a waker pushes entry 0 onto the same
/// list; the consumer follows links into the new segment. Fails with the
/// list's push CAS Relaxed (the consumer's link lookup misses entry 2, or
/// its payload read races its creation). With the push's Release, the
/// slab's own length ordering is not needed here — the push carries the
/// growth — which is why `slab_growth_races_lookup` checks that one.
#[test]
fn slab_growth_races_queue_push() {
    loom::model(|| {
        let table = Arc::new(table(2));
        let queue = Arc::new(IntrusiveQueue::default());
        let spawner = {
            let (table, queue) = (table.clone(), queue.clone());
            thread::spawn(move || {
                // SAFETY: the only pusher.
                let index = unsafe { table.push(Node::new(2)) }.expect("room");
                queue.push(&*table, index);
            })
        };
        let waker = {
            let (table, queue) = (table.clone(), queue.clone());
            thread::spawn(move || queue.push(&*table, 0))
        };
        let mut got = Vec::new();
        while got.len() < 2 {
            match queue.pop(&*table) {
                Some(index) => got.push((index, table.get(index).expect("a pushed entry exists").value())),
                None => thread::yield_now(),
            }
        }
        spawner.join().expect("spawner panicked");
        waker.join().expect("waker panicked");
        got.sort_unstable();
        assert_eq!(got, [(0, 0), (2, 2)]);
    });
}
