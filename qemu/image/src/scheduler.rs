//! The scheduler scenarios: the `no_std` core runtime — processes, channels,
//! timers, select, stops, panics, monitors, links, registry — on one bare
//! core, driven from the boot loop by [`host::drive`].
//!
//! Each scenario builds a fresh runtime, runs a root process that does the
//! checking and sends its verdict back over a channel, drives the runtime
//! until no process is live, and then checks from outside that the root
//! ended normally and every slot came back. Order traces are recorded and
//! compared whole (embassy style), not sampled.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, Ordering};
use core::time::Duration;

use smarm_arch::aarch64_bare::core_index;
use smarm_arch::{Arch, Native};
use smarm_core::{
    channel, current_runtime, link, monitor, now, register, request_stop, select_timeout, sleep, spawn,
    spawn_on, trap_exit, unregister, whereis, yield_now, Config, ExitReason, ExitSignal, Instant, JoinError,
    JoinHandle, Pid, Receiver, RegisterError, Runtime,
};
use smarm_platform::bare::Board;

use crate::board::CORES;
use crate::{board, host, smp};

/// Returns `Err(format!(…))` from the enclosing function unless `condition`.
macro_rules! ensure {
    ($condition:expr, $($why:tt)*) => {
        if !$condition {
            return Err(format!($($why)*));
        }
    };
}

/// Runs `root` as the only initial process of a fresh runtime, drives the
/// runtime until nothing is live, and returns the root's verdict. Also
/// fails if the root did not end normally or a slot was not given back.
fn with_runtime<F>(root: F) -> Result<(), String>
where
    F: FnOnce() -> Result<(), String> + Send + 'static,
{
    with_runtime_in(host::config(), root)
}

/// [`with_runtime`] with a configuration of the scenario's own.
fn with_runtime_in<F>(config: Config, root: F) -> Result<(), String>
where
    F: FnOnce() -> Result<(), String> + Send + 'static,
{
    let mut single = host::runtime(config)?;
    let runtime: Runtime = single.runtime().clone();
    let (verdict_tx, verdict_rx) = channel::<Result<(), String>>();
    let handle = runtime
        .spawn(move || {
            let _ = verdict_tx.send(root());
        })
        .map_err(|error| format!("spawning the root process: {error}"))?;
    host::drive(&mut single)?;
    root_verdict(&runtime, handle, &verdict_rx)
}

/// After a run: the root ended normally, sent its verdict, and every
/// process and slot came back.
fn root_verdict(
    runtime: &Runtime,
    handle: JoinHandle,
    verdict_rx: &Receiver<Result<(), String>>,
) -> Result<(), String> {
    match handle.try_join() {
        Ok(Ok(())) => {}
        Ok(Err(error)) => return Err(format!("the root process did not end normally: {error}")),
        Err(_) => return Err("the runtime finished with the root process unfinished".to_string()),
    }
    let verdict = verdict_rx
        .try_recv()
        .map_err(|_| "the root process ended without sending its verdict".to_string())?;
    verdict?;
    ensure!(runtime.live() == 0, "{} processes still live after the run", runtime.live());
    ensure!(
        runtime.free_slots() == runtime.max_processes(),
        "{} of {} slots free after every handle was dropped",
        runtime.free_slots(),
        runtime.max_processes()
    );
    Ok(())
}

/// The runtime clock inside a process (the root always is one).
fn clock() -> Result<Instant, String> {
    now().ok_or_else(|| "now() outside a process".to_string())
}

fn millis(duration: Duration) -> String {
    format!("{}.{:03} ms", duration.as_millis(), duration.as_micros() % 1000)
}

