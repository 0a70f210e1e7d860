//! A TCP chat server: one process per connection (and a writer process
//! beside it), and a room — a handler actor registered as `"room"` — that
//! broadcasts every line to every member. Connections find the room by its
//! registered name.
//!
//! Run: `cargo run -p smarm --example chat_server` and connect with
//! `nc 127.0.0.1 7878` from several terminals; or
//! `cargo run -p smarm --example chat_server -- --selftest [clients] [lines]`
//! to start the server on a free port, connect `clients` clients (default
//! 20) that each say `lines` lines (default 20), and check that every
//! client heard every line exactly once, in each speaker's order.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::net::SocketAddr;
use std::sync::Arc;

use smarm::net::{TcpListener, TcpStream};
use smarm::{Actor, ActorAddress, Ctx};

/// What the room is told.
enum Room {
    Join(u64, smarm::Sender<Arc<str>>),
    Leave(u64),
    Say(u64, String),
}

/// The room: members by connection id.
#[derive(Default)]
struct ChatRoom {
    members: HashMap<u64, smarm::Sender<Arc<str>>>,
}

impl Actor for ChatRoom {
    type Msg = Room;
    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        ctx.register("room").expect("one room");
    }
    fn handle(&mut self, _ctx: &mut Ctx<'_, Self>, msg: Room) {
        match msg {
            Room::Join(id, member) => {
                let _ = member.send(Arc::from(format!("welcome {id}\n")));
                self.members.insert(id, member);
            }
            Room::Leave(id) => {
                self.members.remove(&id);
            }
            Room::Say(id, text) => {
                let line: Arc<str> = Arc::from(format!("{id}: {text}\n"));
                // A member whose writer is gone is dropped from the room.
                self.members.retain(|_, member| member.send(line.clone()).is_ok());
            }
        }
    }
}

/// The room's address, looked up by name.
fn room() -> std::io::Result<ActorAddress> {
    let rt = smarm::current_runtime().ok_or_else(|| std::io::Error::other("not in a process"))?;
    let pid = smarm::whereis("room").ok_or_else(|| std::io::Error::other("no room registered"))?;
    Ok(ActorAddress::from_pid(&rt, pid))
}

/// Reads one line (without its newline); `None` at end of stream.
fn read_line(stream: &mut BufReader<TcpStream>) -> std::io::Result<Option<String>> {
    let mut line = String::new();
    if stream.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    Ok(Some(line.trim_end_matches('\n').trim_end_matches('\r').to_string()))
}

/// One connection: a writer process sends the room's lines out; this
/// process reads the client's lines in and tells the room.
fn connection(id: u64, stream: TcpStream) -> std::io::Result<()> {
    let room = room()?;
    let (tx, lines) = smarm::channel::<Arc<str>>();
    let mut out = stream.try_clone()?;
    let writer = smarm::spawn(move || {
        while let Ok(line) = lines.recv() {
            if out.write_all(line.as_bytes()).is_err() {
                break;
            }
        }
    })
    .map_err(std::io::Error::other)?;
    room.send(Room::Join(id, tx)).map_err(|_| std::io::Error::other("the room is gone"))?;
    let mut stream = BufReader::new(stream);
    while let Some(line) = read_line(&mut stream)? {
        room.send(Room::Say(id, line)).map_err(|_| std::io::Error::other("the room is gone"))?;
    }
    // The room drops our sender; the writer ends when it does.
    let _ = room.send(Room::Leave(id));
    let _ = writer.join();
    Ok(())
}

/// Accepts connections forever (or `limit` of them), a process each.
fn serve(listener: TcpListener, limit: Option<u64>) -> std::io::Result<()> {
    let mut accepted = 0u64;
    let mut handles = Vec::new();
    while limit.is_none_or(|limit| accepted < limit) {
        let (stream, _) = listener.accept()?;
        let id = accepted;
        accepted += 1;
        let handle = smarm::spawn(move || {
            if let Err(e) = connection(id, stream) {
                eprintln!("connection {id}: {e}");
            }
        })
        .map_err(std::io::Error::other)?;
        handles.push(handle);
    }
    for handle in handles {
        let _ = handle.join();
    }
    Ok(())
}

