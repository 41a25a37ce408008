//! Helpers shared by the `interconnect_*` integration tests: remote event types, nodes on
//! loopback (listeners bound on port 0 first, the name service built from their ports), an
//! actor made of closures, a recorder of what actors receive, and a TCP proxy that cuts its
//! connections, and one that records them.
#![allow(dead_code)]

pub mod fake_peer;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentbox::actors::*;
use agentbox::interconnect::{
    Interconnect, InterconnectSetup, NameService, NodeAddress, NodeConnected, NodeDisconnected,
    RemoteEvent, Serde,
};
use agentbox::{ActorId, Environment};
use serde::{Deserialize, Serialize};

/// Generous bound for anything that should happen "soon" (the machine is shared and may be
/// loaded): tests wait for outcomes, never for durations.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// The bound on an outcome that follows at once from its cause, or from a timer the test
/// set short (an `Undelivered`, a `NodeDisconnected`, a refusal): generous on a loaded
/// machine, yet a broken build fails in seconds rather than at the harness's timeout.
pub const SOON: Duration = Duration::from_secs(15);

const SPACE: u32 = event_space_begin(ES_USERSPACE + 11);

/// A numbered request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ping(pub u64);
impl Event for Ping {
    const EVENT_TYPE: u32 = SPACE + 1;
}
impl RemoteEvent for Ping {
    type Codec = Serde;
}

/// The answer to a [`Ping`], with its number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pong(pub u64);
impl Event for Pong {
    const EVENT_TYPE: u32 = SPACE + 2;
}
impl RemoteEvent for Pong {
    type Codec = Serde;
}

/// The `n`-th event of a stream on `channel`, with a body whose bytes depend on both.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seq {
    pub channel: u16,
    pub n: u64,
    pub body: Vec<u8>,
}
impl Event for Seq {
    const EVENT_TYPE: u32 = SPACE + 3;
}
impl RemoteEvent for Seq {
    type Codec = Serde;
}

impl Seq {
    /// The `n`-th event of `channel` with a body of `len` bytes.
    pub fn new(channel: u16, n: u64, len: usize) -> Seq {
        let body = (0..len).map(|k| Seq::byte(channel, n, k)).collect();
        Seq { channel, n, body }
    }

    fn byte(channel: u16, n: u64, k: usize) -> u8 {
        (k as u64)
            .wrapping_mul(31)
            .wrapping_add(n.wrapping_mul(7))
            .wrapping_add(u64::from(channel)) as u8
    }

    /// Whether the body is the one [`Seq::new`] made.
    pub fn body_ok(&self) -> bool {
        self.body
            .iter()
            .enumerate()
            .all(|(k, b)| *b == Seq::byte(self.channel, self.n, k))
    }
}

/// A greeting from one node to another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Hello {
    pub from: u32,
    pub to: u32,
    pub n: u32,
}
impl Event for Hello {
    const EVENT_TYPE: u32 = SPACE + 4;
}
impl RemoteEvent for Hello {
    type Codec = Serde;
}

/// An event type that is never registered with the interconnect (no codec).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoCodec(pub u64);
impl Event for NoCodec {
    const EVENT_TYPE: u32 = SPACE + 5;
}

/// `setup` with the remote event types of these tests.
pub fn remote_events(setup: InterconnectSetup) -> InterconnectSetup {
    setup
        .event::<Ping>()
        .event::<Pong>()
        .event::<Seq>()
        .event::<Hello>()
}

/// A listener on 127.0.0.1, on a port the OS picks.
pub fn bind() -> (TcpListener, u16) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    (l, port)
}

/// A name service of loopback nodes: (node id, port).
pub fn names(entries: &[(u32, u16)]) -> NameService {
    entries.iter().fold(NameService::new(), |n, &(id, port)| {
        n.node(id, NodeAddress::new("127.0.0.1", port))
    })
}

/// One node: its actor system and its interconnect.
#[derive(Clone)]
pub struct Node {
    pub system: ActorSystem,
    pub ic: Interconnect,
}