/// Scenario 1: 1,000 processes spawned and joined; each sends the square of
/// its number, and the squares are summed and checked.
pub fn spawn_join() -> Result<(), String> {
    const PROCESSES: u64 = 1_000;
    // All of them alive at once: the spawning loop must not yield, so the
    // cooperative budget (which a spawn spends) is off here.
    let config = Config { coop_budget: 0, ..host::config() };
    with_runtime_in(config, || {
        let start = Native::timestamp();
        let mut handles = Vec::with_capacity(PROCESSES as usize);
        for number in 0..PROCESSES {
            // Each process returns its square through its typed handle.
            let handle: JoinHandle<u64> =
                spawn(move || number * number).map_err(|error| format!("spawn {number}: {error}"))?;
            handles.push(handle);
        }
        let runtime = current_runtime().ok_or("no runtime in the root process")?;
        let live_at_peak = runtime.live();
        let (mut count, mut sum) = (0u64, 0u64);
        for (number, handle) in handles.into_iter().enumerate() {
            let square = handle.join().map_err(|error| format!("join {number}: {error}"))?;
            ensure!(square == (number * number) as u64, "process {number} returned {square}");
            count += 1;
            sum += square;
        }
        let elapsed = Native::timestamp() - start;
        // Σ n² for n < N = (N-1)·N·(2N-1)/6
        let expected = (PROCESSES - 1) * PROCESSES * (2 * PROCESSES - 1) / 6;
        ensure!(count == PROCESSES, "{count} results arrived, expected {PROCESSES}");
        ensure!(sum == expected, "sum of squares {sum}, expected {expected}");
        ensure!(
            live_at_peak as u64 == PROCESSES + 1,
            "{live_at_peak} live at peak, expected {}",
            PROCESSES + 1
        );
        crate::println!(
            "spawn_join: {PROCESSES} processes spawned and joined ({live_at_peak} live at peak), \
             sum of their returned squares {sum} as expected; {elapsed} ticks, {} ticks per spawn+join",
            elapsed / PROCESSES
        );
        Ok(())
    })
}

/// Scenario 2: channel ping-pong between two processes, 10,000 round trips;
/// the cost of a round trip on the counter.
pub fn ping_pong() -> Result<(), String> {
    const ROUND_TRIPS: u64 = 10_000;
    with_runtime(|| {
        let (to_pong, pong_rx) = channel::<u64>();
        let (to_ping, ping_rx) = channel::<u64>();
        let pong = spawn(move || {
            while let Ok(value) = pong_rx.recv() {
                if to_ping.send(value + 1).is_err() {
                    break;
                }
            }
        })
        .map_err(|error| format!("spawn pong: {error}"))?;
        let start = Native::timestamp();
        let mut value = 0;
        for round in 0..ROUND_TRIPS {
            to_pong.send(value).map_err(|_| format!("round {round}: pong is gone"))?;
            let echoed = ping_rx.recv().map_err(|_| format!("round {round}: pong hung up"))?;
            ensure!(echoed == value + 1, "round {round}: sent {value}, got back {echoed}");
            value = echoed;
        }
        let elapsed = Native::timestamp() - start;
        drop(to_pong);
        pong.join().map_err(|error| format!("join pong: {error}"))?;
        let hundredths = elapsed * 100 / ROUND_TRIPS;
        crate::println!(
            "ping_pong: {ROUND_TRIPS} round trips over two channels; {elapsed} counter ticks, \
             {}.{:02} ticks/round trip, {} ns/round trip (each round trip is 4 context switches \
             through the worker; counter at {} Hz, emulated by QEMU: not CPU cycles)",
            hundredths / 100,
            hundredths % 100,
            board().ticks_to_nanos(elapsed) / ROUND_TRIPS,
            board().counter_frequency(),
        );
        Ok(())
    })
}

