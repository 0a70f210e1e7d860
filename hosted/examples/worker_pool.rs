//! A worker pool: a producer feeds jobs through a bounded queue (it parks
//! while the queue is full), a manager hands each job to an idle worker,
//! and every worker is watched with a monitor. Some jobs crash their worker
//! the first time they run: the manager sees the `Down`, starts a
//! replacement and gives the job to it again. At the end every job has
//! exactly one result, and the sum is checked.
//!
//! Run: `cargo run -p smarm --example worker_pool -- 1000` (jobs; default
//! 1,000).

use std::collections::VecDeque;

use smarm::{Monitor, Pid, Select, Selectable};

const WORKERS: usize = 4;
/// Room in the job queue: the producer waits beyond this.
const QUEUE: usize = 8;

/// Job `n` with its attempt number.
type Job = (u64, u32);

/// Whether job `n` crashes its worker on its first attempt.
fn flaky(n: u64) -> bool {
    n % 97 == 13
}

/// A worker: does jobs until its queue closes; reports `(worker, job,
/// result)`.
fn worker(id: usize, jobs: smarm::Receiver<Job>, results: smarm::Sender<(usize, u64, u64)>) {
    while let Ok((n, attempt)) = jobs.recv() {
        assert!(!(flaky(n) && attempt == 0), "job {n} crashed worker {id}");
        results.send((id, n, n * n)).expect("the manager collects results");
    }
}

struct Slot {
    pid: Pid,
    jobs: smarm::Sender<Job>,
    monitor: Monitor,
    busy: Option<Job>,
}

fn start(id: usize, results: &smarm::Sender<(usize, u64, u64)>) -> Slot {
    let (jobs, queue) = smarm::channel();
    let results = results.clone();
    let handle = smarm::spawn(move || worker(id, queue, results)).expect("spawn a worker");
    let pid = handle.pid();
    Slot { pid, jobs, monitor: smarm::monitor(pid), busy: None }
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Arm {
    Result,
    Down(usize),
    Job,
}

fn main() {
    let total: u64 = std::env::args().nth(1).map_or(1_000, |n| n.parse().expect("a number of jobs"));
    let (sum, replaced, per_worker) = smarm::run(move || {
        // The crashes are on purpose: keep their reports quiet (this
        // replaces the hook the runtime installed, which names the process).
        std::panic::set_hook(Box::new(|_| {}));
        let (queue_tx, queue) = smarm::bounded::<Job>(QUEUE);
        smarm::spawn(move || {
            for n in 0..total {
                queue_tx.send((n, 0)).expect("the manager takes jobs");
            }
        })
        .expect("spawn the producer");

        let (results_tx, results) = smarm::channel();
        let mut slots: Vec<Slot> = (0..WORKERS).map(|id| start(id, &results_tx)).collect();
        let mut idle: VecDeque<usize> = (0..WORKERS).collect();
        let mut retry: VecDeque<Job> = VecDeque::new();
        let mut seen = vec![false; total as usize];
        let (mut done, mut sum, mut replaced) = (0u64, 0u64, 0usize);
        let mut per_worker = [0u64; WORKERS];
        let mut select = Select::new();
        select.add(Arm::Result);
        for id in 0..WORKERS {
            select.add(Arm::Down(id));
        }
        while done < total {
            // Hand out work while a worker is idle: retries first.
            while let (Some(&id), Some(job)) = (idle.front(), retry.front().copied()) {
                idle.pop_front();
                retry.pop_front();
                slots[id].busy = Some(job);
                slots[id].jobs.send(job).expect("the worker is alive");
            }
            let want_jobs = !idle.is_empty();
            if want_jobs {
                select.add(Arm::Job);
            }
            let picked = select.wait(|arm| match arm {
                Arm::Result => &results as &dyn Selectable,
                Arm::Down(id) => &slots[id].monitor.rx,
                Arm::Job => &queue,
            });
            if want_jobs {
                select.remove(Arm::Job);
            }
            match picked {
                Arm::Result => {
                    let Ok((id, n, value)) = results.try_recv() else { continue };
                    assert!(!std::mem::replace(&mut seen[n as usize], true), "job {n} done twice");
                    sum += value;
                    done += 1;
                    per_worker[id] += 1;
                    slots[id].busy = None;
                    idle.push_back(id);
                }
                Arm::Down(id) => {
                    let Ok(down) = slots[id].monitor.rx.try_recv() else { continue };
                    let lost = slots[id].busy.take().expect("a worker dies only on a job");
                    assert_eq!(down.pid, slots[id].pid, "the Down names the monitored worker");
                    println!(
                        "worker {id} ({}) died on job {} ({:?}); replaced",
                        down.pid, lost.0, down.reason
                    );
                    slots[id] = start(id, &results_tx);
                    replaced += 1;
                    retry.push_back((lost.0, lost.1 + 1));
                    idle.push_back(id);
                }
                Arm::Job => {
                    let Ok(job) = queue.try_recv() else { continue };
                    let id = idle.pop_front().expect("asked only while a worker is idle");
                    slots[id].busy = Some(job);
                    slots[id].jobs.send(job).expect("the worker is alive");
                }
            }
        }
        (sum, replaced, per_worker)
    });
    let expected: u64 = (0..total).map(|n| n * n).sum();
    assert_eq!(sum, expected, "every job's result, once");
    assert_eq!(
        replaced as u64,
        (0..total).filter(|&n| flaky(n)).count() as u64,
        "one replacement per flaky job"
    );
    println!("{total} jobs done by {WORKERS} workers {per_worker:?}; {replaced} workers replaced; sum of squares {sum} (checked)");
}
