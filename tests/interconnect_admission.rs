//! A stranger's idle connections do not keep the cluster's nodes out: while a stranger
//! holds ten times the node's handshake slots in idle connections (reopening each one the
//! node closes), a member connects and exchanges events. The stranger connects from
//! 127.0.0.2, an address the name service does not list (every node is on 127.0.0.1).

#![cfg(feature = "interconnect")]

mod interconnect_support;

use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use agentbox::actors::*;
use agentbox::interconnect::InterconnectSetup;
use agentbox::{ActorId, WrappedEnv};
use interconnect_support::*;
use socket2::{Domain, Socket, Type};

/// Ten times the node's 64 handshake slots.
const IDLE_CONNECTIONS: usize = 640;

/// A stranger that keeps `IDLE_CONNECTIONS` connections to a node open and silent.
struct Stranger {
    stop: Arc<AtomicBool>,
    opened: Arc<AtomicUsize>,
    thread: Option<JoinHandle<()>>,
}

/// A connection from `source` (any port) to `target`, non-blocking once connected.
fn open_from(source: [u8; 4], target: SocketAddr) -> std::io::Result<TcpStream> {
    let s = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    s.bind(&SocketAddr::from((source, 0)).into())?;
    s.connect_timeout(&target.into(), Duration::from_millis(200))?;
    let s: TcpStream = s.into();
    s.set_nonblocking(true)?;
    Ok(s)
}

/// Whether the other side closed `s` (it never sends anything to a silent stranger).
fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 64];
    match s.read(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != ErrorKind::WouldBlock,
    }
}

impl Stranger {
    fn hold(target: SocketAddr) -> Stranger {
        let stop = Arc::new(AtomicBool::new(false));
        let opened = Arc::new(AtomicUsize::new(0));
        let (s, o) = (stop.clone(), opened.clone());
        let thread = std::thread::spawn(move || {
            let mut held: Vec<Option<TcpStream>> = (0..IDLE_CONNECTIONS).map(|_| None).collect();
            while !s.load(Ordering::SeqCst) {
                for slot in &mut held {
                    if slot.as_mut().is_none_or(closed) {
                        *slot = open_from([127, 0, 0, 2], target).ok();
                        if slot.is_some() {
                            o.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    if s.load(Ordering::SeqCst) {
                        return;
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        Stranger {
            stop,
            opened,
            thread: Some(thread),
        }
    }
}

impl Drop for Stranger {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn a_member_gets_in_while_a_stranger_holds_ten_times_the_handshake_slots() {
    let w = WrappedEnv::new(|_| {}).unwrap();
    let (l1, p1) = bind();
    let (l2, p2) = bind();
    let names = names(&[(1, p1), (2, p2)]);
    let host = start_node(
        w.environment(),
        1,
        remote_events(InterconnectSetup::new(names.clone()).listener(l1)),
    );
    let member = start_node(
        w.environment(),
        2,
        remote_events(InterconnectSetup::new(names).listener(l2)),
    );
    let echo_id = ActorId::service(1, b"echo").unwrap();
    let actor = host.system.register(echo(None)).unwrap();
    host.system.register_local_service(echo_id, actor).unwrap();

    let stranger = Stranger::hold(SocketAddr::from(([127, 0, 0, 1], p1)));
    wait_until("the stranger holds its connections", || {
        stranger.opened.load(Ordering::SeqCst) >= IDLE_CONNECTIONS
    });

    // The member's events get through (before the fix its session ended with
    // LostConnection: the events came back Undelivered).
    let (tx, rx) = channel();
    let me = member.system.register(recorder(tx)).unwrap();
    for n in 0..10 {
        member
            .system
            .send_with(echo_id, me, Ping(n), EventFlags::TRACK_DELIVERY, n);
        let got = next(&rx, "the Pong");
        assert_eq!(got.what, What::Pong(n), "{got:?}");
    }
    assert!(
        stranger.opened.load(Ordering::SeqCst) >= IDLE_CONNECTIONS,
        "the stranger kept its connections"
    );
    drop(stranger);
    w.stop_then_join().unwrap();
}