/// Starts node `id` on `env` with `setup` (which names its listener).
pub fn start_node(env: &Environment, id: u32, setup: InterconnectSetup) -> Node {
    let system = ActorSystem::start(env, SystemSetup::new(id)).unwrap();
    let ic = Interconnect::start(&system, setup).unwrap();
    Node { system, ic }
}

/// Nodes `ids` on `env`, each with a listener of its own and a name service of all of
/// them; `tune` adjusts each node's setup (which already has the listener and
/// [`remote_events`]).
pub fn cluster(
    env: &Environment,
    ids: &[u32],
    tune: impl Fn(u32, InterconnectSetup) -> InterconnectSetup,
) -> Vec<Node> {
    let listeners: Vec<(TcpListener, u16)> = ids.iter().map(|_| bind()).collect();
    let entries: Vec<(u32, u16)> = ids
        .iter()
        .zip(&listeners)
        .map(|(&id, (_, port))| (id, *port))
        .collect();
    let names = names(&entries);
    ids.iter()
        .zip(listeners)
        .map(|(&id, (l, _))| {
            let setup = remote_events(InterconnectSetup::new(names.clone()).listener(l));
            start_node(env, id, tune(id, setup))
        })
        .collect()
}

pub type OnEvent = Box<dyn FnMut(&mut ActorContext<Scripted>, EventHandle) -> Handled + Send>;
pub type Boot = Box<dyn FnOnce(&mut ActorContext<Scripted>) + Send>;

/// An actor made of closures: `boot` at bootstrap, `on_event` for every event.
pub struct Scripted {
    boot: Option<Boot>,
    on_event: OnEvent,
}

impl Scripted {
    pub fn new(
        on_event: impl FnMut(&mut ActorContext<Scripted>, EventHandle) -> Handled + Send + 'static,
    ) -> Scripted {
        Scripted {
            boot: None,
            on_event: Box::new(on_event),
        }
    }

    pub fn boot(mut self, f: impl FnOnce(&mut ActorContext<Scripted>) + Send + 'static) -> Self {
        self.boot = Some(Box::new(f));
        self
    }

    fn state(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
        (self.on_event)(ctx, ev)
    }
}

impl Actor for Scripted {
    fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _parent: ActorId) {
        ctx.become_state(Self::state);
        if let Some(b) = self.boot.take() {
            b(ctx);
        }
    }
}

/// What an event was, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum What {
    Ping(u64),
    Pong(u64),
    /// Channel and number from the event, body length, whether the body is intact.
    Seq {
        channel: u16,
        n: u64,
        len: usize,
        body_ok: bool,
    },
    Hello(Hello),
    NoCodec(u64),
    Undelivered(Undelivered),
    Connected(u32),
    Disconnected(u32),
    /// Any other event type.
    Other(u32),
}

/// What an actor saw of one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Got {
    /// The actor that got it.
    pub by: ActorId,
    pub what: What,
    pub sender: ActorId,
    pub recipient: ActorId,
    pub rewrite: ActorId,
    pub cookie: u64,
    pub flags: EventFlags,
}

impl Got {
    pub fn of(by: ActorId, ev: &EventHandle) -> Got {
        let what = if let Some(p) = ev.get::<Ping>() {
            What::Ping(p.0)
        } else if let Some(p) = ev.get::<Pong>() {
            What::Pong(p.0)
        } else if let Some(s) = ev.get::<Seq>() {
            What::Seq {
                channel: s.channel,
                n: s.n,
                len: s.body.len(),
                body_ok: s.body_ok(),
            }
        } else if let Some(h) = ev.get::<Hello>() {
            What::Hello(*h)
        } else if let Some(n) = ev.get::<NoCodec>() {
            What::NoCodec(n.0)
        } else if let Some(u) = ev.get::<Undelivered>() {
            What::Undelivered(*u)
        } else if let Some(c) = ev.get::<NodeConnected>() {
            What::Connected(c.node_id)
        } else if let Some(d) = ev.get::<NodeDisconnected>() {
            What::Disconnected(d.node_id)
        } else {
            What::Other(ev.event_type())
        };
        Got {
            by,
            what,
            sender: ev.sender(),
            recipient: ev.recipient(),
            rewrite: ev.recipient_rewrite(),
            cookie: ev.cookie(),
            flags: ev.flags(),
        }
    }
}

