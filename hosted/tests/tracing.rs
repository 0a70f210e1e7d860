//! The `tracing` feature: a subscriber sees the runtime's life — every
//! spawn, every exit with its reason, the panic, the stop request and the
//! supervisor's restart — with the right pids. Run with
//! `cargo test -p smarm --features tracing --test tracing`.
#![cfg(feature = "tracing")]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use smarm::{ChildSpec, ExitReason, Supervisor};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// One recorded event: its level, message and fields.
#[derive(Debug, Clone)]
struct Seen {
    level: Level,
    message: String,
    fields: Vec<(String, String)>,
}

impl Seen {
    fn has(&self, field: &str, value: &str) -> bool {
        self.fields.iter().any(|(name, v)| name == field && v == value)
    }
    fn mentions(&self, field: &str, part: &str) -> bool {
        self.fields.iter().any(|(name, v)| name == field && v.contains(part))
    }
}

/// Records every `smarm` event.
struct Recorder(Arc<Mutex<Vec<Seen>>>);

struct Fields {
    message: String,
    fields: Vec<(String, String)>,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            self.fields.push((field.name().to_string(), format!("{value:?}")));
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.fields.push((field.name().to_string(), value.to_string()));
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target() == "smarm"
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields { message: String::new(), fields: Vec::new() };
        event.record(&mut fields);
        let seen = Seen { level: *event.metadata().level(), message: fields.message, fields: fields.fields };
        self.0.lock().unwrap().push(seen);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn recorded() -> &'static Arc<Mutex<Vec<Seen>>> {
    static SEEN: OnceLock<Arc<Mutex<Vec<Seen>>>> = OnceLock::new();
    SEEN.get_or_init(|| {
        let seen = Arc::new(Mutex::new(Vec::new()));
        tracing::subscriber::set_global_default(Recorder(seen.clone())).expect("the only subscriber");
        seen
    })
}

/// The recorded events that name `pid` in `field`.
fn about(field: &str, pid: smarm::Pid) -> Vec<Seen> {
    let pid = pid.to_string();
    recorded().lock().unwrap().iter().filter(|seen| seen.has(field, &pid)).cloned().collect()
}

#[test]
fn spawn_exit_panic_stop_and_restart_are_traced() {
    let seen = recorded();
    std::panic::set_hook(Box::new(|_| {}));
    let (normal, crashed, stopped, restarted, child_name) = smarm::run(|| {
        let normal = smarm::spawn(|| 1).unwrap();
        let normal_pid = normal.pid();
        normal.join().unwrap();

        let crashed = smarm::spawn(|| panic!("traced panic")).unwrap();
        let crashed_pid = crashed.pid();
        let _ = crashed.join();

        let (_keep, never) = smarm::channel::<()>();
        let stopped = smarm::spawn(move || {
            let _ = never.recv();
        })
        .unwrap();
        let stopped_pid = stopped.pid();
        smarm::yield_now();
        smarm::request_stop(stopped_pid).unwrap();
        let _ = stopped.join();

        let starts = Arc::new(AtomicU32::new(0));
        let first_pid = Arc::new(Mutex::new(None));
        let (counted, recorded_first) = (starts.clone(), first_pid.clone());
        let sup = Supervisor::new()
            .child(ChildSpec::new("traced-child", move || {
                let first = counted.fetch_add(1, Ordering::SeqCst) == 0;
                let handle = smarm::spawn(move || {
                    smarm::sleep(Duration::from_millis(2));
                    assert!(!first, "the first start crashes");
                    loop {
                        smarm::sleep(Duration::from_millis(20));
                    }
                })?;
                if first {
                    *recorded_first.lock().unwrap() = Some(handle.pid());
                }
                Ok::<_, smarm::SpawnError>(handle)
            }))
            .start()
            .unwrap();
        while starts.load(Ordering::SeqCst) < 2 {
            smarm::sleep(Duration::from_millis(1));
        }
        sup.stop().unwrap();
        let first = first_pid.lock().unwrap().expect("the first start recorded its pid");
        (normal_pid, crashed_pid, stopped_pid, first, "traced-child")
    });
    let _ = std::panic::take_hook();

    // Each pid's events: spawned, then ended with its reason.
    let normal_events = about("pid", normal);
    assert_eq!(normal_events.first().map(|s| s.message.as_str()), Some("spawn"), "{normal_events:?}");
    let exit = normal_events.iter().find(|s| s.message == "exit").expect("an exit event");
    assert!(exit.has("reason", "Normal") && exit.level == Level::DEBUG, "{exit:?}");

    let crashed_events = about("pid", crashed);
    let panic = crashed_events
        .iter()
        .find(|s| s.message == "panic")
        .unwrap_or_else(|| panic!("a panic event: {crashed_events:?}"));
    assert!(panic.level == Level::ERROR && panic.has("panic", "traced panic"), "{panic:?}");
    let exit = crashed_events.iter().find(|s| s.message == "exit").expect("an exit event");
    assert!(exit.level == Level::WARN && exit.mentions("reason", "Panicked"), "{exit:?}");

    let stopped_events = about("pid", stopped);
    assert!(stopped_events.iter().any(|s| s.message == "stop"), "{stopped_events:?}");
    let exit = stopped_events.iter().find(|s| s.message == "exit").expect("an exit event");
    assert!(exit.has("reason", &format!("{:?}", ExitReason::Stopped)), "{exit:?}");

    let restarts: Vec<Seen> =
        seen.lock().unwrap().iter().filter(|s| s.message == "restart").cloned().collect();
    let restart = restarts.iter().find(|s| s.has("pid", &restarted.to_string())).expect("a restart event");
    assert!(restart.has("child", child_name) && restart.mentions("reason", "Panicked"), "{restart:?}");
}
