//! YDB's `02_discovery` on agentbox's actors and interconnect: five nodes in one process
//! publish their HTTP endpoints to a replicated store and find each other by a majority
//! read.
//!
//! `cargo run --release --example discovery [-- --base-port 13301 --http-base-port 8881 --serve [ADDR]]`
//!
//! Five actor systems (node ids 1..=5) talk over the interconnect on 127.0.0.1. Each node
//! runs:
//!
//! - a **replica**, the local service `replica`: key → the endpoint records published under
//!   it, each with the id of its publisher. It answers lookups, acks a new publisher with
//!   `TRACK_DELIVERY | SUBSCRIBE_ON_SESSION`, and forgets a publisher that is gone
//!   (`Undelivered`) or whose node disconnected (`NodeDisconnected`);
//! - a **publisher**: sends its node's record (the HTTP address) to all five replicas with
//!   `TRACK_DELIVERY | SUBSCRIBE_ON_SESSION`, and publishes to a replica again 250 ms after
//!   an `Undelivered` or a `NodeDisconnected` from that replica's node;
//! - an **HTTP endpoint** (`tiny_http`, on a thread of its own): `GET /list` registers a
//!   **lookup** actor that asks all five replicas and answers once a majority (3) answered,
//!   with the union of their records. A record that reached a majority of the replicas is
//!   always in that union: two majorities of five share at least one replica.
//!
//! Node `i` listens on `--base-port + i - 1` (interconnect, default 13301..13305, as YDB's
//! example) and on `--http-base-port + i - 1` (HTTP, default 8881..8885); `0` lets the OS
//! pick free ports (`-- --base-port 0 --http-base-port 0`).
//!
//! The program prints the ports, polls `/list` until it shows all five endpoints, then
//! fetches `/list` once more over HTTP, prints the list, stops the environment (the
//! interconnect stops with it) and exits. With `--serve` it keeps running until killed:
//! try `curl http://127.0.0.1:8881/list`. Built with `--features monitor`, `--serve` also
//! serves the live introspection page of the five nodes (`agentbox::monitor`) on `ADDR`
//! (default `127.0.0.1:8880`, a loopback address): open `http://127.0.0.1:8880/`.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::ExitCode;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use agentbox::actors::*;
use agentbox::interconnect::{
    Interconnect, InterconnectSetup, NameService, NodeAddress, NodeConnected, NodeDisconnected,
    RemoteEvent, Serde, Unsubscribe,
};
use agentbox::{ActorId, Environment};
use serde::{Deserialize, Serialize};

/// The number of nodes, each with a replica.
const NODES: u32 = 5;
/// The key every publisher publishes under and every lookup reads.
const KEY: &str = "endpoints";
/// How long a publisher waits before publishing again to a replica it lost.
const REPUBLISH_DELAY: Duration = Duration::from_millis(250);
/// How long a lookup waits for a majority of the replicas.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(2);
/// How long an HTTP request waits for its lookup (a little more than the lookup itself).
const HTTP_WAIT: Duration = Duration::from_secs(3);
/// How long the program waits for all five endpoints to be discoverable.
const READY_DEADLINE: Duration = Duration::from_secs(30);

const EVENTS: u32 = event_space_begin(ES_USERSPACE + 2);

/// What a publisher publishes: where its node answers HTTP.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct Endpoint {
    node: u32,
    http: String,
}

/// Publisher → replica: keep `endpoint` under `key` for me (the sender). The cookie tells
/// the publisher's replicas apart; the ack echoes it.
#[derive(Serialize, Deserialize)]
struct ReplicaPublish {
    key: String,
    endpoint: Endpoint,
}
impl Event for ReplicaPublish {
    const EVENT_TYPE: u32 = EVENTS + 1;
}
impl RemoteEvent for ReplicaPublish {
    type Codec = Serde;
}

/// Replica → publisher, on a publisher's first publish. Sent with `TRACK_DELIVERY |
/// SUBSCRIBE_ON_SESSION`, so that the replica learns when the publisher goes.
#[derive(Serialize, Deserialize)]
struct ReplicaPublishAck;
impl Event for ReplicaPublishAck {
    const EVENT_TYPE: u32 = EVENTS + 2;
}
impl RemoteEvent for ReplicaPublishAck {
    type Codec = Serde;
}

/// Lookup → replica: what do you hold under `key`? The cookie is the replica's index.
#[derive(Serialize, Deserialize)]
struct ReplicaLookup {
    key: String,
}
impl Event for ReplicaLookup {
    const EVENT_TYPE: u32 = EVENTS + 3;
}
impl RemoteEvent for ReplicaLookup {
    type Codec = Serde;
}