/// An actor that reports every event it gets (Poison is left unhandled: it passes away).
pub fn recorder(tx: Sender<Got>) -> Scripted {
    Scripted::new(move |ctx, ev| {
        let _ = tx.send(Got::of(ctx.self_id(), &ev));
        if ev.event_type() == EV_POISON {
            return ev.unhandled();
        }
        Handled::Yes
    })
}

/// An actor that answers `Ping(n)` with `Pong(n)` to the sender, with the same cookie and
/// channel, and reports every event it gets to `tx` if given.
pub fn echo(tx: Option<Sender<Got>>) -> Scripted {
    Scripted::new(move |ctx, ev| {
        if let Some(tx) = &tx {
            let _ = tx.send(Got::of(ctx.self_id(), &ev));
        }
        match ev.get::<Ping>() {
            Some(&Ping(n)) => {
                let flags = EventFlags::empty().with_channel(ev.flags().channel());
                ctx.send_with(ev.sender(), Pong(n), flags, ev.cookie());
                Handled::Yes
            }
            None if ev.event_type() == EV_POISON => ev.unhandled(),
            None => Handled::Yes,
        }
    })
}

/// Receives the next item, failing after [`PATIENCE`].
pub fn next<T>(rx: &Receiver<T>, what: &str) -> T {
    rx.recv_timeout(PATIENCE)
        .unwrap_or_else(|e| panic!("{what} did not come: {e}"))
}

/// Receives the next item, failing after `bound` (the timers of the test plus [`SOON`]).
pub fn next_within<T>(rx: &Receiver<T>, bound: Duration, what: &str) -> T {
    rx.recv_timeout(bound)
        .unwrap_or_else(|e| panic!("{what} did not come within {bound:?}: {e}"))
}

/// Receives `n` items, failing after [`PATIENCE`] in all.
pub fn take<T>(rx: &Receiver<T>, n: usize) -> Vec<T> {
    take_within(rx, n, PATIENCE)
}

/// Receives `n` items, failing after `bound` in all.
pub fn take_within<T>(rx: &Receiver<T>, n: usize, bound: Duration) -> Vec<T> {
    let deadline = Instant::now() + bound;
    (0..n)
        .map(|i| {
            let left = deadline.saturating_duration_since(Instant::now());
            rx.recv_timeout(left)
                .unwrap_or_else(|e| panic!("item {i} of {n} did not come: {e}"))
        })
        .collect()
}

/// Polls `cond` until it holds (at most [`PATIENCE`]).
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A TCP proxy on 127.0.0.1 that pipes every connection to `target` both ways and cuts
/// each one once it has lived a random 200–400 ms. A cut is a network failure: both nodes
/// get a reset (SO_LINGER 0), never an end of stream, which a node takes for its peer
/// closing the session.
pub struct CuttingProxy {
    addr: SocketAddr,
    shared: Arc<ProxyShared>,
}

struct Live {
    down: TcpStream,
    up: TcpStream,
    cut_at: Instant,
    ended: Arc<AtomicBool>,
    /// Set when the proxy cuts: the pipes then close without a FIN.
    cut: Arc<AtomicBool>,
}

struct ProxyShared {
    stop: AtomicBool,
    cuts: AtomicUsize,
    accepted: AtomicUsize,
    /// The live connections: both sockets, when to cut them, whether they ended by
    /// themselves.
    live: Mutex<Vec<Live>>,
}

