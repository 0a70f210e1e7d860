//! Test helpers: a private epmd per test (its own port, so tests run in
//! parallel and never touch a shared one), the BEAM test module compiled
//! with erlc, and BEAM nodes started with `erl -sname` and killed on drop.
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use smarm_dist::{Atom, Mailbox, Options, Term, ToTerm, Tuple};

pub const COOKIE: &str = "smarm-dist-test";
static NEXT: AtomicU32 = AtomicU32::new(0);

/// A unique node name for this test run.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}{}x{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

pub fn host() -> String {
    let out = Command::new("hostname").arg("-s").output().expect("hostname");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// An epmd on a port of its own, run in the foreground as a child and
/// killed on drop (`epmd -kill` refuses while a node is still listed).
pub struct Epmd {
    pub port: u16,
    child: Child,
}

impl Epmd {
    /// Starts an epmd on a free port. The port is picked by binding port 0
    /// and letting it go, so another process may take it before epmd
    /// binds it: an epmd that exits (it could not bind) is started again on
    /// another port, and one counts as up only if a connection succeeds
    /// while it is still running.
    pub fn start() -> Epmd {
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            let mut child = Command::new("epmd")
                .args(["-port", &port.to_string(), "-address", "127.0.0.1"])
                .stdout(Stdio::null())
                // It reports the readiness probe below as a partial packet.
                .stderr(Stdio::null())
                .spawn()
                .expect("epmd is installed (Debian: erlang-nox)");
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                if child.try_wait().expect("epmd's status").is_some() {
                    break;
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    // Still running after the connection: the listener was
                    // epmd's, not another process's.
                    std::thread::sleep(Duration::from_millis(20));
                    if child.try_wait().expect("epmd's status").is_none() {
                        return Epmd { port, child };
                    }
                    break;
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    panic!("epmd did not come up on {port}");
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        panic!("epmd exited at start on five ports in a row");
    }

    pub fn options(&self) -> Options {
        Options {
            epmd_port: self.port,
            start_epmd: false,
            listen: "127.0.0.1:0".parse().unwrap(),
            ..Options::default()
        }
    }

    pub fn registered(&self, name: &str) -> bool {
        let out = Command::new("epmd")
            .args(["-port", &self.port.to_string(), "-names"])
            .env("ERL_EPMD_PORT", self.port.to_string())
            .output()
            .expect("epmd -names");
        String::from_utf8_lossy(&out.stdout).contains(&format!("name {name} at"))
    }
}

impl Drop for Epmd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The test module, compiled once per test binary into a temp dir.
pub fn beam_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("smarm-dist-erl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/erl/smarm_peer.erl");
        let status = Command::new("erlc").arg("-o").arg(&dir).arg(source).status().expect("erlc");
        assert!(status.success(), "erlc failed");
        dir
    })
    .clone()
}

/// A BEAM node running the test module, killed on drop.
pub struct Beam {
    pub name: String,
    child: Child,
}

impl Beam {
    pub fn start(epmd: &Epmd, cookie: &str) -> Beam {
        Beam::start_named(epmd, &unique("beam"), cookie)
    }

    pub fn start_named(epmd: &Epmd, short: &str, cookie: &str) -> Beam {
        let dir = beam_dir();
        let mut child = Command::new("erl")
            .args(["-sname", short, "-setcookie", cookie, "-noshell", "-noinput", "-pa"])
            .arg(&dir)
            .args(["-s", "smarm_peer", "start"])
            .env("ERL_EPMD_PORT", epmd.port.to_string())
            .env("ERL_CRASH_DUMP_SECONDS", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("erl is installed (Debian: erlang-nox)");
        // The test module prints `ready` once its processes are registered.
        let stdout = child.stdout.take().expect("piped");
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            let mut lines = std::io::BufReader::new(stdout).lines();
            if lines.any(|line| line.is_ok_and(|l| l.trim() == "ready")) {
                let _ = ready_tx.send(());
            }
            // Keep draining so the node never blocks on a full pipe.
            for _ in lines {}
        });
        if ready_rx.recv_timeout(Duration::from_secs(20)).is_err() {
            let _ = child.kill();
            panic!("erl {short} did not start");
        }
        Beam { name: format!("{short}@{}", host()), child }
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Beam {
    fn drop(&mut self) {
        self.kill();
    }
}

pub const WAIT: Duration = Duration::from_secs(10);

/// Runs `command` on the BEAM's control process and returns its result.
pub fn control(mailbox: &mut Mailbox, beam: &str, command: impl ToTerm) -> Term {
    let me = Term::from(mailbox.pid().clone());
    mailbox.send(("control", beam), &Term::from(Tuple::from(vec![me, command.to_term()]))).unwrap();
    let (_, result): (Atom, Term) = mailbox.recv_as(WAIT).expect("the control process replies");
    result
}