/// Replica → lookup: the records under `key`, with their publishers.
#[derive(Serialize, Deserialize)]
struct ReplicaInfo {
    key: String,
    entries: Vec<(ActorId, Endpoint)>,
}
impl Event for ReplicaInfo {
    const EVENT_TYPE: u32 = EVENTS + 4;
}
impl RemoteEvent for ReplicaInfo {
    type Codec = Serde;
}

/// The replica service of `node`.
fn replica_id(node: u32) -> ActorId {
    ActorId::service(node, b"replica").expect("a 7-byte name on a small node id")
}

/// The replicas of the cluster, by node (index `node - 1`).
fn all_replicas() -> Vec<ActorId> {
    (1..=NODES).map(replica_id).collect()
}

/// One node's share of the store: the records of every publisher that reached it.
#[derive(Default)]
struct Replica {
    /// Key → publisher → its record.
    keys: BTreeMap<String, BTreeMap<ActorId, Endpoint>>,
    /// Publisher → the key it publishes under (one key per publisher).
    owners: BTreeMap<ActorId, String>,
}

impl Actor for Replica {
    fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _parent: ActorId) {
        ctx.become_state(Self::serving);
    }
}

impl Replica {
    fn serving(&mut self, ctx: &mut ActorContext<Self>, mut ev: EventHandle) -> Handled {
        if let Some(ReplicaPublish { key, endpoint }) = ev.take::<ReplicaPublish>() {
            self.publish(ctx, ev.sender(), ev.cookie(), key, endpoint);
        } else if let Some(ReplicaLookup { key }) = ev.take::<ReplicaLookup>() {
            let entries = self
                .keys
                .get(&key)
                .map(|m| m.iter().map(|(id, e)| (*id, e.clone())).collect())
                .unwrap_or_default();
            let info = ReplicaInfo { key, entries };
            ctx.send_with(ev.sender(), info, EventFlags::empty(), ev.cookie());
        } else if ev.is::<Undelivered>() {
            // An ack came back (from the publisher's id): the publisher is gone.
            self.forget(ev.sender());
            self.unsubscribe_if_last(ctx, ev.sender().node_id());
        } else if let Some(&NodeDisconnected { node_id }) = ev.get::<NodeDisconnected>() {
            // The session ended, and the subscription with it: the publishers of that
            // node publish again (a new ack subscribes anew) if they are still there.
            let gone: Vec<ActorId> = self
                .owners
                .keys()
                .filter(|o| o.node_id() == node_id)
                .copied()
                .collect();
            for owner in gone {
                self.forget(owner);
            }
        } else if !ev.is::<NodeConnected>() {
            return ev.unhandled(); // Poison passes it away
        }
        Handled::Yes
    }

    fn publish(
        &mut self,
        ctx: &mut ActorContext<Self>,
        owner: ActorId,
        cookie: u64,
        key: String,
        endpoint: Endpoint,
    ) {
        match self.owners.get(&owner) {
            // A publisher has one key; another one from it is suspicious (ignored, as
            // YDB's replica does).
            Some(k) if *k != key => {}
            Some(_) => {
                self.keys.entry(key).or_default().insert(owner, endpoint);
            }
            None => {
                self.owners.insert(owner, key.clone());
                self.keys.entry(key).or_default().insert(owner, endpoint);
                let flags = EventFlags::TRACK_DELIVERY | EventFlags::SUBSCRIBE_ON_SESSION;
                ctx.send_with(owner, ReplicaPublishAck, flags, cookie);
            }
        }
    }

    fn forget(&mut self, owner: ActorId) {
        let Some(key) = self.owners.remove(&owner) else {
            return;
        };
        if let Some(m) = self.keys.get_mut(&key) {
            m.remove(&owner);
            if m.is_empty() {
                self.keys.remove(&key);
            }
        }
    }

    /// Ends the subscription to a remote node's session once no publisher of it is left.
    fn unsubscribe_if_last(&self, ctx: &ActorContext<Self>, node: u32) {
        if node != ctx.node_id() && !self.owners.keys().any(|o| o.node_id() == node) {
            ctx.send(ActorId::interconnect_proxy(node), Unsubscribe);
        }
    }
}

/// Keeps its node's record in every replica.
struct Publisher {
    endpoint: Endpoint,
    replicas: Vec<ActorId>,
    /// Whether a publish to replica `i` is scheduled.
    sleeping: Vec<bool>,
}

