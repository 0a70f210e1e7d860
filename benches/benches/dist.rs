//! The Erlang distribution protocol: smarm-dist beside the BEAM itself.
//!
//! - `dist_round_trip/smarm/to_beam`: a smarm process sends `{Self, I}` to
//!   a registered echo process on a BEAM node and waits for `{Echo, I}`;
//! - `dist_round_trip/smarm/to_smarm`: the same against an echo process on
//!   a second smarm node (both nodes in one runtime, over the loopback);
//! - `dist_round_trip/beam/to_beam`: a BEAM process against the echo on a
//!   second BEAM node, timed by Erlang itself (`erlang:monotonic_time`);
//! - `dist_one_way/smarm/to_beam` and `dist_one_way/beam/to_beam`: a batch
//!   of integers sent one way to the BEAM echo, then one round trip that
//!   proves they all arrived; per message.
//!
//! Every figure crosses a real TCP connection on the loopback. The BEAM
//! nodes (Debian: `erlang-nox`) and a private epmd are started once, and
//! stopped at the end.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use smarm_dist::{atom, Atom, ErlPid, FromTerm, Incoming, Node, Options, Term, ToTerm, Tuple};

const COOKIE: &str = "smarm-dist-bench";
const WAIT: Duration = Duration::from_secs(30);

enum Command_ {
    RoundTrip { to_smarm: bool, iters: u64 },
    BeamRoundTrip(u64),
    OneWay(u64),
    BeamOneWay(u64),
}

/// epmd in the foreground, killed on drop.
struct Epmd(Child);