/// Scenario 3: processes sleeping different durations (spawned out of
/// order) wake in deadline order, never early; the idle core sleeps in WFI
/// meanwhile.
pub fn sleep_order() -> Result<(), String> {
    const SLEEPS_MS: [u64; 6] = [50, 10, 40, 0, 30, 20];
    with_runtime(|| {
        let idle_before = board().idle_stats();
        let started = clock()?;
        let (tx, rx) = channel::<(usize, Instant, Instant)>();
        let mut handles = Vec::new();
        for (index, &ms) in SLEEPS_MS.iter().enumerate() {
            let tx = tx.clone();
            let handle = spawn(move || {
                let Some(before) = now() else { return };
                let duration = Duration::from_millis(ms);
                if sleep(duration).is_ok() {
                    if let Some(woke) = now() {
                        let _ = tx.send((index, before + duration, woke));
                    }
                }
            })
            .map_err(|error| format!("spawn sleeper {index}: {error}"))?;
            handles.push(handle);
        }
        drop(tx);
        let mut trace = Vec::new();
        let mut latest = Duration::ZERO;
        while let Ok((index, deadline, woke)) = rx.recv() {
            ensure!(woke >= deadline, "sleeper {index} woke {} early", millis(deadline - woke));
            latest = latest.max(woke - deadline);
            trace.push(index);
        }
        for handle in handles {
            handle.join().map_err(|error| format!("join sleeper: {error}"))?;
        }
        let mut expected: Vec<usize> = (0..SLEEPS_MS.len()).collect();
        expected.sort_by_key(|&index| SLEEPS_MS[index]);
        ensure!(trace == expected, "wake order {trace:?}, expected {expected:?} (by duration)");
        let total = clock()? - started;
        let idle_after = board().idle_stats();
        let waits = idle_after.waits - idle_before.waits;
        let asleep = Duration::from_nanos(board().ticks_to_nanos(idle_after.ticks - idle_before.ticks));
        ensure!(waits > 0, "the idle core never slept in WFI (busy polling?)");
        crate::println!(
            "sleep_order: {} sleepers of {SLEEPS_MS:?} ms woke in deadline order {trace:?}, \
             at most {} late; the core slept in WFI {waits} times for {} of {}",
            SLEEPS_MS.len(),
            millis(latest),
            millis(asleep),
            millis(total),
        );
        Ok(())
    })
}

/// Scenario 4: `select_timeout` over two channels times out (`None`) while
/// both are empty, then returns the index of the one a process sends on.
pub fn select() -> Result<(), String> {
    const TIMEOUT: Duration = Duration::from_millis(20);
    const SEND_AFTER: Duration = Duration::from_millis(5);
    with_runtime(|| {
        // `_tx_a` stays alive: a closed arm would count as ready.
        let (_tx_a, rx_a) = channel::<u32>();
        let (tx_b, rx_b) = channel::<u32>();
        let start = clock()?;
        let first = select_timeout(&[&rx_a, &rx_b], TIMEOUT);
        let waited = clock()? - start;
        ensure!(first.is_none(), "select on two empty channels returned {first:?}, expected a timeout");
        ensure!(waited >= TIMEOUT, "the timeout came after {}, before {}", millis(waited), millis(TIMEOUT));

        let sender = spawn(move || {
            if sleep(SEND_AFTER).is_ok() {
                let _ = tx_b.send(7);
            }
        })
        .map_err(|error| format!("spawn sender: {error}"))?;
        let start = clock()?;
        let second = select_timeout(&[&rx_a, &rx_b], Duration::from_secs(1));
        let took = clock()? - start;
        ensure!(second == Some(1), "select returned {second:?}, expected Some(1) (the arm sent on)");
        let message = rx_b.try_recv().map_err(|_| "arm 1 was reported ready but is empty".to_string())?;
        ensure!(message == 7, "received {message}, expected 7");
        ensure!(took >= SEND_AFTER, "the message arrived after {}, before it was sent", millis(took));
        sender.join().map_err(|error| format!("join sender: {error}"))?;
        crate::println!(
            "select: timed out (None) after {} of a {} timeout, then Some(1) after {} (sent at {})",
            millis(waited),
            millis(TIMEOUT),
            millis(took),
            millis(SEND_AFTER),
        );
        Ok(())
    })
}