impl Publisher {
    fn new(endpoint: Endpoint, replicas: Vec<ActorId>) -> Publisher {
        let sleeping = vec![false; replicas.len()];
        Publisher {
            endpoint,
            replicas,
            sleeping,
        }
    }

    fn publish(&self, ctx: &ActorContext<Self>, i: usize) {
        let event = ReplicaPublish {
            key: KEY.to_owned(),
            endpoint: self.endpoint.clone(),
        };
        let flags = EventFlags::TRACK_DELIVERY | EventFlags::SUBSCRIBE_ON_SESSION;
        ctx.send_with(self.replicas[i], event, flags, i as u64);
    }

    /// Publishes to replica `i` again after a while (once, however many losses are
    /// reported meanwhile).
    fn later(&mut self, ctx: &ActorContext<Self>, i: usize) {
        if let Some(sleeping) = self.sleeping.get_mut(i) {
            if !std::mem::replace(sleeping, true) {
                ctx.schedule(REPUBLISH_DELAY, Wakeup { tag: i as u64 });
            }
        }
    }
}

impl Actor for Publisher {
    fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _parent: ActorId) {
        for i in 0..self.replicas.len() {
            self.publish(ctx, i);
        }
        ctx.become_state(Self::publishing);
    }
}

impl Publisher {
    fn publishing(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
        if ev.is::<Undelivered>() {
            // The replica's node could not be reached, or nobody serves the replica there.
            self.later(ctx, ev.cookie() as usize);
        } else if let Some(&NodeDisconnected { node_id }) = ev.get::<NodeDisconnected>() {
            // The record may be gone with the session: the replica forgets this node's
            // publishers when the session ends.
            for i in 0..self.replicas.len() {
                if self.replicas[i].node_id() == node_id {
                    self.later(ctx, i);
                }
            }
        } else if let Some(&Wakeup { tag }) = ev.get::<Wakeup>() {
            let i = tag as usize;
            if let Some(sleeping) = self.sleeping.get_mut(i) {
                *sleeping = false;
                self.publish(ctx, i);
            }
        } else if !(ev.is::<ReplicaPublishAck>() || ev.is::<NodeConnected>()) {
            return ev.unhandled(); // Poison passes it away
        }
        Handled::Yes
    }
}

/// What a lookup gives its HTTP request: the records (by endpoint) or why there are none.
type Listing = Result<Vec<(Endpoint, ActorId)>, String>;

/// One `GET /list`: asks every replica, answers once a majority answered.
struct Lookup {
    key: String,
    replicas: Vec<ActorId>,
    reply: Option<mpsc::Sender<Listing>>,
    /// Whether replica `i` answered or was lost (each counts once).
    done: Vec<bool>,
    answered: usize,
    lost: usize,
    found: BTreeMap<ActorId, Endpoint>,
    timeout: Option<ScheduleHandle>,
}

impl Lookup {
    fn new(key: &str, replicas: Vec<ActorId>, reply: mpsc::Sender<Listing>) -> Lookup {
        Lookup {
            key: key.to_owned(),
            done: vec![false; replicas.len()],
            replicas,
            reply: Some(reply),
            answered: 0,
            lost: 0,
            found: BTreeMap::new(),
            timeout: None,
        }
    }

    fn majority(&self) -> usize {
        self.replicas.len() / 2 + 1
    }

    /// Marks replica `i` as done; false if it already was (or is no replica).
    fn mark(&mut self, i: usize) -> bool {
        self.done
            .get_mut(i)
            .is_some_and(|d| !std::mem::replace(d, true))
    }

    /// Replies, ends the session subscriptions the lookups made, and passes away.
    fn finish(&mut self, ctx: &mut ActorContext<Self>) {
        let listing = if self.answered >= self.majority() {
            let mut v: Vec<_> = std::mem::take(&mut self.found)
                .into_iter()
                .map(|(id, e)| (e, id))
                .collect();
            v.sort();
            Ok(v)
        } else {
            Err(format!(
                "{} of {} replicas answered, {} needed",
                self.answered,
                self.replicas.len(),
                self.majority()
            ))
        };
        if let Some(reply) = self.reply.take() {
            let _ = reply.send(listing); // the request may have timed out
        }
        if let Some(t) = self.timeout.take() {
            t.cancel();
        }
        let mut nodes: Vec<u32> = self.replicas.iter().map(ActorId::node_id).collect();
        nodes.sort_unstable();
        nodes.dedup();
        for node in nodes.into_iter().filter(|&n| n != ctx.node_id()) {
            ctx.send(ActorId::interconnect_proxy(node), Unsubscribe);
        }
        let _ = ctx.pass_away();
    }
}

