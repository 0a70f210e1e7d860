//! A smarm node in an Erlang cluster: a kv gen_server called from an
//! Erlang escript, and a smarm process monitoring an Erlang process.
//!
//! Needs the BEAM (Debian: `erlang-nox`). Runs `epmd -daemon` if none is
//! running (it keeps running afterwards, as with `erl`).
//!
//! ```text
//! cargo run -p smarm-dist --example cluster
//! ```

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

use smarm::gen_server::GenServer;
use smarm_dist::{Atom, ErlPid, FromTerm, Incoming, Node, Term};

const COOKIE: &str = "cluster-example";

/// `{put, Key, Value}` or `{get, Key}` from Erlang.
enum Request {
    Put(String, String),
    Get(String),
}

impl FromTerm for Request {
    fn from_term(term: Term) -> Result<Self, smarm_dist::ConvertError> {
        if let Ok((op, key, value)) = <(Atom, String, String)>::from_term(term.clone()) {
            if op.name == "put" {
                return Ok(Request::Put(key, value));
            }
        }
        match <(Atom, String)>::from_term(term.clone()) {
            Ok((op, key)) if op.name == "get" => Ok(Request::Get(key)),
            _ => Err(smarm_dist::ConvertError::new(term, "{put, Key, Value} or {get, Key}")),
        }
    }
}

struct Kv(HashMap<String, String>);

impl GenServer for Kv {
    type Call = Request;
    type Reply = Option<String>;
    type Cast = Term;
    type Info = ();
    fn handle_call(&mut self, request: Request) -> Option<String> {
        match request {
            Request::Put(key, value) => self.0.insert(key, value),
            Request::Get(key) => self.0.get(&key).cloned(),
        }
    }
    fn handle_cast(&mut self, _: Term) {}
}

fn main() {
    let result = smarm::run(|| {
        let node = Node::start(&format!("cluster{}", std::process::id()), COOKIE)?;
        println!("smarm: node {} is up", node.name());

        let kv = smarm::Server::new(Kv(HashMap::new())).start().map_err(|e| e.to_string())?;
        smarm_dist::serve_gen_server(&node, "kv", kv)?;

        // The watcher: told a pid, it monitors it and reports the Down.
        let watcher_node = node.clone();
        let watcher = smarm::spawn(move || -> Result<String, String> {
            let mut mailbox = watcher_node.mailbox().map_err(|e| e.to_string())?;
            mailbox.register("watcher").map_err(|e| e.to_string())?;
            let (client, victim): (ErlPid, ErlPid) =
                mailbox.recv_as(Duration::from_secs(30)).map_err(|e| e.to_string())?;
            let reference = mailbox.monitor(&victim);
            mailbox.send(&client, &(Atom::from("watching"), &victim)).map_err(|e| e.to_string())?;
            loop {
                match mailbox.recv_timeout(Duration::from_secs(10)).map_err(|e| e.to_string())? {
                    Incoming::Down { reference: r, reason, .. } if r == reference => {
                        let text = reason.to_string();
                        mailbox.send(&client, &(Atom::from("seen"), reason)).map_err(|e| e.to_string())?;
                        return Ok(text);
                    }
                    _ => continue,
                }
            }
        })
        .map_err(|e| e.to_string())?;

        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/cluster_client.escript");
        let node_name = node.name().to_string();
        let status = smarm::io::block_on_io(move || {
            Command::new("escript").args([script, &node_name, COOKIE]).status()
        })
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("cannot run escript (install erlang-nox): {e}"))?;
        let seen = watcher.join().map_err(|e| format!("watcher: {e:?}"))??;
        println!("smarm: the Erlang process went down with {seen}");
        node.stop();
        if !status.success() {
            return Err(format!("the escript failed: {status}").into());
        }
        if seen != "'finished'" {
            return Err(format!("expected the reason finished, saw {seen}").into());
        }
        Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
    });
    if let Err(e) = result {
        eprintln!("cluster: {e}");
        std::process::exit(1);
    }
}
