//! The io thread pool: blocking closures run here, never on a driver.
//!
//! Threads are started on demand — whenever a job is queued and no idle
//! thread is left to take it — up to a cap; an idle thread exits after
//! [`IDLE_EXIT`]. Jobs beyond the cap wait in a FIFO queue.
#![deny(unsafe_code)]

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long an idle io thread waits for a job before it exits.
const IDLE_EXIT: Duration = Duration::from_secs(10);

/// A queued blocking job. It never unwinds: the submitter wraps the user's
/// closure in `catch_unwind`.
pub(crate) type Job = Box<dyn FnOnce() + Send + 'static>;

#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    /// Threads waiting for a job.
    idle: usize,
    /// Threads alive.
    threads: usize,
    shutdown: bool,
}

struct Inner {
    state: Mutex<State>,
    ready: Condvar,
    max_threads: usize,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Jobs run outside the lock and never unwind, so the lock cannot be
        // poisoned by them; recover anyway rather than panic.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A pool of io threads for one runtime.
pub(crate) struct IoPool {
    inner: Arc<Inner>,
    handles: Mutex<Vec<JoinHandle<()>>>,
}

impl fmt::Debug for IoPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.inner.lock();
        f.debug_struct("IoPool")
            .field("threads", &state.threads)
            .field("idle", &state.idle)
            .field("queued", &state.jobs.len())
            .finish()
    }
}

/// The pool could not start a thread and has none to run the job.
#[derive(Debug)]
pub(crate) struct NoThread(pub(crate) std::io::Error);

impl IoPool {
    pub(crate) fn new(max_threads: usize) -> IoPool {
        IoPool {
            inner: Arc::new(Inner {
                state: Mutex::new(State::default()),
                ready: Condvar::new(),
                max_threads: max_threads.max(1),
            }),
            handles: Mutex::new(Vec::new()),
        }
    }

    /// Queues `job`, starting a thread for it if no idle one is left and
    /// the cap allows. On failure (no thread could be started and none is
    /// alive, or the pool is shut down) the job is handed back unrun.
    pub(crate) fn submit(&self, job: Job) -> Result<(), (Job, NoThread)> {
        let mut state = self.inner.lock();
        if state.shutdown {
            drop(state);
            return Err((job, NoThread(std::io::Error::other("the runtime's io pool is shut down"))));
        }
        let need_thread = state.jobs.len() >= state.idle && state.threads < self.inner.max_threads;
        if !need_thread {
            state.jobs.push_back(job);
            drop(state);
            self.inner.ready.notify_one();
            return Ok(());
        }
        state.threads += 1;
        drop(state);
        let inner = self.inner.clone();
        let spawned = std::thread::Builder::new().name("smarm-io".into()).spawn(move || io_thread(&inner));
        let mut state = self.inner.lock();
        match spawned {
            Ok(handle) => {
                state.jobs.push_back(job);
                drop(state);
                self.inner.ready.notify_one();
                let mut handles = self.handles.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                handles.retain(|handle| !handle.is_finished());
                handles.push(handle);
                Ok(())
            }
            Err(error) => {
                state.threads -= 1;
                if state.threads == 0 {
                    return Err((job, NoThread(error)));
                }
                // A live thread will get to it.
                state.jobs.push_back(job);
                drop(state);
                self.inner.ready.notify_one();
                Ok(())
            }
        }
    }

    /// Stops the threads once the queue is empty; joins them if `join`
    /// (no job in flight), else leaves them to finish on their own.
    pub(crate) fn shutdown(&self, join: bool) {
        self.inner.lock().shutdown = true;
        self.inner.ready.notify_all();
        let handles =
            std::mem::take(&mut *self.handles.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
        if join {
            for handle in handles {
                let _ = handle.join();
            }
        }
    }
}

fn io_thread(inner: &Inner) {
    let mut state = inner.lock();
    loop {
        if let Some(job) = state.jobs.pop_front() {
            drop(state);
            job();
            state = inner.lock();
            continue;
        }
        if state.shutdown {
            break;
        }
        state.idle += 1;
        let (next, timeout) =
            inner.ready.wait_timeout(state, IDLE_EXIT).unwrap_or_else(|poisoned| poisoned.into_inner());
        state = next;
        state.idle -= 1;
        if timeout.timed_out() && state.jobs.is_empty() {
            break;
        }
    }
    state.threads -= 1;
}