impl Actor for Lookup {
    fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _parent: ActorId) {
        let flags = EventFlags::TRACK_DELIVERY | EventFlags::SUBSCRIBE_ON_SESSION;
        for (i, &replica) in self.replicas.iter().enumerate() {
            let event = ReplicaLookup {
                key: self.key.clone(),
            };
            ctx.send_with(replica, event, flags, i as u64);
        }
        self.timeout = Some(ctx.schedule(LOOKUP_TIMEOUT, Wakeup::default()));
        ctx.become_state(Self::waiting);
    }
}

impl Lookup {
    fn waiting(&mut self, ctx: &mut ActorContext<Self>, mut ev: EventHandle) -> Handled {
        if let Some(info) = ev.take::<ReplicaInfo>() {
            if self.mark(ev.cookie() as usize) {
                self.answered += 1;
                if info.key == self.key {
                    self.found.extend(info.entries);
                }
            }
        } else if ev.is::<Undelivered>() {
            if self.mark(ev.cookie() as usize) {
                self.lost += 1;
            }
        } else if let Some(&NodeDisconnected { node_id }) = ev.get::<NodeDisconnected>() {
            for i in 0..self.replicas.len() {
                if self.replicas[i].node_id() == node_id && self.mark(i) {
                    self.lost += 1;
                }
            }
        } else if ev.is::<Wakeup>() {
            self.finish(ctx); // timed out: a majority did not answer in time
            return Handled::Yes;
        } else if ev.is::<NodeConnected>() {
            return Handled::Yes;
        } else {
            return ev.unhandled();
        }
        if self.answered >= self.majority() || self.answered + self.lost == self.replicas.len() {
            self.finish(ctx);
        }
        Handled::Yes
    }
}

/// A node's HTTP endpoint: `GET /list` runs a lookup on the node and waits for it.
fn serve_http(server: &tiny_http::Server, system: &ActorSystem) {
    for request in server.incoming_requests() {
        let path = request.url().split('?').next().unwrap_or_default();
        let (status, body) = match (request.method(), path) {
            (tiny_http::Method::Get, "/list") => list(system),
            (_, "/list") => (405, "only GET /list\n".to_owned()),
            _ => (404, "not found; try GET /list\n".to_owned()),
        };
        let response = tiny_http::Response::from_string(body).with_status_code(status);
        let _ = request.respond(response); // the client may have gone
    }
}

/// Runs one lookup on `system`; the status and the body of its answer.
fn list(system: &ActorSystem) -> (u16, String) {
    let (tx, rx) = mpsc::channel();
    if let Err(e) = system.register(Lookup::new(KEY, all_replicas(), tx)) {
        return (503, format!("no lookup: {e}\n"));
    }
    match rx.recv_timeout(HTTP_WAIT) {
        Ok(Ok(listing)) => {
            let lines: String = listing
                .iter()
                .map(|(e, publisher)| format!("node {} {} {publisher}\n", e.node, e.http))
                .collect();
            (200, lines)
        }
        Ok(Err(why)) => (503, format!("{why}\n")),
        Err(_) => (504, "the lookup did not answer\n".to_owned()),
    }
}

/// A plain HTTP/1.0 GET (the server closes the connection after the answer).
fn http_get(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .map_err(|e| format!("connect {addr}: {e}"))?;
    stream
        .set_read_timeout(Some(HTTP_WAIT + Duration::from_secs(2)))
        .map_err(|e| e.to_string())?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")
        .map_err(|e| format!("send to {addr}: {e}"))?;
    let mut raw = String::new();
    stream
        .read_to_string(&mut raw)
        .map_err(|e| format!("read from {addr}: {e}"))?;
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no HTTP answer from {addr}"))?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line from {addr}: {head:?}"))?;
    Ok((status, body.to_owned()))
}