/// Scenario 5: `request_stop` of a process parked in `recv`: it is abandoned
/// at its wake-up (no unwinding on bare metal), its join returns `Ok`, its
/// monitor sees `Stopped`, and it never gets past the `recv`.
pub fn stop() -> Result<(), String> {
    with_runtime(|| {
        // `_keep_open` keeps the target's channel open: only the stop can
        // end its `recv`.
        let (_keep_open, rx) = channel::<u32>();
        let (parked_tx, parked_rx) = channel::<()>();
        let reached = Arc::new(AtomicBool::new(false));
        let reached_in_target = reached.clone();
        let target = spawn(move || {
            let _ = parked_tx.send(());
            let _ = rx.recv();
            // Relaxed: read after the join, which orders it.
            reached_in_target.store(true, Ordering::Relaxed);
        })
        .map_err(|error| format!("spawn target: {error}"))?;
        let pid = target.pid();
        let watch = monitor(pid);
        // The target sends, then parks in `recv` before this process runs
        // again (one worker, first in first out); a yield makes sure.
        parked_rx.recv().map_err(|_| "the target never started".to_string())?;
        yield_now();
        request_stop(pid).map_err(|error| format!("request_stop: {error}"))?;
        let joined = target.join();
        ensure!(
            joined == Err(JoinError::Exited(ExitReason::Stopped)),
            "join of the stopped process: {joined:?}, expected the stop"
        );
        let down = watch.rx.recv().map_err(|_| "the monitor delivered nothing".to_string())?;
        ensure!(down.reason == ExitReason::Stopped, "monitor reason {}, expected stopped", down.reason);
        ensure!(!reached.load(Ordering::Relaxed), "the stopped process ran past its recv");
        let again = request_stop(pid);
        ensure!(again.is_err(), "a second request_stop of a dead process returned {again:?}");
        crate::println!("stop: parked process {pid} stopped; join Ok, monitor: {}", down.reason);
        Ok(())
    })
}

