//! The ordering guarantee (spec §7): messages from one sender to one
//! receiver arrive in send order, whichever workers the two run on.

mod common;
#[allow(unused_imports)]
use common::{ms, next_worker, record, Drive, Trace};

use smarm::{Selectable, TryRecvError};

const SENDERS: usize = 8;
const PER_SENDER: u64 = 10_000;

/// 8 senders, spread round-robin over the workers, each sending
/// `PER_SENDER` sequence numbers to one receiver on worker 0.
fn per_pair_fifo(drive: Drive) {
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let (tx, rx) = smarm::channel::<(usize, u64)>();
        let handles: Vec<_> = (0..SENDERS)
            .map(|k| {
                let tx = tx.clone();
                rt.spawn(move || {
                    for seq in 0..PER_SENDER {
                        tx.send((k, seq)).unwrap();
                        // Vary the interleaving per sender.
                        if seq.is_multiple_of(13 + k as u64) {
                            smarm::yield_now();
                        }
                    }
                })
                .unwrap()
            })
            .collect();
        drop(tx);
        let mut next = [0u64; SENDERS];
        let mut total = 0u64;
        let mut interleaved = false;
        let mut last_sender = usize::MAX;
        while let Ok((k, seq)) = rx.recv() {
            assert_eq!(seq, next[k], "sender {k}: expected {} got {seq}", next[k]);
            next[k] += 1;
            total += 1;
            interleaved |= last_sender != usize::MAX && last_sender != k && next[last_sender] < PER_SENDER;
            last_sender = k;
        }
        assert_eq!(total, SENDERS as u64 * PER_SENDER);
        assert_eq!(next, [PER_SENDER; SENDERS]);
        assert!(interleaved, "the senders never interleaved; the test proved nothing");
        for h in handles {
            h.join().unwrap();
        }
    });
}

drive_tests!(per_pair_fifo => per_sender_fifo_80k_messages, per_sender_fifo_80k_messages_on_4_workers, per_sender_fifo_80k_messages_on_4_threads);

/// Each of 8 senders feeds two receivers on different workers; each
/// receiver checks every sender's sequence independently.
fn two_receivers(drive: Drive) {
    let workers = drive.workers();
    const PER: u64 = 2_000;
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..2).map(|_| smarm::channel::<(usize, u64)>()).unzip();
        let (result_tx, results) = smarm::channel::<u64>();
        let receivers: Vec<_> = rxs
            .into_iter()
            .enumerate()
            .map(|(r, rx)| {
                let result_tx = result_tx.clone();
                smarm::spawn_on((r + 1) % workers, move || {
                    let mut next = [0u64; SENDERS];
                    let mut total = 0;
                    while let Ok((k, seq)) = rx.recv() {
                        assert_eq!(seq, next[k], "receiver {r}, sender {k}");
                        next[k] += 1;
                        total += 1;
                    }
                    assert_eq!(next, [PER; SENDERS]);
                    result_tx.send(total).unwrap();
                })
                .unwrap()
            })
            .collect();
        drop(result_tx);
        let senders: Vec<_> = (0..SENDERS)
            .map(|k| {
                let txs = txs.clone();
                rt.spawn(move || {
                    for seq in 0..PER {
                        // Both receivers get every sequence number, in
                        // alternating order.
                        let first = (seq % 2) as usize;
                        txs[first].send((k, seq)).unwrap();
                        txs[1 - first].send((k, seq)).unwrap();
                        if seq.is_multiple_of(32) {
                            smarm::yield_now();
                        }
                    }
                })
                .unwrap()
            })
            .collect();
        drop(txs);
        for s in senders {
            s.join().unwrap();
        }
        let totals: Vec<u64> = std::iter::from_fn(|| results.recv().ok()).collect();
        assert_eq!(totals, [SENDERS as u64 * PER; 2]);
        for r in receivers {
            r.join().unwrap();
        }
    });
}

drive_tests!(two_receivers => per_pair_fifo_with_two_receivers, per_pair_fifo_with_two_receivers_on_4_workers, per_pair_fifo_with_two_receivers_on_4_threads);

/// FIFO per channel survives a select loop: 4 senders, each on its own
/// channel, drained through select.
fn through_select(drive: Drive) {
    const CHANNELS: usize = 4;
    const PER: u64 = 2_500;
    drive.run(move || {
        let rt = smarm::current_runtime().unwrap();
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..CHANNELS).map(|_| smarm::channel::<u64>()).unzip();
        let handles: Vec<_> = txs
            .into_iter()
            .map(|tx| {
                rt.spawn(move || {
                    for seq in 0..PER {
                        tx.send(seq).unwrap();
                        if seq.is_multiple_of(10) {
                            smarm::yield_now();
                        }
                    }
                })
                .unwrap()
            })
            .collect();
        let mut next = [0u64; CHANNELS];
        let mut open: Vec<usize> = (0..CHANNELS).collect();
        while !open.is_empty() {
            let arms: Vec<&dyn Selectable> = open.iter().map(|&i| &rxs[i] as &dyn Selectable).collect();
            let c = open[smarm::select(&arms)];
            // Drain what is there: per-channel order across select laps.
            loop {
                match rxs[c].try_recv() {
                    Ok(seq) => {
                        assert_eq!(seq, next[c], "channel {c}");
                        next[c] += 1;
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        open.retain(|&i| i != c);
                        break;
                    }
                }
            }
        }
        assert_eq!(next, [PER; CHANNELS]);
        for h in handles {
            h.join().unwrap();
        }
    });
}

drive_tests!(through_select => per_channel_fifo_through_select, per_channel_fifo_through_select_on_4_workers, per_channel_fifo_through_select_on_4_threads);