/// Polls the nodes' `/list` in turn until one lists every node; how many polls it took.
fn wait_until_discoverable(http: &[SocketAddr]) -> Result<u32, String> {
    let deadline = Instant::now() + READY_DEADLINE;
    let mut polls = 0;
    loop {
        let addr = http[polls as usize % http.len()];
        polls += 1;
        let last = match http_get(addr, "/list") {
            Ok((200, body)) if body.lines().count() == NODES as usize => return Ok(polls),
            Ok((status, body)) => format!("{status}: {}", body.trim_end()),
            Err(e) => e,
        };
        if Instant::now() >= deadline {
            return Err(format!(
                "not all {NODES} endpoints discoverable after {READY_DEADLINE:?} ({polls} polls; last: {last})"
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What is bound before the environment starts.
struct Ports {
    names: NameService,
    /// The interconnect listeners when the OS picked the ports (else each node binds its
    /// name service address itself).
    listeners: Vec<Option<TcpListener>>,
    http: Vec<tiny_http::Server>,
    http_addrs: Vec<SocketAddr>,
}

impl Ports {
    fn bind(base_port: u16, http_base_port: u16) -> Result<Ports, String> {
        let mut names = NameService::new();
        let mut listeners = Vec::new();
        let (mut http, mut http_addrs) = (Vec::new(), Vec::new());
        for node in 1..=NODES {
            let offset = node as u16 - 1;
            let port = if base_port == 0 {
                let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
                let port = l.local_addr().map_err(|e| e.to_string())?.port();
                listeners.push(Some(l));
                port
            } else {
                listeners.push(None);
                base_port + offset
            };
            names = names.node(node, NodeAddress::new("127.0.0.1", port));
            let want = if http_base_port == 0 {
                0
            } else {
                http_base_port + offset
            };
            let l = TcpListener::bind(("127.0.0.1", want))
                .map_err(|e| format!("bind HTTP 127.0.0.1:{want}: {e}"))?;
            http_addrs.push(l.local_addr().map_err(|e| e.to_string())?);
            http.push(tiny_http::Server::from_listener(l, None).map_err(|e| e.to_string())?);
        }
        Ok(Ports {
            names,
            listeners,
            http,
            http_addrs,
        })
    }
}

/// A node's HTTP server and the thread serving it.
struct HttpThread {
    server: Arc<tiny_http::Server>,
    thread: JoinHandle<()>,
}

impl HttpThread {
    /// Ends the serving loop (after the requests already received) and joins the thread.
    fn stop(self) {
        self.server.unblock();
        let _ = self.thread.join();
    }
}

/// Starts the five nodes (their interconnects go to `interconnects`) and their HTTP
/// threads on `env`.
fn start(
    env: &Environment,
    ports: Ports,
    interconnects: &mut Vec<Interconnect>,
) -> Result<(Vec<HttpThread>, Vec<ActorSystem>), String> {
    let mut systems = Vec::new();
    for (node, listener) in (1..=NODES).zip(ports.listeners) {
        let setup = SystemSetup::new(node).local_service(
            replica_id(node),
            PoolConfig::USER,
            Replica::default(),
        );
        let system = ActorSystem::start(env, setup).map_err(|e| format!("node {node}: {e}"))?;
        let mut ic = InterconnectSetup::new(ports.names.clone())
            .event::<ReplicaPublish>()
            .event::<ReplicaPublishAck>()
            .event::<ReplicaLookup>()
            .event::<ReplicaInfo>();
        if let Some(l) = listener {
            ic = ic.listener(l);
        }
        interconnects
            .push(Interconnect::start(&system, ic).map_err(|e| format!("node {node}: {e}"))?);
        systems.push(system);
    }
    // The publishers once every node listens: their first publishes then find every peer.
    for (system, addr) in systems.iter().zip(&ports.http_addrs) {
        let endpoint = Endpoint {
            node: system.node_id(),
            http: addr.to_string(),
        };
        system
            .register(Publisher::new(endpoint, all_replicas()))
            .map_err(|e| format!("node {}: publisher: {e}", system.node_id()))?;
    }
    let mut servers = Vec::new();
    let handles = systems.clone();
    for (system, server) in systems.into_iter().zip(ports.http) {
        let server = Arc::new(server);
        let serving = server.clone();
        let thread = std::thread::Builder::new()
            .name(format!("http{}", system.node_id()))
            .spawn(move || serve_http(&serving, &system))
            .map_err(|e| format!("HTTP thread: {e}"))?;
        servers.push(HttpThread { server, thread });
    }
    Ok((servers, handles))
}

/// Serves the introspection page of `env` on `addr` with every node attached; the monitor
/// goes to `keep` (it serves until the environment stops).
#[cfg(feature = "monitor")]
fn serve_page(
    env: &Environment,
    addr: &str,
    systems: &[ActorSystem],
    interconnects: &[Interconnect],
    keep: &mut Option<Box<dyn std::any::Any>>,
) -> Result<(), String> {
    let monitor =
        agentbox::monitor::Monitor::start(env, addr).map_err(|e| format!("monitor: {e}"))?;
    for s in systems {
        monitor.add_system(s).map_err(|e| format!("monitor: {e}"))?;
    }
    for ic in interconnects {
        monitor.add_node(ic);
    }
    println!("monitor: {}", monitor.url());
    *keep = Some(Box::new(monitor));
    Ok(())
}

#[cfg(not(feature = "monitor"))]
fn serve_page(
    _: &Environment,
    _: &str,
    _: &[ActorSystem],
    _: &[Interconnect],
    _: &mut Option<Box<dyn std::any::Any>>,
) -> Result<(), String> {
    println!("(build with `--features monitor` for the introspection page)");
    Ok(())
}

/// Everything between the start and the stop, on the environment's init thread.
fn run(
    env: &Environment,
    ports: Ports,
    interconnects: &mut Vec<Interconnect>,
    serve: Option<&str>,
    page: &mut Option<Box<dyn std::any::Any>>,
) -> Result<(), String> {
    let http = ports.http_addrs.clone();
    let (servers, systems) = start(env, ports, interconnects)?;
    let shown = show(&http);
    if let (Ok(()), Some(addr)) = (&shown, serve) {
        serve_page(env, addr, &systems, interconnects, page)?;
        println!("serving until killed (try: curl http://{}/list)", http[0]);
        return Ok(());
    }
    for s in servers {
        s.stop();
    }
    shown
}

/// Waits until every endpoint is discoverable, then fetches `/list` once and prints it.
fn show(http: &[SocketAddr]) -> Result<(), String> {
    let started = Instant::now();
    let polls = wait_until_discoverable(http)?;
    println!(
        "all {NODES} endpoints discoverable after {} ms ({polls} polls of /list)",
        started.elapsed().as_millis()
    );
    // Asked of the last node: any node answers with the same list.
    let addr = http[http.len() - 1];
    let (status, body) = http_get(addr, "/list")?;
    println!("GET http://{addr}/list -> {status}\n{body}");
    Ok(())
}

/// The value of `--name` as a port, or `default`.
fn port_arg(args: &[String], name: &str, default: u16) -> Result<u16, String> {
    let Some(i) = args.iter().position(|a| a == name) else {
        return Ok(default);
    };
    let port: u16 = args
        .get(i + 1)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("{name} wants a port number (0 = the OS picks)"))?;
    if port > u16::MAX - (NODES as u16 - 1) {
        return Err(format!("{name} {port}: the last node's port would not fit"));
    }
    Ok(port)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    // `--serve [ADDR]`: keep running; ADDR is where the introspection page is served.
    let serve: Option<String> = args.iter().position(|a| a == "--serve").map(|i| {
        args.get(i + 1)
            .filter(|a| !a.starts_with("--"))
            .cloned()
            .unwrap_or_else(|| "127.0.0.1:8880".to_owned())
    });
    let ports = port_arg(&args, "--base-port", 13301)
        .and_then(|ic| Ok((ic, port_arg(&args, "--http-base-port", 8881)?)))
        .and_then(|(ic, http)| Ports::bind(ic, http));
    let ports = match ports {
        Ok(p) => p,
        Err(e) => {
            eprintln!("discovery: {e}");
            return ExitCode::from(2);
        }
    };
    for (node, http) in (1..=NODES).zip(&ports.http_addrs) {
        let ic = ports.names.get(node).map_or(0, |a| a.port);
        println!("node {node}: interconnect 127.0.0.1:{ic}, http http://{http}/list");
    }

    let mut outcome = Ok(());
    // Held until the environment has stopped: an interconnect's stop guard needs its node
    // alive to remove itself, and with no handle left the node may be gone before it does
    // (the environment would then wait for ever).
    let mut interconnects = Vec::new();
    let mut page = None;
    let launched = Environment::launch(|env| {
        outcome = run(env, ports, &mut interconnects, serve.as_deref(), &mut page);
        if outcome.is_err() || serve.is_none() {
            env.stop(); // the interconnects stop with the environment
        }
    });
    if let Err(e) = launched.map_err(|e| e.to_string()).and(outcome) {
        eprintln!("discovery: {e}");
        return ExitCode::FAILURE;
    }
    drop(page);
    drop(interconnects);
    println!("done");
    ExitCode::SUCCESS
}