/// Scenario 6: a process panics. It is abandoned, not the image: its
/// monitor gets `Panicked` with the message, its join `Err(Panicked)`, a
/// linked process that traps exits gets the exit signal, a linked one that
/// does not is stopped (`Linked`), and bystanders finish their work.
pub fn panic() -> Result<(), String> {
    const BYSTANDERS: u64 = 3;
    const STEPS: u64 = 100;
    with_runtime(|| {
        let (go_tx, go_rx) = channel::<()>();
        let victim = spawn(move || {
            let _ = go_rx.recv();
            let code = 42;
            panic!("boom {code}");
        })
        .map_err(|error| format!("spawn victim: {error}"))?;
        let victim_pid = victim.pid();
        let watch = monitor(victim_pid);

        let (ready_tx, ready_rx) = channel::<Result<(), String>>();
        let (signal_tx, signal_rx) = channel::<ExitSignal>();
        let trapper_ready = ready_tx.clone();
        let trapper = spawn(move || {
            let Some(signals) = trap_exit() else { return };
            let linked = link(victim_pid).map_err(|error| format!("trapper link: {error}"));
            let _ = trapper_ready.send(linked);
            if let Ok(signal) = signals.recv() {
                let _ = signal_tx.send(signal);
            }
        })
        .map_err(|error| format!("spawn trapper: {error}"))?;
        let (_keep_open, never) = channel::<()>();
        let linked = spawn(move || {
            let _ = ready_tx.send(link(victim_pid).map_err(|error| format!("linked link: {error}")));
            let _ = never.recv();
        })
        .map_err(|error| format!("spawn linked: {error}"))?;
        let linked_watch = monitor(linked.pid());

        let (sum_tx, sum_rx) = channel::<u64>();
        let mut bystanders = Vec::new();
        for factor in 1..=BYSTANDERS {
            let sum_tx = sum_tx.clone();
            let handle = spawn(move || {
                let mut sum = 0;
                for step in 0..STEPS {
                    sum += step * factor;
                    yield_now();
                }
                let _ = sum_tx.send(sum);
            })
            .map_err(|error| format!("spawn bystander: {error}"))?;
            bystanders.push(handle);
        }
        drop(sum_tx);

        for _ in 0..2 {
            ready_rx.recv().map_err(|_| "a linked process never reported".to_string())??;
        }
        go_tx.send(()).map_err(|_| "the victim is gone before it was told to panic".to_string())?;

        let expected = ExitReason::Panicked("boom 42".to_string());
        let down = watch.rx.recv().map_err(|_| "the monitor delivered nothing".to_string())?;
        ensure!(down.pid == victim_pid, "monitor reported {}, expected {victim_pid}", down.pid);
        ensure!(down.reason == expected, "monitor reason {:?}, expected {expected:?}", down.reason);
        let joined = victim.join();
        ensure!(
            joined == Err(JoinError::Exited(ExitReason::Panicked("boom 42".to_string()))),
            "join of the panicked process returned {joined:?}"
        );
        let signal = signal_rx.recv().map_err(|_| "the trapping process got no exit signal".to_string())?;
        ensure!(
            signal == ExitSignal { from: victim_pid, reason: expected.clone() },
            "exit signal {signal:?}, expected one from {victim_pid} with {expected:?}"
        );
        trapper.join().map_err(|error| format!("join trapper: {error}"))?;
        let linked_down = linked_watch.rx.recv().map_err(|_| "no Down for the linked process".to_string())?;
        let expected_linked =
            ExitReason::Linked { peer: victim_pid, reason: alloc::boxed::Box::new(expected) };
        ensure!(
            linked_down.reason == expected_linked,
            "linked process reason {:?}, expected {expected_linked:?}",
            linked_down.reason
        );
        let joined = linked.join();
        ensure!(
            joined == Err(JoinError::Exited(expected_linked.clone())),
            "join linked: {joined:?}, expected {expected_linked:?}"
        );

        let mut sums: Vec<u64> = Vec::new();
        while let Ok(sum) = sum_rx.recv() {
            sums.push(sum);
        }
        for handle in bystanders {
            handle.join().map_err(|error| format!("join bystander: {error}"))?;
        }
        sums.sort_unstable();
        let expected_sums: Vec<u64> =
            (1..=BYSTANDERS).map(|factor| factor * STEPS * (STEPS - 1) / 2).collect();
        ensure!(sums == expected_sums, "bystander sums {sums:?}, expected {expected_sums:?}");
        crate::println!(
            "panic: {victim_pid} abandoned; monitor: {}; trapping link: exit signal; \
             plain link: {}; {BYSTANDERS} bystanders finished",
            down.reason,
            linked_down.reason,
        );
        Ok(())
    })
}

/// Scenario 7: the registry: register, whereis, the two refusals,
/// unregister, and a dead holder's name coming free.
pub fn registry() -> Result<(), String> {
    with_runtime(|| {
        let (stop_server, server_rx) = channel::<()>();
        let server = spawn(move || {
            let _ = server_rx.recv();
        })
        .map_err(|error| format!("spawn server: {error}"))?;
        let (stop_other, other_rx) = channel::<()>();
        let other = spawn(move || {
            let _ = other_rx.recv();
        })
        .map_err(|error| format!("spawn other: {error}"))?;
        let (pid, other_pid): (Pid, Pid) = (server.pid(), other.pid());

        register("server", pid).map_err(|error| format!("register: {error}"))?;
        ensure!(whereis("server") == Some(pid), "whereis after register: {:?}", whereis("server"));
        let taken = register("server", other_pid);
        ensure!(taken == Err(RegisterError::NameTaken { holder: pid }), "second holder: {taken:?}");
        let renamed = register("alias", pid);
        ensure!(
            renamed == Err(RegisterError::AlreadyNamed { name: "server".to_string() }),
            "second name: {renamed:?}"
        );
        let removed = unregister("server");
        ensure!(removed == Some(pid), "unregister returned {removed:?}");
        ensure!(whereis("server").is_none(), "whereis after unregister: {:?}", whereis("server"));

        register("server", pid).map_err(|error| format!("register again: {error}"))?;
        stop_server.send(()).map_err(|_| "the server is gone early".to_string())?;
        server.join().map_err(|error| format!("join server: {error}"))?;
        ensure!(whereis("server").is_none(), "whereis of a dead holder: {:?}", whereis("server"));
        register("server", other_pid).map_err(|error| format!("register after the holder died: {error}"))?;
        ensure!(whereis("server") == Some(other_pid), "whereis of the new holder: {:?}", whereis("server"));
        stop_other.send(()).map_err(|_| "the other process is gone early".to_string())?;
        other.join().map_err(|error| format!("join other: {error}"))?;
        crate::println!(
            "registry: register/whereis/unregister of {pid}; NameTaken and AlreadyNamed refused; \
             a dead holder's name went to {other_pid}"
        );
        Ok(())
    })
}

