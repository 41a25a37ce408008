//! Shared by the monitor's tests: a plain HTTP GET, and two nodes joined by the
//! interconnect in one environment, with a pinger on node 1 and a ponger on node 2.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use agentbox::actors::*;
use agentbox::interconnect::{
    Interconnect, InterconnectSetup, NameService, NodeAddress, RemoteEvent, Serde,
};
use agentbox::{ActorId, Environment};
use serde::{Deserialize, Serialize};

/// How long a test waits for a condition before it fails (generous: a loaded machine).
pub const PATIENCE: Duration = Duration::from_secs(30);

/// `GET path` over HTTP/1.0: the status code and the body.
pub fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    request(addr, "GET", path)
}

pub fn request(addr: SocketAddr, method: &str, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(PATIENCE))?;
    write!(s, "{method} {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)?;
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

/// `GET path` parsed as JSON.
pub fn get_json(addr: SocketAddr, path: &str) -> serde_json::Value {
    let (status, body) = get(addr, path).expect("the monitor answers");
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).expect("JSON")
}

/// Polls `check` every 50 ms until it holds; panics with `what` after [`PATIENCE`].
pub fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

const SPACE: u32 = event_space_begin(ES_USERSPACE + 61);

#[derive(Serialize, Deserialize)]
pub struct Ping;
impl Event for Ping {
    const EVENT_TYPE: u32 = SPACE + 1;
}
impl RemoteEvent for Ping {
    type Codec = Serde;
}

#[derive(Serialize, Deserialize)]
pub struct Pong;
impl Event for Pong {
    const EVENT_TYPE: u32 = SPACE + 2;
}
impl RemoteEvent for Pong {
    type Codec = Serde;
}

struct Again;
impl Event for Again {
    const EVENT_TYPE: u32 = SPACE + 3;
}

pub struct Ponger;
impl Actor for Ponger {
    fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _: ActorId) {
        ctx.become_state(Self::serving);
    }
}
impl Ponger {
    fn serving(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
        if ev.get::<Ping>().is_none() {
            return ev.unhandled();
        }
        ctx.send(ev.sender(), Pong);
        Handled::Yes
    }
}

/// Pings every 20 ms.
pub struct Pinger(pub ActorId);
impl Actor for Pinger {
    fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _: ActorId) {
        ctx.become_state(Self::playing);
        ctx.send(self.0, Ping);
    }
}
impl Pinger {
    fn playing(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
        if ev.get::<Pong>().is_some() {
            ctx.schedule(Duration::from_millis(20), Again);
        } else if ev.get::<Again>().is_some() {
            ctx.send(self.0, Ping);
        } else {
            return ev.unhandled();
        }
        Handled::Yes
    }
}

/// Nodes 1 and 2 in `env`, joined on loopback, node 1 pinging node 2's `ponger` service.
pub fn two_nodes(env: &Environment) -> (Vec<ActorSystem>, Vec<Interconnect>) {
    let (l1, l2) = (
        TcpListener::bind("127.0.0.1:0").unwrap(),
        TcpListener::bind("127.0.0.1:0").unwrap(),
    );
    let port = |l: &TcpListener| l.local_addr().unwrap().port();
    let names = NameService::new()
        .node(1, NodeAddress::new("127.0.0.1", port(&l1)))
        .node(2, NodeAddress::new("127.0.0.1", port(&l2)));
    let mut systems = Vec::new();
    let mut nodes = Vec::new();
    for (id, listener) in [(1, l1), (2, l2)] {
        let system = ActorSystem::start(env, SystemSetup::new(id)).unwrap();
        let setup = InterconnectSetup::new(names.clone())
            .listener(listener)
            .event::<Ping>()
            .event::<Pong>()
            .ping_period(Duration::from_millis(200));
        nodes.push(Interconnect::start(&system, setup).unwrap());
        systems.push(system);
    }
    let service = ActorId::service(2, b"ponger").unwrap();
    let ponger = systems[1].register(Ponger).unwrap();
    systems[1].register_local_service(service, ponger).unwrap();
    systems[0].register(Pinger(service)).unwrap();
    (systems, nodes)
}
