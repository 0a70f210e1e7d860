//! An observer page for a running smarm runtime, in the spirit of Erlang's
//! `observer`, served by the runtime it watches: a synthetic workload runs
//! on a four-worker Engine, and smarm processes serve one HTML page and the
//! JSON it polls over `smarm::net` (127.0.0.1 only).
//!
//! The workload: ping-pong process pairs across the workers, a registered
//! `logger` that traps exits and is linked to two flushers, a `spawner`
//! that starts batches of short-lived processes and monitors a sleeper, a
//! supervision tree (`app_sup` over `db` and `web`, where `web`'s `flaky`
//! child ends every few seconds and is restarted), and handler actors
//! (`bouncer_N`) that bounce messages across the workers, kicked by a
//! `thrower` process.
//!
//! Run:
//!
//! - `cargo run -p smarm --example observer -- --port 8080` and open
//!   <http://127.0.0.1:8080/> (`--port 0`, the default, picks a free port;
//!   the address is printed either way); it serves until interrupted;
//! - `--serve SECONDS`: serves that long, then stops every process and exits;
//! - `--selftest`: serves on a free port, fetches every endpoint with a
//!   plain `std` client, checks that the JSON shows the workload (its
//!   registered names, its supervision tree, four workers, messages
//!   flowing) and exits 0, or 1 with what was wrong.
//!
//! Endpoints (`GET`, answered with `Cache-Control: no-store`):
//!
//! - `/`: the page (inline CSS and JS, nothing fetched from elsewhere). It
//!   polls the endpoints below every 500 ms and draws per-worker charts,
//!   the worker table, the supervision tree and the process table.
//! - `/api/system`: `{workers, uptime_ms, live, actors, version}`: the
//!   worker count, time since the observer started, pids spawned and not
//!   yet finalized (processes and handler actors), installed handler actors.
//! - `/api/workers[?since=T]`: `{interval_ms, samples}`: a sampler process
//!   records every worker's cumulative counters every 250 ms (the last
//!   minute is kept); each sample is `{t_ms, workers: [{worker, passes,
//!   switches, spawned, exited, ready, parked, timers_fired, actors,
//!   mailbox_depth, handled, local_sends, cross_sends, inbox_sends,
//!   transfers_in, panics, restarts}]}`. `since` returns only the samples
//!   taken after `t_ms == T`. Rates are the page's deltas of these.
//! - `/api/processes`: `{processes: [...]}`, every live process and handler
//!   actor, sorted by pid: `{pid, name, kind ("process", "supervisor" or
//!   "actor"), worker, state, mailbox (actors only: entries waiting; a
//!   process has no mailbox, it receives on the channels it holds),
//!   links, monitors (death hooks on it), trapping, stack_high_water
//!   (bytes, processes), handled and type_name (actors)}`.
//! - `/api/tree`: `{supervisors, links}`: the supervision trees, as nested
//!   `{name, pid, restart, kind, children}` nodes (`kind` "supervisor" or
//!   "worker", `restart` null for a root) asked of each supervisor
//!   with `which_children`; and, for every other process that traps exits
//!   and has links, the processes it is linked to (`{pid, name, linked:
//!   [{pid, name}]}`) — what it would be told of if they died.
//!
//! The supervisors shown are the ones the workload hands the observer
//! ([`Observed::watch`]); a nested supervisor appears under the parent
//! whose child pid it runs as. The tree is not guessed from the process
//! listing: a supervisor traps exits and is linked to its children, but a
//! link has no direction, so two linked supervisors do not say which one
//! is the parent; `which_children` does.
//!
//! Files: `main.rs` (the server, the sampler and the selftest),
//! `workload.rs`, `page.html` (served as is). The page's rendered DOM is
//! checked in headless Chromium by `scripts/observer-browser-test.sh`.

mod workload;

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Value};
use smarm::net::{TcpListener, TcpStream};
use smarm::{Pid, Runtime, SupervisorRef};