impl Drop for Epmd {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Beam(Child);

impl Drop for Beam {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn host() -> String {
    let out = Command::new("hostname").arg("-s").output().expect("hostname");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn start_beam(dir: &PathBuf, short: &str, epmd: u16) -> Beam {
    let mut child = Command::new("erl")
        .args(["-sname", short, "-setcookie", COOKIE, "-noshell", "-noinput", "-hidden", "-pa"])
        .arg(dir)
        .args(["-s", "smarm_peer", "start"])
        .env("ERL_EPMD_PORT", epmd.to_string())
        .env("ERL_CRASH_DUMP_SECONDS", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("erl (Debian: erlang-nox)");
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        let mut lines = std::io::BufReader::new(stdout).lines();
        if lines.any(|l| l.is_ok_and(|l| l.trim() == "ready")) {
            let _ = tx.send(());
        }
        for _ in lines {}
    });
    rx.recv_timeout(Duration::from_secs(30)).expect("erl started");
    Beam(child)
}

/// Runs `command` on a BEAM node's control process; its integer result.
fn control(mailbox: &mut smarm_dist::Mailbox, beam: &str, command: impl ToTerm) -> Term {
    let me = Term::from(mailbox.pid().clone());
    mailbox.send(("control", beam), &Term::from(Tuple::from(vec![me, command.to_term()]))).unwrap();
    let (_, result): (Atom, Term) = mailbox.recv_as(WAIT).unwrap();
    result
}

fn round_trip(mailbox: &mut smarm_dist::Mailbox, to: (&str, &str), iters: u64) -> Duration {
    let me = mailbox.pid().clone();
    let started = Instant::now();
    for i in 0..iters {
        mailbox.send(to, &(&me, i)).unwrap();
        match mailbox.recv_timeout(WAIT).unwrap() {
            Incoming::Message { term, .. } => {
                let (_, back): (ErlPid, u64) = FromTerm::from_term(term).unwrap();
                assert_eq!(back, i);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    started.elapsed()
}

fn bench(c: &mut Criterion) {
    // A private epmd, two BEAM nodes running the test module.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let epmd = Command::new("epmd")
        .args(["-port", &port.to_string(), "-address", "127.0.0.1"])
        .stdout(Stdio::null())
        .spawn()
        .expect("epmd (Debian: erlang-nox)");
    let _epmd = Epmd(epmd);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let dir = std::env::temp_dir().join(format!("smarm-dist-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../dist/tests/erl/smarm_peer.erl");
    assert!(Command::new("erlc").arg("-o").arg(&dir).arg(source).status().unwrap().success());
    let id = std::process::id();
    let (short1, short2) = (format!("bench{id}a"), format!("bench{id}b"));
    let _beam1 = start_beam(&dir, &short1, port);
    let _beam2 = start_beam(&dir, &short2, port);
    let host = host();
    let (beam1, beam2) = (format!("{short1}@{host}"), format!("{short2}@{host}"));

    // The smarm side runs in its own runtime; the bench thread drives it
    // through smarm channels (a plain thread blocks on them).
    let (commands, command_rx) = smarm::channel::<Option<Command_>>();
    let (result_tx, results) = smarm::channel::<Duration>();
    let runner = std::thread::spawn(move || {
        smarm::run(move || {
            let options = Options { epmd_port: port, start_epmd: false, ..Options::default() };
            let a = Node::start_with(&format!("benchsmarm{id}a"), COOKIE, options.clone()).unwrap();
            let b = Node::start_with(&format!("benchsmarm{id}b"), COOKIE, options).unwrap();
            let echo_node = a.clone();
            let (ready_tx, ready_rx) = smarm::channel();
            smarm::spawn(move || {
                let mut mailbox = echo_node.mailbox().unwrap();
                mailbox.register("echo").unwrap();
                ready_tx.send(()).unwrap();
                while let Ok(Incoming::Message { term, .. }) = mailbox.recv() {
                    let Ok((from, body)) = <(ErlPid, Term)>::from_term(term) else { continue };
                    let _ = mailbox.send(from, &(mailbox.pid().clone(), body));
                }
            })
            .unwrap();
            ready_rx.recv().unwrap();
            let mut mailbox = b.mailbox().unwrap();
            let me = mailbox.pid().clone();
            while let Ok(Some(command)) = command_rx.recv() {
                let elapsed = match command {
                    Command_::RoundTrip { to_smarm: true, iters } => {
                        round_trip(&mut mailbox, ("echo", a.name()), iters)
                    }
                    Command_::RoundTrip { to_smarm: false, iters } => {
                        round_trip(&mut mailbox, ("echo", &beam2), iters)
                    }
                    Command_::BeamRoundTrip(iters) => {
                        let dest = (Atom::from("echo"), Atom::from(beam2.as_str()));
                        let micros = control(&mut mailbox, &beam1, (Atom::from("round_trips"), dest, iters));
                        Duration::from_micros(u64::from_term(micros).unwrap())
                    }
                    Command_::OneWay(iters) => {
                        let started = Instant::now();
                        for i in 0..iters {
                            mailbox.send(("echo", beam2.as_str()), &i).unwrap();
                        }
                        mailbox.send(("echo", beam2.as_str()), &(&me, atom("done"))).unwrap();
                        let _: (ErlPid, Atom) = mailbox.recv_as(WAIT).unwrap();
                        started.elapsed()
                    }
                    Command_::BeamOneWay(iters) => {
                        let dest = (Atom::from("echo"), Atom::from(beam2.as_str()));
                        let micros = control(&mut mailbox, &beam1, (Atom::from("blast"), dest, iters));
                        Duration::from_micros(u64::from_term(micros).unwrap())
                    }
                };
                result_tx.send(elapsed).unwrap();
            }
            a.stop();
            b.stop();
        })
    });
    let run = |command: Command_| -> Duration {
        commands.send(Some(command)).unwrap();
        results.recv().unwrap()
    };
    // Connect everything before timing.
    run(Command_::RoundTrip { to_smarm: true, iters: 10 });
    run(Command_::RoundTrip { to_smarm: false, iters: 10 });
    run(Command_::BeamRoundTrip(10));

    let mut group = c.benchmark_group("dist_round_trip");
    group.bench_function("smarm/to_beam", |b| {
        b.iter_custom(|iters| run(Command_::RoundTrip { to_smarm: false, iters }))
    });
    group.bench_function("smarm/to_smarm", |b| {
        b.iter_custom(|iters| run(Command_::RoundTrip { to_smarm: true, iters }))
    });
    group.bench_function("beam/to_beam", |b| b.iter_custom(|iters| run(Command_::BeamRoundTrip(iters))));
    group.finish();

    let mut group = c.benchmark_group("dist_one_way");
    group.throughput(Throughput::Elements(1));
    group.bench_function("smarm/to_beam", |b| b.iter_custom(|iters| run(Command_::OneWay(iters))));
    group.bench_function("beam/to_beam", |b| b.iter_custom(|iters| run(Command_::BeamOneWay(iters))));
    group.finish();

    commands.send(None).unwrap();
    runner.join().unwrap();
}

criterion_group!(benches, bench);
criterion_main!(benches);
