//! A connection's outgoing frames: written by the sending process itself
//! when the socket is free, queued (up to a limit) while another write is
//! under way.
//!
//! Whoever finds the socket free becomes its writer: it writes its frame
//! at once, then whatever others queued meanwhile, and gives the socket
//! back when the queue is empty. A sender never waits on the socket: when
//! the socket cannot take a write whole (its buffer is full), the rest goes
//! back to the head of the queue and the connection's writer process,
//! which parks until the socket is writable, finishes the job. So on an
//! idle connection a frame is one `write` from the sender, with no process
//! in between, and frames queued behind a write go out together in the
//! next one.
//!
//! The queue is bounded in bytes, as Erlang bounds a distribution
//! channel's buffer (`dist_buf_busy_limit`): a process that sends while
//! the queue holds the limit or more parks until the writer has taken the
//! queue — Erlang suspends such a sender the same way, so a fast producer
//! is slowed to what the connection carries instead of growing memory.
//! The node's own frames (the replies it makes itself, exit signals,
//! monitor messages, ticks) never wait: a reader or a death watcher parked
//! on its own peer's queue could stall both ends. Sends through remote
//! actor addresses cannot park (the sender may be a handler actor): they
//! are handed back while the queue is full.
//!
//! Invariant: bytes leave in the order they were queued. The queue holds
//! bytes only while `writing` is set, and only the one writer — the sender
//! that set `writing`, or the writer process once it was handed the job —
//! takes from it.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};

use smarm::NoPreempt;

use crate::transport::Stream;

/// Frames sent in a row with nothing heard back after which the sender
/// stops writing itself and leaves the writes to the writer process.
const STREAM_AFTER: u32 = 8;

/// What a send does when the queue is at its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Room {
    /// Park until the writer takes the queue (a process's own sends).
    Wait,
    /// Refuse: [`SendError::Full`] (sends that cannot park).
    Refuse,
    /// Queue anyway (the node's own frames).
    Always,
}

/// Why the writer process gave up a connection.
#[derive(Debug)]
pub(crate) enum FlushError {
    /// A write failed.
    Io(io::Error),
    /// The socket stayed full and the peer silent for the tick time.
    Silent,
}

/// Why a frame was not sent.
#[derive(Debug)]
pub(crate) enum SendError {
    /// The connection is closed.
    Closed,
    /// The queue is at its limit ([`Room::Refuse`] only).
    Full,
}

#[derive(Default)]
struct State {
    /// Bytes waiting for the writer, in order.
    queue: Vec<u8>,
    /// Someone is writing: a sender, or (with `handed_off`) the writer
    /// process.
    writing: bool,
    /// The writer process holds the writing: the socket was full.
    handed_off: bool,
    /// No more frames go out; `failed` says why if a write failed.
    closed: bool,
    failed: Option<io::Error>,
    /// Senders parked for room.
    parked: Vec<smarm::Waker>,
    /// A buffer kept for the next batch (its allocation is reused).
    spare: Vec<u8>,
}

impl State {
    fn wake_parked(&mut self) {
        for waker in self.parked.drain(..) {
            waker.wake();
        }
    }
}

/// The outgoing side of one connection.
pub(crate) struct Outbox {
    state: Mutex<State>,
    /// Queued bytes at which a [`Room::Wait`] send parks.
    limit: usize,
    /// Something was written since the writer process last looked (no
    /// tick needed).
    sent: AtomicBool,
    /// Frames sent since the reader last heard from the peer.
    unanswered: AtomicU32,
    /// Wakes the writer process: a job handed off, or the outbox closed.
    kick: smarm::Sender<()>,
}

/// A lock on an outbox's state, with preemption off while it is held.
struct Locked<'a> {
    guard: MutexGuard<'a, State>,
    _no_preempt: NoPreempt,
}

impl std::ops::Deref for Locked<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.guard
    }
}

impl std::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.guard
    }
}

impl Outbox {
    /// An outbox whose [`Room::Wait`] sends park at `limit` queued bytes,
    /// and the receiving end of its writer process's kicks.
    pub(crate) fn new(limit: usize) -> (Outbox, smarm::Receiver<()>) {
        let (kick, kicks) = smarm::bounded(1);
        let outbox = Outbox {
            state: Mutex::new(State::default()),
            limit,
            sent: AtomicBool::new(false),
            unanswered: AtomicU32::new(0),
            kick,
        };
        (outbox, kicks)
    }

