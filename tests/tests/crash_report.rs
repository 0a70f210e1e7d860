//! Crash reports in one format: a panicking process and a panicking
//! handler actor are each reported on stderr as "smarm: <kind> <pid> on
//! worker <n> panicked:" before the usual panic message, and the program
//! goes on. The report goes to stderr, so it runs in a forked child whose
//! stderr the test reads; without libtest's harness (`harness = false`),
//! whose output capture would swallow the report.

mod common;

use common::fork::{exit_child, run_child, say};

struct Bomb;

impl smarm::Actor for Bomb {
    type Msg = ();
    fn handle(&mut self, _: &mut smarm::Ctx<'_, Self>, (): ()) {
        panic!("handler bomb went off");
    }
}

fn child(_: usize) -> ! {
    let (process, actor) = smarm::run(|| {
        let process = smarm::spawn(|| -> u32 { panic!("process bomb went off") }).unwrap();
        let process_pid = process.pid();
        let _ = process.join();
        let actor = smarm::spawn_actor(Bomb).unwrap();
        let watch = smarm::monitor(actor.pid());
        actor.send(()).unwrap();
        let _ = watch.rx.recv();
        (process_pid, actor.pid())
    });
    say(&format!("CHILD pids {process} {actor}\n"));
    exit_child(0)
}

fn main() {
    let (output, status) = run_child(child, 0);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child died ({status}):\n{output}"
    );
    let pids = output.lines().find_map(|line| line.strip_prefix("CHILD pids ")).expect("the child's pids");
    let (process, actor) = pids.split_once(' ').unwrap();
    assert!(output.contains(&format!("smarm: process {process} on worker 0 panicked:")), "{output}");
    assert!(output.contains(&format!("smarm: handler actor {actor} on worker 0 panicked:")), "{output}");
    assert!(output.contains("process bomb went off") && output.contains("handler bomb went off"), "{output}");
    println!("crash_report: processes and handler actors crash in one format ... ok");
}