/// How long an SMP scenario may run before the boot core gives up on it
/// (a lost cross-core wake would otherwise hang until the runner's timeout).
const SMP_WATCHDOG: Duration = Duration::from_secs(60);

/// [`with_runtime`] on every core: a fresh runtime with one worker per core
/// ([`Drivers::PerWorker`](smarm_core::Drivers::PerWorker)); core 0 drives
/// worker 0 (where `root` runs), core `k` worker `k`, each in its own
/// [`host::drive_worker`] loop, until no process is live. Core 0 then
/// collects every core's result and checks the root's verdict, its normal
/// end, and that every slot came back.
fn with_smp_runtime<F>(root: F) -> Result<(), String>
where
    F: FnOnce() -> Result<(), String> + Send + 'static,
{
    smp::start_secondaries()?;
    let config = smarm_core::Config { worker_count: CORES, ..host::config() };
    let parts = host::per_core_runtime(config)?;
    let runtime: Runtime = parts.runtime;
    let mut workers = parts.workers.into_iter();
    let mut own = workers.next().ok_or("the runtime has no worker 0")?;
    let (verdict_tx, verdict_rx) = channel::<Result<(), String>>();
    let handle = runtime
        .spawn_on(0, move || {
            let _ = verdict_tx.send(root());
        })
        .map_err(|error| format!("spawning the root process: {error}"))?;
    let watchdog = u64::try_from(SMP_WATCHDOG.as_nanos()).unwrap_or(u64::MAX);
    let give_up_at = board().now().saturating_add(watchdog);
    let mut posted = Vec::new();
    for mut worker in workers {
        // Worker k is driven by core k.
        let core = worker.id();
        let handle = runtime.clone();
        smp::post(core, alloc::boxed::Box::new(move || host::drive_worker(&mut worker, &handle, None)))?;
        posted.push(core);
    }
    let mut failures = Vec::new();
    if let Err(why) = host::drive_worker(&mut own, &runtime, Some(give_up_at)) {
        failures.push(format!("core 0: {why}"));
    }
    for core in posted {
        // A second's grace after the boot core's own limit: the others
        // notice the end within one wake.
        if let Err(why) = smp::wait_for(core, give_up_at.saturating_add(1_000_000_000)) {
            failures.push(format!("core {core}: {why}"));
        }
    }
    ensure!(failures.is_empty(), "{}", failures.join("; "));
    root_verdict(&runtime, handle, &verdict_rx)
}