    fn lock(&self) -> Locked<'_> {
        let no_preempt = NoPreempt::new();
        let guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        Locked { guard, _no_preempt: no_preempt }
    }

    fn kick(&self) {
        // Full: a kick is pending already, and one is enough.
        let _ = self.kick.try_send(());
    }

    /// Whether a [`Room::Wait`] send would park now.
    pub(crate) fn is_full(&self) -> bool {
        let state = self.lock();
        state.writing && state.queue.len() >= self.limit
    }

    /// Bytes queued now (tests and diagnostics).
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        self.lock().queue.len()
    }

    /// Sends `frame` on `stream`: written at once if the socket is free,
    /// queued behind the write under way otherwise; at the limit, what
    /// `room` says.
    pub(crate) fn send(&self, stream: &Stream, frame: &[u8], room: Room) -> Result<(), SendError> {
        let mut state = self.lock();
        loop {
            if state.closed {
                return Err(SendError::Closed);
            }
            if !state.writing {
                break;
            }
            if state.queue.len() < self.limit || room == Room::Always {
                state.queue.extend_from_slice(frame);
                return Ok(());
            }
            if room == Room::Refuse {
                return Err(SendError::Full);
            }
            drop(state);
            // A wait opens before the lock is taken (it observes a stop),
            // and the condition is looked at again under the lock.
            let Ok(waker) = smarm::begin_wait() else {
                // Not a process: nothing can park; queue it.
                let mut state = self.lock();
                if state.closed {
                    return Err(SendError::Closed);
                }
                state.queue.extend_from_slice(frame);
                if !state.writing {
                    state.writing = true;
                    state.handed_off = true;
                    drop(state);
                    self.kick();
                }
                return Ok(());
            };
            state = self.lock();
            if state.closed || !state.writing || state.queue.len() < self.limit {
                smarm::retire_wait();
                continue;
            }
            state.parked.push(waker);
            drop(state);
            smarm::park();
            state = self.lock();
        }
        state.writing = true;
        // Relaxed: a hint, not a guard (a lost count only shifts when a
        // stream is recognised).
        let streak = self.unanswered.load(Ordering::Relaxed);
        self.unanswered.store(streak.saturating_add(1), Ordering::Relaxed);
        if streak >= STREAM_AFTER {
            // A stream of sends with no answer between them: the writer
            // process writes while the senders go on, in batches.
            state.queue.extend_from_slice(frame);
            state.handed_off = true;
            drop(state);
            self.kick();
            return Ok(());
        }
        drop(state);
        self.write_as_writer(stream, frame);
        Ok(())
    }

    /// The peer was heard from: the next send is an answer, written by its
    /// sender at once.
    pub(crate) fn heard(&self) {
        if self.unanswered.load(Ordering::Relaxed) != 0 {
            self.unanswered.store(0, Ordering::Relaxed);
        }
    }

    /// Writes `frame` and then what was queued meanwhile, holding the
    /// writing, until the queue is empty; the writer process takes over
    /// when the socket is full, or when the queue filled again behind a
    /// batch (a sender writes its own frame and at most one batch of
    /// others', so a busy connection cannot keep it from returning).
    fn write_as_writer(&self, stream: &Stream, frame: &[u8]) {
        let mut batch = Vec::new();
        let mut first = Some(frame);
        let mut batches = 0;
        loop {
            let data: &[u8] = first.take().unwrap_or(&batch);
            let written = stream.write_now(data);
            let mut state = self.lock();
            let written = match written {
                Ok(written) => written,
                Err(e) => {
                    // The writer process tears the connection down.
                    state.failed = Some(e);
                    self.close_locked(state);
                    return;
                }
            };
            self.sent.store(true, Ordering::Relaxed);
            if state.closed {
                return;
            }
            if written < data.len() {
                // The socket is full: the rest goes first, and the writer
                // process waits for room on the socket.
                let queue = std::mem::take(&mut state.queue);
                state.queue.reserve(data.len() - written + queue.len());
                state.queue.extend_from_slice(&data[written..]);
                state.queue.extend_from_slice(&queue);
                state.handed_off = true;
                drop(state);
                self.kick();
                return;
            }
            if state.queue.is_empty() {
                state.writing = false;
                if state.spare.capacity() < batch.capacity() {
                    batch.clear();
                    state.spare = batch;
                }
                return;
            }
            if batches == 1 {
                state.handed_off = true;
                drop(state);
                self.kick();
                return;
            }
            batches += 1;
            batch.clear();
            std::mem::swap(&mut batch, &mut state.queue);
            if state.queue.capacity() == 0 {
                state.queue = std::mem::take(&mut state.spare);
            }
            state.wake_parked();
        }
    }

    /// The writer process's part, on a kick: finishes a job handed off
    /// (parking while the socket is full) until the queue is empty. `Err`
    /// when the connection must close: a write failed (here or in a
    /// sender), or the socket stayed full past the stream's write timeout
    /// while `silent()` says the peer has gone quiet — or `Ok(false)` once
    /// the outbox is closed.
    pub(crate) fn flush(&self, stream: &Stream, silent: impl Fn() -> bool) -> Result<bool, FlushError> {
        let mut batch = Vec::new();
        loop {
            {
                let mut state = self.lock();
                if let Some(e) = state.failed.take() {
                    return Err(FlushError::Io(e));
                }
                if state.closed {
                    return Ok(false);
                }
                if !state.handed_off {
                    return Ok(true);
                }
                if state.queue.is_empty() {
                    state.writing = false;
                    state.handed_off = false;
                    state.wake_parked();
                    return Ok(true);
                }
                batch.clear();
                std::mem::swap(&mut batch, &mut state.queue);
                state.wake_parked();
            }
            let mut written = 0;
            while written < batch.len() {
                let error = match stream.write_some(&batch[written..]) {
                    Ok(0) => FlushError::Io(io::Error::from(io::ErrorKind::WriteZero)),
                    Ok(n) => {
                        written += n;
                        self.sent.store(true, Ordering::Relaxed);
                        continue;
                    }
                    // A peer that reads nothing and says nothing for the
                    // tick time is gone, as one that only says nothing is.
                    Err(e) if e.kind() == io::ErrorKind::TimedOut && !silent() => continue,
                    Err(e) if e.kind() == io::ErrorKind::TimedOut => FlushError::Silent,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => FlushError::Io(e),
                };
                let mut state = self.lock();
                state.failed = None;
                self.close_locked(state);
                return Err(error);
            }
        }
    }

    /// Whether something was written since the last call (then no tick is
    /// due).
    pub(crate) fn take_sent(&self) -> bool {
        self.sent.swap(false, Ordering::Relaxed)
    }

    /// Closes the outbox: sends fail from now on, parked senders wake to
    /// that, and the writer process is told.
    pub(crate) fn close(&self) {
        let state = self.lock();
        self.close_locked(state);
    }

    fn close_locked(&self, mut state: Locked<'_>) {
        state.closed = true;
        state.queue = Vec::new();
        state.wake_parked();
        drop(state);
        self.kick();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    use super::*;
    use crate::transport::Listener;

    const FRAME: usize = 1024;
    const LIMIT: usize = 64 * 1024;
    /// More than the loopback socket buffers hold, with nobody reading.
    const FRAMES: usize = 16 * 1024;

    /// A connected pair: the outbox's side and the peer's.
    fn pair() -> (Stream, Stream) {
        let listener = Listener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let port = listener.port().unwrap();
        let ours = Stream::connect(([127, 0, 0, 1], port).into()).unwrap();
        let theirs = listener.accept().unwrap();
        (ours, theirs)
    }

    fn frame(sequence: usize) -> Vec<u8> {
        let mut frame = vec![0u8; FRAME];
        frame[..8].copy_from_slice(&(sequence as u64).to_be_bytes());
        frame
    }

    /// The writer process's loop, as the node runs it.
    fn spawn_writer(outbox: Arc<Outbox>, stream: Stream, kicks: smarm::Receiver<()>) {
        smarm::spawn(move || {
            while kicks.recv().is_ok() {
                if !matches!(outbox.flush(&stream, || false), Ok(true)) {
                    return;
                }
            }
        })
        .unwrap();
    }

    #[test]
    fn a_full_queue_parks_the_sender_until_the_peer_reads_and_nothing_is_lost_or_reordered() {
        smarm::run(|| {
            let (ours, theirs) = pair();
            let (outbox, kicks) = Outbox::new(LIMIT);
            let outbox = Arc::new(outbox);
            spawn_writer(outbox.clone(), ours.clone(), kicks);
            let attempted = Arc::new(AtomicUsize::new(0));
            let sent = Arc::new(AtomicUsize::new(0));
            let sender = {
                let (outbox, attempted, sent, ours) =
                    (outbox.clone(), attempted.clone(), sent.clone(), ours.clone());
                smarm::spawn(move || {
                    for sequence in 0..FRAMES {
                        attempted.store(sequence + 1, Ordering::SeqCst);
                        outbox.send(&ours, &frame(sequence), Room::Wait).unwrap();
                        sent.store(sequence + 1, Ordering::SeqCst);
                    }
                })
                .unwrap()
            };
            // Nobody reads: the socket fills, then the queue, then a send
            // stays inside `send`.
            while !(outbox.is_full() && attempted.load(Ordering::SeqCst) > sent.load(Ordering::SeqCst)) {
                smarm::yield_now();
            }
            assert!(sent.load(Ordering::SeqCst) < FRAMES, "the sender was held back");
            assert!(outbox.queued() <= LIMIT + FRAME, "the queue stays within its limit and one frame");
            assert!(matches!(outbox.send(&ours, &frame(0), Room::Refuse), Err(SendError::Full)));

            // Reading lets everything through, in order.
            let mut buffer = vec![0u8; 64 * 1024];
            let mut received = Vec::new();
            let mut expected = 0;
            while expected < FRAMES {
                let n = theirs.read_some(&mut buffer).unwrap();
                assert_ne!(n, 0);
                received.extend_from_slice(&buffer[..n]);
                let whole = received.len() / FRAME * FRAME;
                for frame in received[..whole].chunks(FRAME) {
                    let sequence = u64::from_be_bytes(frame[..8].try_into().unwrap()) as usize;
                    assert_eq!(sequence, expected);
                    expected += 1;
                }
                received.drain(..whole);
            }
            sender.join().unwrap();
            assert_eq!(sent.load(Ordering::SeqCst), FRAMES);
            assert!(received.is_empty());
            outbox.close();
        });
    }

    #[test]
    fn concurrent_senders_lose_nothing_and_keep_their_own_order() {
        const SENDERS: usize = 8;
        const EACH: usize = if cfg!(miri) { 10 } else { 2_000 };
        smarm::run(|| {
            let (ours, theirs) = pair();
            let (outbox, kicks) = Outbox::new(LIMIT);
            let outbox = Arc::new(outbox);
            spawn_writer(outbox.clone(), ours.clone(), kicks);
            let senders: Vec<_> = (0..SENDERS)
                .map(|index| {
                    let (outbox, ours) = (outbox.clone(), ours.clone());
                    smarm::spawn(move || {
                        for sequence in 0..EACH {
                            // Sender in the high bits, its sequence in the low.
                            let frame = frame(index << 32 | sequence);
                            outbox.send(&ours, &frame, Room::Wait).unwrap();
                            if sequence % 64 == 0 {
                                smarm::yield_now();
                            }
                        }
                    })
                    .unwrap()
                })
                .collect();
            let mut next = [0usize; SENDERS];
            let mut buffer = vec![0u8; 64 * 1024];
            let mut received = Vec::new();
            let mut frames = 0;
            while frames < SENDERS * EACH {
                let n = theirs.read_some(&mut buffer).unwrap();
                assert_ne!(n, 0);
                received.extend_from_slice(&buffer[..n]);
                let whole = received.len() / FRAME * FRAME;
                for frame in received[..whole].chunks(FRAME) {
                    let word = u64::from_be_bytes(frame[..8].try_into().unwrap()) as usize;
                    let (index, sequence) = (word >> 32, word & 0xffff_ffff);
                    assert_eq!(sequence, next[index], "sender {index} in order");
                    next[index] += 1;
                    frames += 1;
                }
                received.drain(..whole);
            }
            senders.into_iter().for_each(|sender| sender.join().unwrap());
            assert_eq!(next, [EACH; SENDERS]);
            assert!(received.is_empty());
            outbox.close();
        });
    }

    #[test]
    fn the_nodes_own_frames_queue_past_the_limit_and_a_closed_outbox_refuses() {
        smarm::run(|| {
            let (ours, theirs) = pair();
            let (outbox, kicks) = Outbox::new(FRAME);
            let outbox = Arc::new(outbox);
            spawn_writer(outbox.clone(), ours.clone(), kicks);
            // Fill the socket and the queue with frames that never wait.
            let mut sequence = 0;
            while !outbox.is_full() {
                outbox.send(&ours, &frame(sequence), Room::Always).unwrap();
                sequence += 1;
            }
            outbox.send(&ours, &frame(sequence), Room::Always).unwrap();
            assert!(outbox.queued() >= 2 * FRAME, "queued past the limit");
            assert!(matches!(outbox.send(&ours, &frame(0), Room::Refuse), Err(SendError::Full)));
            outbox.close();
            assert!(matches!(outbox.send(&ours, &frame(0), Room::Always), Err(SendError::Closed)));
            drop(theirs);
        });
    }
}