/// A self-test client: waits for its welcome, reports ready, waits for
/// `go`, says `lines` lines, then reads until it has heard every client's
/// every line. Returns how many lines it heard.
fn client(
    addr: SocketAddr,
    clients: u64,
    lines: u64,
    ready: smarm::Sender<()>,
    go: smarm::Receiver<()>,
) -> std::io::Result<u64> {
    let mut out = TcpStream::connect(addr)?;
    let mut stream = BufReader::new(out.try_clone()?);
    let welcome = read_line(&mut stream)?.unwrap_or_default();
    let me: u64 = welcome
        .strip_prefix("welcome ")
        .and_then(|id| id.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("expected a welcome, got {welcome:?}")))?;
    ready.send(()).map_err(std::io::Error::other)?;
    go.recv().map_err(std::io::Error::other)?;
    for n in 0..lines {
        out.write_all(format!("line {n}\n").as_bytes())?;
    }
    // Per speaker, the next line number expected.
    let mut next: HashMap<u64, u64> = HashMap::new();
    let mut heard = 0;
    while heard < clients * lines {
        let line = read_line(&mut stream)?.ok_or(ErrorKind::UnexpectedEof)?;
        let (speaker, text) = line.split_once(": ").ok_or_else(|| std::io::Error::other(line.clone()))?;
        let speaker: u64 = speaker.parse().map_err(std::io::Error::other)?;
        let n: u64 = text.strip_prefix("line ").and_then(|n| n.parse().ok()).ok_or(ErrorKind::InvalidData)?;
        let expected = next.entry(speaker).or_default();
        if n != *expected {
            return Err(std::io::Error::other(format!(
                "client {me}: from {speaker} heard line {n}, expected {expected}"
            )));
        }
        *expected += 1;
        heard += 1;
    }
    Ok(heard)
}

fn selftest(clients: u64, lines: u64) {
    let engine = smarm::Engine::builder().workers(4).build().expect("engine starts");
    let rt = engine.runtime().clone();
    let room = rt.spawn_actor(ChatRoom::default()).expect("the room starts");
    let heard = engine
        .block_on(move || {
            while smarm::whereis("room").is_none() {
                smarm::sleep(std::time::Duration::from_millis(1));
            }
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
            let addr = listener.local_addr().expect("address");
            let server = smarm::spawn(move || serve(listener, Some(clients))).expect("spawn the server");
            let rt = smarm::current_runtime().expect("in a process");
            let (ready, readies) = smarm::channel();
            let mut gos = Vec::new();
            let handles: Vec<_> = (0..clients)
                .map(|_| {
                    let (go, go_rx) = smarm::channel();
                    gos.push(go);
                    let ready = ready.clone();
                    rt.spawn(move || client(addr, clients, lines, ready, go_rx)).expect("spawn a client")
                })
                .collect();
            // Everyone is in the room before anyone speaks.
            for _ in 0..clients {
                readies.recv().expect("every client gets its welcome");
            }
            for go in gos {
                go.send(()).expect("the client waits");
            }
            let heard: Vec<u64> =
                handles.into_iter().map(|h| h.join().expect("client runs").expect("client checks")).collect();
            server.join().expect("server").expect("server runs");
            // The Engine runs until nothing is live: close the room too.
            room.stop().expect("the room is open");
            heard
        })
        .expect("root returns");
    assert!(heard.iter().all(|&h| h == clients * lines), "{heard:?}");
    println!(
        "{clients} clients each heard all {} lines ({lines} from each), in each speaker's order",
        clients * lines
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    if args.next().as_deref() == Some("--selftest") {
        let clients = args.next().map_or(20, |n| n.parse().expect("a number of clients"));
        let lines = args.next().map_or(20, |n| n.parse().expect("a number of lines"));
        selftest(clients, lines);
        return;
    }
    let engine = smarm::Engine::builder().workers(4).build().expect("engine starts");
    engine.runtime().spawn_actor(ChatRoom::default()).expect("the room starts");
    let listener = TcpListener::bind("127.0.0.1:7878").expect("bind 127.0.0.1:7878");
    println!("chat on 127.0.0.1:7878 — connect with `nc 127.0.0.1 7878`");
    engine.block_on(move || serve(listener, None).expect("serve")).expect("root returns");
}