/// Scenario 8 (the SMP stretch): channel ping-pong, 10,000 round trips,
/// between a process on core 0's worker and one on core 1's worker; every
/// message crosses cores through the wake rings and the board's wake SGI.
/// Both sides count, both check where they ran; ticks per round trip.
pub fn smp_ping_pong() -> Result<(), String> {
    const ROUND_TRIPS: u64 = 10_000;
    with_smp_runtime(|| {
        let ping_core = core_index();
        let wakes_before = board().idle_stats().wakes_sent;
        let (to_pong, pong_rx) = channel::<u64>();
        let (to_ping, ping_rx) = channel::<u64>();
        let (report_tx, report_rx) = channel::<(usize, usize, u64)>();
        let pong = spawn_on(1, move || {
            let first_core = core_index();
            let mut echoed = 0u64;
            while let Ok(value) = pong_rx.recv() {
                if to_ping.send(value + 1).is_err() {
                    break;
                }
                echoed += 1;
            }
            let _ = report_tx.send((first_core, core_index(), echoed));
        })
        .map_err(|error| format!("spawn pong on worker 1: {error}"))?;
        let start = Native::timestamp();
        let mut value = 0;
        let mut slowest = 0;
        for round in 0..ROUND_TRIPS {
            let sent_at = Native::timestamp();
            to_pong.send(value).map_err(|_| format!("round {round}: pong is gone"))?;
            let echoed = ping_rx.recv().map_err(|_| format!("round {round}: pong hung up"))?;
            ensure!(echoed == value + 1, "round {round}: sent {value}, got back {echoed}");
            slowest = slowest.max(Native::timestamp() - sent_at);
            value = echoed;
        }
        let elapsed = Native::timestamp() - start;
        let wakes = board().idle_stats().wakes_sent - wakes_before;
        drop(to_pong);
        pong.join().map_err(|error| format!("join pong: {error}"))?;
        let (pong_first, pong_last, echoed) =
            report_rx.recv().map_err(|_| "pong sent no report".to_string())?;
        ensure!(value == ROUND_TRIPS, "ping counted {value} round trips, expected {ROUND_TRIPS}");
        ensure!(echoed == ROUND_TRIPS, "pong echoed {echoed} messages, expected {ROUND_TRIPS}");
        ensure!(
            ping_core == 0 && core_index() == 0,
            "ping ran on core {ping_core} (ended on {}), expected core 0",
            core_index()
        );
        ensure!(
            pong_first == 1 && pong_last == 1,
            "pong ran on core {pong_first} (ended on {pong_last}), expected core 1"
        );
        let hundredths = elapsed * 100 / ROUND_TRIPS;
        crate::println!(
            "smp_ping_pong: {ROUND_TRIPS} round trips between core 0 and core 1 ({CORES} cores, \
             one worker each); {elapsed} counter ticks, {}.{:02} ticks/round trip, {} ns/round trip, \
             slowest {} ns (QEMU's vCPU threads share the host's CPUs: the tail is host \
             scheduling); {wakes} cross-core wake SGIs",
            hundredths / 100,
            hundredths % 100,
            board().ticks_to_nanos(elapsed) / ROUND_TRIPS,
            board().ticks_to_nanos(slowest),
        );
        Ok(())
    })
}

/// A ring member: forwards a token to the next core's member until its
/// hop count runs out, then reports the token's path to the root.
struct RingActor {
    next: Option<smarm_core::Addr<RingActor>>,
    done: smarm_core::Sender<(u64, Vec<usize>)>,
    /// Token visits handled here.
    visits: u64,
}

/// A token: its number, hops left, and the cores it has visited.
struct Token {
    id: u64,
    hops: u32,
    path: Vec<usize>,
}

enum RingMsg {
    /// Who comes next in the ring.
    Next(smarm_core::Addr<RingActor>),
    Token(Token),
    /// Asks for the visit count.
    Visits(smarm_core::actor::ReplyTo<(usize, u64)>),
}

impl smarm_core::Actor for RingActor {
    type Msg = RingMsg;
    fn handle(&mut self, _ctx: &mut smarm_core::Ctx<'_, Self>, msg: RingMsg) {
        match msg {
            RingMsg::Next(next) => self.next = Some(next),
            RingMsg::Visits(reply) => {
                let _ = reply.send((core_index(), self.visits));
            }
            RingMsg::Token(mut token) => {
                self.visits += 1;
                token.path.push(core_index());
                match (&self.next, token.hops) {
                    (Some(next), hops) if hops > 0 => {
                        token.hops -= 1;
                        let _ = next.send(RingMsg::Token(token));
                    }
                    _ => {
                        let _ = self.done.send((token.id, token.path));
                    }
                }
            }
        }
    }
}

/// Panics on its first message.
struct Doomed;

