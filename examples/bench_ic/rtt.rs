//! `ic_ping_pong_rtt`: the round trip of a ping-pong between two agents of the core on two
//! nodes over loopback, each sending through a `RemoteMbox` to the other's endpoint
//! (`agentbox::bridge`): what an agent pays to talk to an agent on another node.
//! `raw_tcp_ping_pong_rtt`: the floor, two threads bouncing a packet of the same size over
//! a loopback socket pair with blocking reads (two hops, no actor system).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentbox::actors::*;
use agentbox::bridge::{Endpoint, RemoteMbox};
use agentbox::interconnect::{
    Interconnect, InterconnectSetup, NameService, NodeAddress, RemoteEvent, Serde,
};
use agentbox::prelude::*;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

const SPACE: u32 = event_space_begin(ES_USERSPACE + 8);

#[derive(Serialize, Deserialize)]
struct Ball(u64);
impl Event for Ball {
    const EVENT_TYPE: u32 = SPACE + 1;
}
impl RemoteEvent for Ball {
    type Codec = Serde;
}

type Peer = Arc<Mutex<Option<Mbox>>>;

/// Sends the ball back through its remote mbox; the first player counts the rounds and
/// stops the environment after the last.
struct Player {
    other: Peer,
    rounds: u64,
    started: Instant,
    elapsed: Option<Arc<Mutex<Option<Duration>>>>,
}

impl Agent for Player {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self().event(|a: &mut Self, ctx, b: &Ball| {
            if let Some(elapsed) = &a.elapsed {
                if b.0 == 0 {
                    a.started = Instant::now();
                }
                if b.0 == a.rounds {
                    *elapsed.lock() = Some(a.started.elapsed());
                    ctx.environment().stop();
                    return;
                }
            }
            let other = a.other.lock().clone().expect("the other player");
            let n = if a.elapsed.is_some() { b.0 + 1 } else { b.0 };
            send(&other, Ball(n)).expect("a ball");
        })?;
        Ok(())
    }
}

/// `rounds` round trips (after one to set the session up); the mean round trip.
pub fn ping_pong_rtt(rounds: u64) -> Duration {
    let elapsed = Arc::new(Mutex::new(None));
    let e = elapsed.clone();
    Environment::launch(move |env| {
        let l1 = TcpListener::bind("127.0.0.1:0").expect("bind");
        let l2 = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = |l: &TcpListener| l.local_addr().expect("addr").port();
        let names = NameService::new()
            .node(1, NodeAddress::new("127.0.0.1", port(&l1)))
            .node(2, NodeAddress::new("127.0.0.1", port(&l2)));
        let mut systems = Vec::new();
        for (id, l) in [(1, l1), (2, l2)] {
            let sys = ActorSystem::start(env, SystemSetup::new(id)).expect("system");
            let setup = InterconnectSetup::new(names.clone())
                .listener(l)
                .event::<Ball>();
            Interconnect::start(&sys, setup).expect("interconnect");
            systems.push(sys);
        }
        let (p1, p2): (Peer, Peer) = Default::default();
        let (o1, o2) = (p1.clone(), p2.clone());
        let first = env
            .introduce_coop(|coop| {
                coop.add_agent(Player {
                    other: o1,
                    rounds,
                    started: Instant::now(),
                    elapsed: Some(e),
                })
            })
            .expect("player 1");
        let second = env
            .introduce_coop(|coop| {
                coop.add_agent(Player {
                    other: o2,
                    rounds,
                    started: Instant::now(),
                    elapsed: None,
                })
            })
            .expect("player 2");
        let id1 = Endpoint::new(&first)
            .event::<Ball>()
            .expose(&systems[0])
            .expect("endpoint 1")
            .detach();
        let id2 = Endpoint::new(&second)
            .event::<Ball>()
            .expose(&systems[1])
            .expect("endpoint 2")
            .detach();
        let remote = |sys: &ActorSystem, to| {
            RemoteMbox::new(sys, to)
                .event::<Ball>()
                .build()
                .expect("remote mbox")
        };
        *p1.lock() = Some(remote(&systems[0], id2));
        *p2.lock() = Some(remote(&systems[1], id1));
        // Player 2 starts: its first ball (0) reaches player 1, which starts the clock.
        send(&remote(&systems[1], id1), Ball(0)).expect("the first ball");
    })
    .expect("environment");
    let t = elapsed.lock().take().expect("the rounds finished");
    t / rounds as u32
}

/// The bytes of one ball's packet on the wire (header, body part, descriptor part).
const BALL_PACKET: usize = 112;

/// `rounds` round trips of a `BALL_PACKET`-byte message between two threads over a
/// loopback socket pair (`TCP_NODELAY`, blocking reads); the mean round trip.
pub fn raw_tcp_ping_pong_rtt(rounds: u64) -> Duration {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let echo = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        let _ = s.set_nodelay(true);
        let mut b = [0u8; BALL_PACKET];
        for _ in 0..=rounds {
            s.read_exact(&mut b).expect("read");
            s.write_all(&b).expect("write");
        }
    });
    let mut c = TcpStream::connect(addr).expect("connect");
    let _ = c.set_nodelay(true);
    let mut b = [7u8; BALL_PACKET];
    // One round to set the connection up, as the interconnect's first ball.
    c.write_all(&b).expect("write");
    c.read_exact(&mut b).expect("read");
    let started = Instant::now();
    for _ in 0..rounds {
        c.write_all(&b).expect("write");
        c.read_exact(&mut b).expect("read");
    }
    let t = started.elapsed();
    echo.join().expect("the echo thread");
    t / rounds as u32
}
