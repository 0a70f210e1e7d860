//! The core runtime on the plain platform: the conformance kit, then
//! scenarios that exercise every platform duty the core relies on — stacks
//! (spawn, join, a panic, recursion deep into a stack), the clock (sleep,
//! select with a deadline), parking (a runtime idle until another thread
//! sends), and the OTP layer above them (monitors, links, the registry, a
//! supervisor's restart) — on one worker and on two driven from one
//! thread.

use std::any::Any;
use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use smarm_core::{
    channel, link, monitor, now, register, select_timeout, sleep, spawn, spawn_on, trap_exit, unregister,
    whereis, ChildSpec, Config, Drivers, ExitReason, HostHooks, JoinError, RuntimeParts, SingleThreadRuntime,
    Supervisor,
};
use smarm_platform::conformance;
use smarm_platform_plain::PlainPlatform;

// ---- the host side: what a port supplies besides the platform ----------

thread_local! {
    static CURRENT: Cell<*mut ()> = const { Cell::new(std::ptr::null_mut()) };
}

/// The payload a stopped process unwinds with.
struct Stop;

fn message(payload: &(dyn Any + Send)) -> String {
    match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
        (Some(s), _) => (*s).to_string(),
        (_, Some(s)) => s.clone(),
        _ => "panic".to_string(),
    }
}

static HOOKS: HostHooks = HostHooks {
    get_current: || CURRENT.with(Cell::get),
    set_current: |core| CURRENT.with(|c| c.set(core)),
    run_process: |body| match panic::catch_unwind(AssertUnwindSafe(body)) {
        Ok(()) => ExitReason::Normal,
        Err(payload) if payload.is::<Stop>() => ExitReason::Stopped,
        Err(payload) => ExitReason::Panicked(message(&*payload)),
    },
    raise_stop: || panic::resume_unwind(Box::new(Stop)),
    unwinding: std::thread::panicking,
    catch_panic: |f| panic::catch_unwind(AssertUnwindSafe(f)).err().map(|payload| message(&*payload)),
    threads: None,
};

/// Runs `root` on a fresh runtime over the plain platform (`workers`
/// workers driven from this thread) until nothing is live; its value.
fn run<R: Send + 'static>(workers: usize, root: impl FnOnce() -> R + Send + 'static) -> R {
    let config = Config { worker_count: workers, ..Config::default() };
    let parts = RuntimeParts::new(config, Arc::new(PlainPlatform::new()), &HOOKS, Drivers::Single)
        .expect("the runtime builds on the plain platform");
    let mut single = SingleThreadRuntime::new(parts);
    let handle = single.runtime().spawn_on(0, root).expect("spawn the root");
    single.run();
    assert_eq!(single.runtime().live(), 0, "every process ended");
    match handle.try_join() {
        Ok(result) => result.expect("the root returns"),
        Err(_) => panic!("the runtime stopped with the root still running"),
    }
}

// ---- the checks ---------------------------------------------------------

#[test]
fn the_plain_platform_passes_the_conformance_kit() {
    let platform = PlainPlatform::new();
    conformance::check_all(&platform, PlainPlatform::CAPABILITIES).expect("conforms");
}

#[test]
fn processes_spawn_send_and_join() {
    let sum = run(1, || {
        let (tx, rx) = channel::<u64>();
        let handles: Vec<_> = (0..100u64)
            .map(|i| {
                let tx = tx.clone();
                spawn(move || {
                    tx.send(i).expect("the root listens");
                    i * 2
                })
                .expect("spawn")
            })
            .collect();
        drop(tx);
        let sent: u64 = std::iter::from_fn(|| rx.recv().ok()).sum();
        let joined: u64 = handles.into_iter().map(|h| h.join().expect("joins")).sum();
        (sent, joined)
    });
    assert_eq!(sum, (4950, 9900));
}