impl smarm_core::Actor for Doomed {
    type Msg = ();
    fn handle(&mut self, _ctx: &mut smarm_core::Ctx<'_, Self>, _: ()) {
        panic!("doomed actor");
    }
}

/// Scenario 9: handler actors on all four cores. A ring of one actor per
/// core passes 100 tokens 4 × 8 hops each, every hop crossing cores
/// through the transfer queues; each token's path is checked. An actor on
/// core 2 panics: its handler is abandoned on its own stack, the process
/// monitoring it gets `Panicked`, and the ring goes on.
pub fn smp_actors() -> Result<(), String> {
    const TOKENS: u64 = 100;
    const HOPS: u32 = 4 * 8;
    with_smp_runtime(|| {
        let runtime = current_runtime().ok_or("no runtime")?;
        let (done_tx, done_rx) = channel::<(u64, Vec<usize>)>();
        let ring: Vec<_> = (0..CORES)
            .map(|core| {
                runtime.spawn_actor_on(core, RingActor { next: None, done: done_tx.clone(), visits: 0 })
            })
            .collect::<Result<_, _>>()
            .map_err(|error| format!("spawning the ring: {error}"))?;
        for (i, member) in ring.iter().enumerate() {
            member
                .send(RingMsg::Next(ring[(i + 1) % CORES].clone()))
                .map_err(|_| format!("ring member {i} is gone"))?;
        }
        let doomed =
            runtime.spawn_actor_on(2, Doomed).map_err(|error| format!("spawning doomed: {error}"))?;
        let watch = monitor(doomed.pid());
        doomed.send(()).map_err(|_| "doomed is gone early".to_string())?;
        for id in 0..TOKENS {
            ring[0]
                .send(RingMsg::Token(Token { id, hops: HOPS, path: Vec::new() }))
                .map_err(|_| "ring member 0 is gone".to_string())?;
        }
        let down = watch.rx.recv().map_err(|_| "no Down for the doomed actor".to_string())?;
        ensure!(
            matches!(&down.reason, ExitReason::Panicked(m) if m.contains("doomed actor")),
            "doomed actor ended {:?}",
            down.reason
        );
        let mut seen = Vec::new();
        for _ in 0..TOKENS {
            let (id, path) = done_rx.recv().map_err(|_| "the ring stopped reporting".to_string())?;
            ensure!(path.len() == HOPS as usize + 1, "token {id} made {} stops", path.len());
            for (hop, core) in path.iter().enumerate() {
                ensure!(
                    *core == hop % CORES,
                    "token {id} hop {hop} ran on core {core}, expected {}",
                    hop % CORES
                );
            }
            seen.push(id);
        }
        seen.sort_unstable();
        ensure!(seen == (0..TOKENS).collect::<Vec<_>>(), "tokens lost or doubled: {seen:?}");
        // Ask every member, from this process on core 0, for its count: the
        // replies cross back from each core; the visits add up.
        let mut visits = 0;
        for (i, member) in ring.iter().enumerate() {
            let (core, count) = runtime
                .ask(member, RingMsg::Visits)
                .wait()
                .map_err(|error| format!("asking ring member {i}: {error}"))?;
            ensure!(core == i, "ring member {i} answered from core {core}");
            visits += count;
        }
        ensure!(visits == TOKENS * (HOPS as u64 + 1), "{visits} visits counted by asking");
        let panics: u64 = (0..CORES).map(|w| runtime.actor_stats(w).map_or(0, |stats| stats.panics)).sum();
        ensure!(panics == 1, "{panics} actor panics counted, expected 1");
        for member in &ring {
            let _ = member.send(RingMsg::Next(member.clone()));
            member.stop().map_err(|_| "a ring member ended early".to_string())?;
        }
        crate::println!(
            "smp_actors: {TOKENS} tokens x {HOPS} hops across {CORES} cores, every path checked; \
             {visits} visits confirmed by an Ask to each core's actor; a panicking actor abandoned \
             on its handler stack and its monitor told"
        );
        Ok(())
    })
}