impl CuttingProxy {
    pub fn start(target: SocketAddr) -> CuttingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(ProxyShared {
            stop: AtomicBool::new(false),
            cuts: AtomicUsize::new(0),
            accepted: AtomicUsize::new(0),
            live: Mutex::new(Vec::new()),
        });
        let s = shared.clone();
        std::thread::Builder::new()
            .name("cutting-proxy".into())
            .spawn(move || accept_loop(&s, &listener, target))
            .unwrap();
        let s = shared.clone();
        std::thread::Builder::new()
            .name("cutting-proxy-cut".into())
            .spawn(move || cut_loop(&s))
            .unwrap();
        CuttingProxy { addr, shared }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// How many connections the proxy has cut.
    pub fn cuts(&self) -> usize {
        self.shared.cuts.load(Ordering::SeqCst)
    }

    /// How many connections the proxy has accepted.
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for CuttingProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        for l in self.shared.live.lock().unwrap().drain(..) {
            let _ = l.down.shutdown(Shutdown::Both);
            let _ = l.up.shutdown(Shutdown::Both);
        }
        // Wake the acceptor so that it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }
}

/// A pseudo-random lifetime of 200–400 ms (no randomness crate needed).
fn lifetime(seed: usize) -> Duration {
    let x = (seed as u64 ^ 0x9E37_79B9_7F4A_7C15).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    Duration::from_millis(200 + (x >> 33) % 201)
}

fn accept_loop(s: &Arc<ProxyShared>, listener: &TcpListener, target: SocketAddr) {
    for conn in listener.incoming() {
        if s.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(down) = conn else { continue };
        let Ok(up) = TcpStream::connect(target) else {
            continue; // dropping `down` closes it: the node sees a failed connection
        };
        let _ = down.set_nodelay(true);
        let _ = up.set_nodelay(true);
        // Closing the last descriptor of a socket with a zero linger sends a reset.
        let _ = socket2::SockRef::from(&down).set_linger(Some(Duration::ZERO));
        let _ = socket2::SockRef::from(&up).set_linger(Some(Duration::ZERO));
        let k = s.accepted.fetch_add(1, Ordering::SeqCst);
        let (Ok(d2), Ok(u2), Ok(d3), Ok(u3)) = (
            down.try_clone(),
            up.try_clone(),
            down.try_clone(),
            up.try_clone(),
        ) else {
            continue;
        };
        let ended = Arc::new(AtomicBool::new(false));
        let cut = Arc::new(AtomicBool::new(false));
        s.live.lock().unwrap().push(Live {
            down: d3,
            up: u3,
            cut_at: Instant::now() + lifetime(k),
            ended: ended.clone(),
            cut: cut.clone(),
        });
        let (e, c) = (ended.clone(), cut.clone());
        std::thread::spawn(move || pipe(down, up, &e, &c));
        std::thread::spawn(move || pipe(u2, d2, &ended, &cut));
    }
}

/// Copies `from` to `to` until either side ends, then shuts both down; after a cut, only
/// drops its descriptors (the last one closed sends the reset).
fn pipe(mut from: TcpStream, mut to: TcpStream, ended: &AtomicBool, cut: &AtomicBool) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    if cut.load(Ordering::SeqCst) {
        return;
    }
    ended.store(true, Ordering::SeqCst);
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

fn cut_loop(s: &Arc<ProxyShared>) {
    while !s.stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(10));
        let now = Instant::now();
        let mut live = s.live.lock().unwrap();
        live.retain(|l| {
            if l.ended.load(Ordering::SeqCst) {
                return false; // ended by itself: not a cut
            }
            if now < l.cut_at {
                return true;
            }
            // Wake the pipes without sending anything (a read shutdown sends no FIN); they
            // and this entry then drop every descriptor, and the last close resets.
            l.cut.store(true, Ordering::SeqCst);
            let _ = l.down.shutdown(Shutdown::Read);
            let _ = l.up.shutdown(Shutdown::Read);
            s.cuts.fetch_add(1, Ordering::SeqCst);
            false
        });
    }
}

/// Both directions of every connection a [`RecordingProxy`] piped: (client → server,
/// server → client).
pub type Recordings = Arc<Mutex<Vec<(Arc<Mutex<Vec<u8>>>, Arc<Mutex<Vec<u8>>>)>>>;