#[test]
fn deep_recursion_fits_a_plain_stack() {
    fn depth(n: u64) -> u64 {
        let frame = std::hint::black_box([n; 16]);
        if n == 0 {
            0
        } else {
            frame[0] + depth(n - 1)
        }
    }
    // About 200 bytes a frame: 32 KiB of the default stack.
    assert_eq!(run(1, || spawn(|| depth(160)).expect("spawn").join().expect("joins")), 160 * 161 / 2);
}

#[test]
fn sleep_and_select_deadlines_follow_the_clock() {
    let (slept, timed_out) = run(1, || {
        let start = now().expect("in a process");
        sleep(Duration::from_millis(20)).expect("in a process");
        let slept = now().expect("in a process") - start;
        let (_tx, rx) = channel::<()>();
        let timed_out = select_timeout(&[&rx], Duration::from_millis(10)).is_none();
        (slept, timed_out)
    });
    assert!(slept >= Duration::from_millis(20), "slept {slept:?}");
    assert!(timed_out, "nothing arrived, so the select timed out");
}

#[test]
fn an_idle_runtime_wakes_when_another_thread_sends() {
    let got = run(1, || {
        let (tx, rx) = channel::<&'static str>();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            tx.send("from a thread").expect("the process waits");
        });
        // No timer and no other process: the driver parks on the plain
        // platform's condition variable until the thread's send wakes it.
        let got = rx.recv().expect("the thread sends");
        sender.join().expect("the thread ends");
        got
    });
    assert_eq!(got, "from a thread");
}

#[test]
fn a_panic_is_seen_by_monitor_link_and_join() {
    panic::set_hook(Box::new(|_| {}));
    let (down, signal, joined) = run(1, || {
        let exits = trap_exit().expect("in a process");
        let victim = spawn(|| {
            sleep(Duration::from_millis(5)).expect("in a process");
            panic!("on purpose");
        })
        .expect("spawn");
        let watch = monitor(victim.pid());
        link(victim.pid()).expect("alive");
        let down = watch.rx.recv().expect("a Down").reason;
        let signal = exits.recv().expect("an exit signal").reason;
        (down, signal, victim.join())
    });
    let _ = panic::take_hook();
    let panicked = ExitReason::Panicked("on purpose".into());
    assert_eq!(down, panicked);
    assert_eq!(signal, panicked);
    assert_eq!(joined, Err(JoinError::Exited(panicked)));
}

#[test]
fn the_registry_names_processes() {
    let (found, gone) = run(1, || {
        let (tx, rx) = channel::<()>();
        let named = spawn(move || {
            let _ = rx.recv();
        })
        .expect("spawn");
        register("plain", named.pid()).expect("the name is free");
        let found = whereis("plain") == Some(named.pid());
        unregister("plain");
        let gone = whereis("plain").is_none();
        drop(tx);
        named.join().expect("joins");
        (found, gone)
    });
    assert!(found && gone);
}

#[test]
fn a_supervisor_restarts_a_crashed_child() {
    panic::set_hook(Box::new(|_| {}));
    let restarted = run(1, || {
        let starts = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let counted = starts.clone();
        let sup = Supervisor::new()
            .child(ChildSpec::new("worker", move || {
                let first = counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
                spawn(move || {
                    sleep(Duration::from_millis(2)).expect("in a process");
                    assert!(!first, "the first start crashes");
                    loop {
                        sleep(Duration::from_millis(50)).expect("in a process");
                    }
                })
            }))
            .start()
            .expect("the supervisor starts");
        while starts.load(std::sync::atomic::Ordering::SeqCst) < 2 {
            sleep(Duration::from_millis(1)).expect("in a process");
        }
        let running = sup.child_pid("worker").expect("answers").is_some();
        sup.stop().expect("stops");
        running
    });
    let _ = panic::take_hook();
    assert!(restarted, "the child runs again after its crash");
}

#[test]
fn two_workers_on_one_thread() {
    let workers = run(2, || {
        let on_one = spawn_on(1, smarm_core::current_worker).expect("spawn on worker 1");
        (smarm_core::current_worker(), on_one.join().expect("joins"))
    });
    assert_eq!(workers, (Some(0), Some(1)));
}