/// Workers of the observed Engine.
const WORKERS: usize = 4;
/// The page, served at `/`.
const PAGE: &str = include_str!("page.html");
/// How often the sampler records the workers' counters.
const SAMPLE_EVERY: Duration = Duration::from_millis(250);
/// Samples kept: one minute.
const HISTORY: usize = 240;

/// What the observer knows beside the runtime's own admin answers.
struct Observed {
    runtime: Runtime,
    started: Instant,
    /// The supervisors to draw trees from; pruned when one has ended.
    supervisors: Mutex<Vec<SupervisorRef>>,
    samples: Mutex<VecDeque<Sample>>,
}

impl Observed {
    /// Shows `supervisor`'s tree (with any nested supervisor also watched
    /// drawn under it).
    fn watch(&self, supervisor: SupervisorRef) {
        self.supervisors.lock().unwrap_or_else(PoisonError::into_inner).push(supervisor);
    }

    fn watched(&self) -> Vec<SupervisorRef> {
        self.supervisors.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// Every worker's cumulative counters at one instant.
#[derive(Serialize, Clone)]
struct Sample {
    t_ms: u64,
    workers: Vec<Counters>,
}

/// One worker's counters (processes, then actors), as its last pass left them.
#[derive(Serialize, Clone)]
struct Counters {
    worker: usize,
    passes: u64,
    switches: u64,
    spawned: u64,
    exited: u64,
    ready: u64,
    parked: u64,
    timers_fired: u64,
    actors: u64,
    mailbox_depth: u64,
    handled: u64,
    local_sends: u64,
    cross_sends: u64,
    inbox_sends: u64,
    transfers_in: u64,
    panics: u64,
    restarts: u64,
}

fn counters(runtime: &Runtime, worker: usize) -> Counters {
    let stats = runtime.worker_stats(worker);
    let (processes, actors) = (stats.processes, stats.actors);
    Counters {
        worker,
        passes: processes.passes,
        switches: processes.switches,
        spawned: processes.spawned,
        exited: processes.exited,
        ready: processes.ready,
        parked: processes.parked,
        timers_fired: processes.timers_fired,
        actors: actors.actors,
        mailbox_depth: actors.mailbox_depth,
        handled: actors.handled,
        local_sends: actors.local_sends,
        cross_sends: actors.cross_sends,
        inbox_sends: actors.inbox_sends,
        transfers_in: actors.transfers_in,
        panics: actors.panics,
        restarts: actors.restarts,
    }
}

/// The sampler process: records every worker's counters each
/// `SAMPLE_EVERY`, on a fixed schedule (a late wake does not shift it; one
/// later than a whole period restarts it from now, rather than catching up
/// with samples a few microseconds apart).
fn sample(observed: &Observed) {
    let mut next = Instant::now();
    loop {
        let t_ms = observed.started.elapsed().as_millis() as u64;
        let workers = (0..observed.runtime.worker_count()).map(|w| counters(&observed.runtime, w)).collect();
        {
            let mut samples = observed.samples.lock().unwrap_or_else(PoisonError::into_inner);
            if samples.len() == HISTORY {
                samples.pop_front();
            }
            samples.push_back(Sample { t_ms, workers });
        }
        next = (next + SAMPLE_EVERY).max(Instant::now());
        smarm::sleep(next.saturating_duration_since(Instant::now()));
    }
}

/// One row of the process table: a process or a handler actor.
#[derive(Serialize)]
struct Row {
    pid: String,
    name: Option<String>,
    kind: &'static str,
    worker: usize,
    state: String,
    mailbox: Option<usize>,
    links: Vec<String>,
    monitors: usize,
    trapping: bool,
    stack_high_water: Option<usize>,
    handled: Option<u64>,
    type_name: Option<String>,
}

fn processes(observed: &Observed) -> Result<Value, String> {
    let runtime = &observed.runtime;
    let supervisors: HashSet<Pid> = observed.watched().iter().map(SupervisorRef::pid).collect();
    let mut rows: Vec<(Pid, Row)> = Vec::new();
    for p in runtime.list_processes().wait().map_err(|e| format!("list_processes: {e}"))? {
        let kind = if supervisors.contains(&p.pid) { "supervisor" } else { "process" };
        rows.push((
            p.pid,
            Row {
                pid: p.pid.to_string(),
                name: p.name,
                kind,
                worker: p.worker,
                state: format!("{:?}", p.state),
                mailbox: None,
                links: p.links.iter().map(Pid::to_string).collect(),
                monitors: p.monitors,
                trapping: p.trapping,
                stack_high_water: Some(p.stack_high_water),
                handled: None,
                type_name: None,
            },
        ));
    }
    for a in runtime.list_actors().wait().map_err(|e| format!("list_actors: {e}"))? {
        // The last path segment: `observer::workload::Bouncer` reads as `Bouncer`.
        let type_name = a.type_name.rsplit("::").next().unwrap_or(a.type_name);
        rows.push((
            a.pid,
            Row {
                pid: a.pid.to_string(),
                name: runtime.name_of(a.pid),
                kind: "actor",
                worker: a.worker,
                state: format!("{:?}", a.status),
                mailbox: Some(a.mailbox_depth),
                links: Vec::new(),
                monitors: 0,
                trapping: false,
                stack_high_water: None,
                handled: Some(a.handled),
                type_name: Some(type_name.to_string()),
            },
        ));
    }
    rows.sort_by_key(|(pid, _)| *pid);
    let rows: Vec<Row> = rows.into_iter().map(|(_, row)| row).collect();
    Ok(json!({ "processes": rows }))
}

/// A node of a supervision tree.
#[derive(Serialize)]
struct Node {
    name: String,
    pid: Option<String>,
    /// The child's restart policy; `None` for a root.
    restart: Option<String>,
    kind: &'static str,
    children: Vec<Node>,
}

fn node(
    name: String,
    pid: Option<Pid>,
    restart: Option<String>,
    children: &HashMap<Pid, Vec<smarm::ChildInfo>>,
) -> Node {
    let below = pid.and_then(|pid| children.get(&pid));
    Node {
        name,
        pid: pid.map(|pid| pid.to_string()),
        restart,
        kind: if below.is_some() { "supervisor" } else { "worker" },
        children: below
            .into_iter()
            .flatten()
            .map(|c| node(c.name.clone(), c.pid, Some(format!("{:?}", c.restart)), children))
            .collect(),
    }
}

fn tree(observed: &Observed) -> Result<Value, String> {
    let runtime = &observed.runtime;
    // Ask every watched supervisor for its children; forget those that ended.
    let mut children = HashMap::new();
    let mut alive = Vec::new();
    for supervisor in observed.watched() {
        if let Ok(list) = supervisor.which_children() {
            children.insert(supervisor.pid(), list);
            alive.push(supervisor);
        }
    }
    let live: HashSet<Pid> = alive.iter().map(SupervisorRef::pid).collect();
    observed.supervisors.lock().unwrap_or_else(PoisonError::into_inner).retain(|s| live.contains(&s.pid()));
    let nested: HashSet<Pid> = children.values().flatten().filter_map(|c| c.pid).collect();
    let roots: Vec<Node> = alive
        .iter()
        .filter(|s| !nested.contains(&s.pid()))
        .map(|s| {
            let name = runtime.name_of(s.pid()).unwrap_or_else(|| "supervisor".into());
            node(name, Some(s.pid()), None, &children)
        })
        .collect();
    // Trapping processes outside the trees, with the peers they are linked to.
    let mut links = Vec::new();
    for p in runtime.list_processes().wait().map_err(|e| format!("list_processes: {e}"))? {
        if p.trapping && !p.links.is_empty() && !live.contains(&p.pid) {
            let linked: Vec<Value> = p
                .links
                .iter()
                .map(|&peer| json!({ "pid": peer.to_string(), "name": runtime.name_of(peer) }))
                .collect();
            links.push(json!({ "pid": p.pid.to_string(), "name": p.name, "linked": linked }));
        }
    }
    Ok(json!({ "supervisors": roots, "links": links }))
}

fn system(observed: &Observed) -> Value {
    let runtime = &observed.runtime;
    let actors: u64 = (0..runtime.worker_count()).map(|w| runtime.actor_stats(w).actors).sum();
    json!({
        "workers": runtime.worker_count(),
        "uptime_ms": observed.started.elapsed().as_millis() as u64,
        "live": runtime.live(),
        "actors": actors,
        "version": env!("CARGO_PKG_VERSION"),
    })
}

fn workers(observed: &Observed, since: Option<u64>) -> Value {
    let samples = observed.samples.lock().unwrap_or_else(PoisonError::into_inner);
    let newer: Vec<&Sample> = samples.iter().filter(|s| since.is_none_or(|t| s.t_ms > t)).collect();
    json!({ "interval_ms": SAMPLE_EVERY.as_millis() as u64, "samples": newer })
}

/// An answer: status line, content type, body.
type Response = (&'static str, &'static str, Vec<u8>);

fn json_response(result: Result<Value, String>) -> Response {
    match result {
        Ok(value) => ("200 OK", "application/json", value.to_string().into_bytes()),
        Err(error) => (
            "503 Service Unavailable",
            "application/json",
            json!({ "error": error }).to_string().into_bytes(),
        ),
    }
}

fn route(observed: &Observed, target: &str) -> Response {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    match path {
        "/" => ("200 OK", "text/html; charset=utf-8", PAGE.as_bytes().to_vec()),
        "/api/system" => json_response(Ok(system(observed))),
        "/api/workers" => {
            let since = query.split('&').find_map(|pair| pair.strip_prefix("since=")?.parse().ok());
            json_response(Ok(workers(observed, since)))
        }
        "/api/processes" => json_response(processes(observed)),
        "/api/tree" => json_response(tree(observed)),
        _ => ("404 Not Found", "application/json", br#"{"error":"not found"}"#.to_vec()),
    }
}

/// Serves one keep-alive connection until the peer closes, asks to close,
/// or sends what this server does not take (a body, a bad request).
fn connection(mut stream: TcpStream, observed: &Observed) -> std::io::Result<()> {
    let mut buffer = vec![0u8; 8192];
    let mut filled = 0;
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut request = httparse::Request::new(&mut headers);
        // A request already buffered (pipelined behind the last) is answered
        // before anything more is read.
        let length = match request.parse(&buffer[..filled]) {
            Ok(httparse::Status::Complete(length)) => length,
            Ok(httparse::Status::Partial) if filled < buffer.len() => {
                let n = stream.read(&mut buffer[filled..])?;
                if n == 0 {
                    return Ok(());
                }
                filled += n;
                continue;
            }
            _ => {
                stream.write_all(
                    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )?;
                return Ok(());
            }
        };
        let header =
            |name: &str| request.headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value);
        let close = header("connection").is_some_and(|v| v.eq_ignore_ascii_case(b"close"));
        let has_body =
            header("content-length").is_some_and(|v| v != b"0") || header("transfer-encoding").is_some();
        let method = request.method.unwrap_or("");
        let (status, content_type, body) = match method {
            _ if has_body => ("400 Bad Request", "text/plain", b"no request bodies here".to_vec()),
            "GET" | "HEAD" => route(observed, request.path.unwrap_or("/")),
            _ => ("405 Method Not Allowed", "text/plain", b"GET only".to_vec()),
        };
        let mut out = format!(
            "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
             Cache-Control: no-store\r\n{}\r\n",
            body.len(),
            if close || has_body { "Connection: close\r\n" } else { "" }
        )
        .into_bytes();
        if method != "HEAD" {
            out.extend_from_slice(&body);
        }
        stream.write_all(&out)?;
        if close || has_body {
            return Ok(());
        }
        buffer.copy_within(length..filled, 0);
        filled -= length;
    }
}

/// The acceptor process: a process per connection, spread over the workers.
fn serve(listener: TcpListener, observed: Arc<Observed>) {
    let Some(runtime) = smarm::current_runtime() else { return };
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                let observed = observed.clone();
                if let Err(error) = runtime.spawn(move || {
                    if let Err(error) = connection(stream, &observed) {
                        eprintln!("observer: connection: {error}");
                    }
                }) {
                    eprintln!("observer: spawn: {error}");
                }
            }
            Err(error) => {
                eprintln!("observer: accept: {error}");
                smarm::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// Starts the workload, the sampler and the acceptor; returns the address served.
fn start(engine: &smarm::Engine, port: u16) -> Result<SocketAddr, String> {
    let runtime = engine.runtime().clone();
    let listener =
        TcpListener::bind(("127.0.0.1", port)).map_err(|e| format!("bind 127.0.0.1:{port}: {e}"))?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    let observed = Arc::new(Observed {
        runtime: runtime.clone(),
        started: Instant::now(),
        supervisors: Mutex::new(Vec::new()),
        samples: Mutex::new(VecDeque::new()),
    });
    let setup = {
        let observed = observed.clone();
        runtime.spawn_on(0, move || workload::start(&observed)).map_err(|e| e.to_string())?
    };
    setup.join().map_err(|e| format!("the workload's setup: {e:?}"))??;
    let sampler = observed.clone();
    let sampler = runtime.spawn_on(0, move || sample(&sampler)).map_err(|e| e.to_string())?;
    runtime.register("observer_sampler", sampler.pid()).map_err(|e| e.to_string())?;
    let acceptor = runtime.spawn_on(1, move || serve(listener, observed)).map_err(|e| e.to_string())?;
    runtime.register("observer", acceptor.pid()).map_err(|e| e.to_string())?;
    Ok(address)
}

/// A plain `std` client's `GET`: the status code and the body.
fn get(address: SocketAddr, path: &str) -> Result<(u16, String), String> {
    let mut stream = std::net::TcpStream::connect(address).map_err(|e| format!("connect: {e}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n")
        .map_err(|e| format!("write: {e}"))?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).map_err(|e| format!("read {path}: {e}"))?;
    let (head, body) = answer.split_once("\r\n\r\n").ok_or(format!("{path}: no header end"))?;
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or(format!("{path}: no status"))?;
    Ok((status, body.to_string()))
}

fn get_json(address: SocketAddr, path: &str) -> Result<Value, String> {
    match get(address, path)? {
        (200, body) => serde_json::from_str(&body).map_err(|e| format!("{path}: {e}")),
        (status, _) => Err(format!("{path}: status {status}")),
    }
}

/// Two requests in one write on one connection: both are answered, in order.
fn pipelined(address: SocketAddr) -> Result<bool, String> {
    let mut stream = std::net::TcpStream::connect(address).map_err(|e| format!("connect: {e}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    write!(
        stream,
        "GET /api/system HTTP/1.1\r\nHost: {address}\r\n\r\n\
         GET /nowhere HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("write: {e}"))?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).map_err(|e| format!("read: {e}"))?;
    // The first body (JSON, no newline) runs straight into the second status line.
    let statuses: Vec<&str> =
        answer.match_indices("HTTP/1.1 ").filter_map(|(i, _)| answer.get(i..i + 12)).collect();
    Ok(statuses == ["HTTP/1.1 200", "HTTP/1.1 404"])
}

/// Every name in a tree node and below it.
fn tree_names(node: &Value, out: &mut Vec<String>) {
    out.extend(node["name"].as_str().map(str::to_string));
    for child in node["children"].as_array().into_iter().flatten() {
        tree_names(child, out);
    }
}

/// Fetches every endpoint and checks it shows the workload; the failures.
fn check(address: SocketAddr) -> Result<Vec<String>, String> {
    let mut failures = Vec::new();
    let mut expect = |ok: bool, what: String| {
        if !ok {
            failures.push(what);
        }
    };
    let (status, page) = get(address, "/")?;
    expect(
        status == 200 && page.contains("id=\"sys-workers\""),
        format!("/: status {status}, or not the page"),
    );
    let system = get_json(address, "/api/system")?;
    expect(system["workers"] == WORKERS, format!("/api/system: workers {}", system["workers"]));
    let workers = get_json(address, "/api/workers")?;
    let samples = workers["samples"].as_array().cloned().unwrap_or_default();
    expect(samples.len() >= 2, format!("/api/workers: {} samples", samples.len()));
    if let (Some(first), Some(last)) = (samples.first(), samples.last()) {
        expect(
            last["workers"].as_array().map(Vec::len) == Some(WORKERS),
            "/api/workers: worker count".into(),
        );
        let total = |sample: &Value, key: &str| -> u64 {
            sample["workers"].as_array().into_iter().flatten().filter_map(|w| w[key].as_u64()).sum()
        };
        for key in ["handled", "switches"] {
            let (before, after) = (total(first, key), total(last, key));
            expect(after > before, format!("/api/workers: {key} did not grow ({before} -> {after})"));
        }
        let since = get_json(address, &format!("/api/workers?since={}", last["t_ms"]))?;
        let newer = since["samples"].as_array().map_or(0, Vec::len);
        expect(newer <= 1, format!("/api/workers?since: {newer} samples after the last one"));
    }
    let processes = get_json(address, "/api/processes")?;
    let rows = processes["processes"].as_array().cloned().unwrap_or_default();
    let named = |name: &str| rows.iter().find(|row| row["name"] == name);
    for (name, kind) in workload::NAMES {
        let found = named(name).map(|row| row["kind"].clone());
        expect(
            found.as_ref().is_some_and(|k| k == kind),
            format!("/api/processes: {name} as {kind}: {found:?}"),
        );
    }
    let tree = get_json(address, "/api/tree")?;
    let roots = tree["supervisors"].as_array().cloned().unwrap_or_default();
    let mut names = Vec::new();
    for root in &roots {
        tree_names(root, &mut names);
    }
    for name in workload::TREE {
        expect(names.iter().any(|n| n == name), format!("/api/tree: no {name} in {names:?}"));
    }
    let logger = tree["links"].as_array().into_iter().flatten().find(|group| group["name"] == "logger");
    let linked = logger.and_then(|group| group["linked"].as_array()).map_or(0, Vec::len);
    expect(linked == 2, format!("/api/tree: logger linked to {linked}, not 2"));
    let (status, _) = get(address, "/nowhere")?;
    expect(status == 404, format!("/nowhere: status {status}"));
    expect(pipelined(address)?, "two pipelined requests were not both answered, in order".into());
    println!("selftest: {} samples, {} processes and actors, tree {names:?}", samples.len(), rows.len());
    Ok(failures)
}

fn usage() -> ! {
    eprintln!("usage: observer [--port PORT] [--serve SECONDS | --selftest]");
    std::process::exit(2)
}

fn main() {
    let (mut port, mut seconds, mut selftest) = (0u16, None, false);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--port" => port = args.next().and_then(|p| p.parse().ok()).unwrap_or_else(|| usage()),
            "--serve" => seconds = Some(args.next().and_then(|s| s.parse().ok()).unwrap_or_else(|| usage())),
            "--selftest" => selftest = true,
            _ => usage(),
        }
    }
    let engine = smarm::Engine::builder().workers(WORKERS).build().expect("the engine starts");
    let address = match start(&engine, port) {
        Ok(address) => address,
        Err(error) => {
            eprintln!("observer: {error}");
            engine.shutdown();
            std::process::exit(1);
        }
    };
    println!("observer: {WORKERS} workers, serving http://{address}/");
    let failures = if selftest {
        // Let the sampler record a few samples first.
        std::thread::sleep(4 * SAMPLE_EVERY);
        check(address).unwrap_or_else(|error| vec![error])
    } else {
        match seconds {
            Some(seconds) => std::thread::sleep(Duration::from_secs(seconds)),
            None => loop {
                std::thread::park();
            },
        }
        Vec::new()
    };
    engine.shutdown();
    for failure in &failures {
        eprintln!("observer: {failure}");
    }
    if !failures.is_empty() {
        std::process::exit(1);
    }
    println!("observer: stopped{}", if selftest { "; selftest passed" } else { "" });
}