/// A TCP proxy on 127.0.0.1 that pipes connections to `target` and records their bytes.
pub struct RecordingProxy {
    pub port: u16,
    recordings: Recordings,
}

impl RecordingProxy {
    pub fn start(target: SocketAddr) -> RecordingProxy {
        let (listener, port) = bind();
        let recordings: Recordings = Arc::default();
        let r = recordings.clone();
        std::thread::spawn(move || record_loop(&listener, target, &r));
        RecordingProxy { port, recordings }
    }

    /// The bytes of connection `k` so far, (client → server, server → client).
    pub fn recorded(&self, k: usize) -> (Vec<u8>, Vec<u8>) {
        let all = self.recordings.lock().unwrap();
        let (up, down) = &all[k];
        let up = up.lock().unwrap().clone();
        let down = down.lock().unwrap().clone();
        (up, down)
    }
}

fn record_loop(listener: &TcpListener, target: SocketAddr, recordings: &Recordings) {
    for conn in listener.incoming() {
        let Ok(down) = conn else { return };
        let Ok(up) = TcpStream::connect(target) else {
            continue;
        };
        let (Ok(d2), Ok(u2)) = (down.try_clone(), up.try_clone()) else {
            continue;
        };
        let (to_server, to_client) = (Arc::default(), Arc::default());
        recordings
            .lock()
            .unwrap()
            .push((Arc::clone(&to_server), Arc::clone(&to_client)));
        std::thread::spawn(move || pipe_recording(down, up, &to_server));
        std::thread::spawn(move || pipe_recording(u2, d2, &to_client));
    }
}

/// Copies `from` to `to`, recording, until either side ends.
fn pipe_recording(mut from: TcpStream, mut to: TcpStream, record: &Mutex<Vec<u8>>) {
    let mut buf = vec![0u8; 64 << 10];
    while let Ok(n @ 1..) = from.read(&mut buf) {
        record.lock().unwrap().extend_from_slice(&buf[..n]);
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

/// Two nodes (set up by `tune`) send their first events to each other at the same moment,
/// `rounds` times: both connect at once, and every event arrives with no session ended.
/// Returns the failed rounds.
pub fn simultaneous_connects_lose_nothing(
    rounds: usize,
    tune: impl Fn(u32, InterconnectSetup) -> InterconnectSetup,
) -> Vec<String> {
    const EACH: u64 = 5;
    let mut failed = Vec::new();
    for round in 0..rounds {
        let w = agentbox::WrappedEnv::new(|_| {}).unwrap();
        let nodes = cluster(w.environment(), &[1, 2], &tune);
        let (tx, rx) = std::sync::mpsc::channel();
        let a = nodes[0].system.register(recorder(tx.clone())).unwrap();
        let b = nodes[1].system.register(recorder(tx)).unwrap();
        let start = Arc::new(std::sync::Barrier::new(2));
        let senders: Vec<_> = [(nodes[0].system.clone(), b), (nodes[1].system.clone(), a)]
            .into_iter()
            .map(|(system, to)| {
                let start = start.clone();
                std::thread::spawn(move || {
                    start.wait();
                    for i in 0..EACH {
                        system.send(to, Ping(i));
                    }
                })
            })
            .collect();
        for s in senders {
            s.join().unwrap();
        }
        let mut got = 0;
        let ended = |n: &Node, peer| n.ic.session_stats(peer).unwrap().sessions_ended > 0;
        wait_until("all events, or a session's end", || {
            while rx.try_recv().is_ok() {
                got += 1;
            }
            got == 2 * EACH || ended(&nodes[0], 2) || ended(&nodes[1], 1)
        });
        if got != 2 * EACH || ended(&nodes[0], 2) || ended(&nodes[1], 1) {
            failed.push(format!(
                "round {round}: {got} of {} events arrived (so far)\n  1->2 {:?}\n  2->1 {:?}",
                2 * EACH,
                nodes[0].ic.session_stats(2),
                nodes[1].ic.session_stats(1)
            ));
        }
        w.stop_then_join().unwrap();
    }
    failed
}
