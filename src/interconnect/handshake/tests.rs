//! Races inside the accepting side that no peer can time from outside (the window between
//! a handshake's claim on its session and its install is one small write), and reads
//! interrupted by a signal. A full socket buffer holds a handshake in that window.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::challenge;
use super::conn::{read_full, Conn};
use super::takeover::{accept_resume, accept_verified};
use crate::actors::{ActorId, ActorSystem, SystemSetup};
use crate::interconnect::error::HandshakeError;
use crate::interconnect::session::{Conn as Link, PeerProgram, Session};
use crate::interconnect::shared::NodeShared;
use crate::interconnect::wire::{ExBlock, HandshakeRequest, InitialPacket};
use crate::interconnect::{Interconnect, InterconnectSetup, NameService, NodeAddress};
use crate::WrappedEnv;

const PATIENCE: Duration = Duration::from_secs(60);

/// A connected pair: (the node's end, the peer's end).
fn pair(l: &TcpListener) -> (TcpStream, TcpStream) {
    let peer = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (ours, _) = l.accept().unwrap();
    (ours, peer)
}

/// Fills the send buffer of `s` (the peer reads nothing): its next write blocks. Returns
/// the bytes written.
fn fill(s: &TcpStream) -> usize {
    s.set_nonblocking(true).unwrap();
    let chunk = vec![0u8; 64 << 10];
    let mut n = 0;
    loop {
        match (&*s).write(&chunk) {
            Ok(k) => n += k,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) => panic!("filling: {e}"),
        }
    }
    s.set_nonblocking(false).unwrap();
    n
}

/// Reads `n` bytes from `s` (the filler, then what the node wrote after it); returns the
/// last `tail` of them.
fn drain(s: &mut TcpStream, n: usize, tail: usize) -> Vec<u8> {
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut all = Vec::with_capacity(n);
    let mut buf = vec![0u8; 64 << 10];
    while all.len() < n {
        let want = (n - all.len()).min(buf.len());
        let k = s.read(&mut buf[..want]).unwrap();
        assert!(k > 0, "closed while draining");
        all.extend_from_slice(&buf[..k]);
    }
    all.split_off(n - tail)
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Node 2 with an established session with node 1 (peer session `peer`); node 1 is not
/// running, its connections are played by the test.
fn node_with_session(w: &WrappedEnv, peer: ActorId) -> (Arc<NodeShared>, Arc<Session>) {
    let (node, s) = node_2(w, None);
    {
        let mut st = s.state.lock();
        st.established = true;
        st.peer_id = peer;
    }
    (node, s)
}

/// Node 2 (with `secret`, if any) and its session with node 1, which is not running.
fn node_2(w: &WrappedEnv, secret: Option<&[u8]>) -> (Arc<NodeShared>, Arc<Session>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let names = NameService::new()
        .node(
            1,
            NodeAddress::new("127.0.0.1", closed.local_addr().unwrap().port()),
        )
        .node(
            2,
            NodeAddress::new("127.0.0.1", l.local_addr().unwrap().port()),
        );
    drop(closed);
    let system = ActorSystem::start(w.environment(), SystemSetup::new(2)).unwrap();
    let mut setup = InterconnectSetup::new(names)
        .listener(l)
        .handshake_timeout(PATIENCE);
    if let Some(secret) = secret {
        setup = setup.secret(secret);
    }
    let ic = Interconnect::start(&system, setup).unwrap();
    let node = ic.shared().clone();
    let s = node.session(1).unwrap();
    (node, s)
}

#[test]
fn a_resume_that_lost_its_session_to_a_newer_resume_is_not_installed() {
    let w = WrappedEnv::new(|_| {}).unwrap();
    let peer = ActorId::new(1, 55, 0);
    let (node, s) = node_with_session(&w, peer);
    let ours = s.state.lock().self_id;
    let hello = InitialPacket::resume(peer, ours, 0);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let resume = |stream: TcpStream| {
        let (node, s) = (node.clone(), s.clone());
        std::thread::spawn(move || {
            let mut c = Conn {
                stream,
                deadline: Instant::now() + PATIENCE,
            };
            accept_resume(&node, &s, &mut c, &hello, None)
        })
    };

    // Resume A claims the session, then waits in the write of its reply.
    let (a, mut a_peer) = pair(&l);
    let a_filled = fill(&a);
    let a_local = a.local_addr().unwrap();
    let a_done = resume(a);
    wait_until("resume A claims the session", || {
        s.state.lock().accepting.is_some()
    });
    // An outgoing connect is under way (it gives way to an accepted resume, which clears
    // it): the sign that resume B has claimed the session too.
    s.state.lock().connecting = Some(u64::MAX);
    let (b, mut b_peer) = pair(&l);
    let b_filled = fill(&b);
    let b_local = b.local_addr().unwrap();
    let b_done = resume(b);
    wait_until("resume B claims the session", || {
        s.state.lock().connecting.is_none()
    });

    // A's reply goes out now: B owns the session, so A must not install its connection.
    let reply = drain(
        &mut a_peer,
        a_filled + InitialPacket::LEN,
        InitialPacket::LEN,
    );
    let reply = InitialPacket::decode(&reply).unwrap().0;
    assert_eq!((reply.self_virtual_id, reply.peer_virtual_id), (ours, peer));
    assert_eq!(a_done.join().unwrap(), Err(HandshakeError::Simultaneous));
    let installed = |st: &crate::interconnect::session::State| match &st.conn {
        Link::Connected { stream, .. } => stream.local_addr().ok(),
        Link::None => None,
    };
    assert_ne!(installed(&s.state.lock()), Some(a_local), "A was installed");

    drain(
        &mut b_peer,
        b_filled + InitialPacket::LEN,
        InitialPacket::LEN,
    );
    assert_eq!(b_done.join().unwrap(), Ok(()));
    assert_eq!(
        installed(&s.state.lock()),
        Some(b_local),
        "B was not installed"
    );
    w.stop_then_join().unwrap();
}

/// A reader that returns `Interrupted` before each of its chunks.
struct Interrupting {
    chunks: Vec<Vec<u8>>,
    interrupt: bool,
}

impl Read for Interrupting {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.interrupt = !self.interrupt;
        if self.interrupt {
            return Err(std::io::Error::from(ErrorKind::Interrupted));
        }
        if self.chunks.is_empty() {
            return Ok(0);
        }
        let chunk = self.chunks.remove(0);
        buf[..chunk.len()].copy_from_slice(&chunk);
        Ok(chunk.len())
    }
}

#[test]
fn a_read_interrupted_by_a_signal_during_a_handshake_is_retried() {
    let mut r = Interrupting {
        chunks: vec![vec![1, 2], vec![3], vec![4, 5, 6]],
        interrupt: false,
    };
    let mut buf = [0u8; 6];
    let mut reads = 0;
    read_full(&mut r, &mut buf, || {
        reads += 1;
        Ok(())
    })
    .unwrap();
    assert_eq!((buf, reads), ([1, 2, 3, 4, 5, 6], 6));
    // The end of the stream is a failure still.
    let mut buf = [0u8; 1];
    assert!(matches!(
        read_full(&mut r, &mut buf, || Ok(())),
        Err(HandshakeError::Io(ErrorKind::UnexpectedEof, _))
    ));
}

#[test]
fn a_handshake_yet_to_prove_itself_is_dropped_if_stale_and_moves_no_serial_mark() {
    // A request's program and serial are not covered by its proof: a recorded request
    // replayed with a huge serial must not make the real peer's next ones stale.
    let w = WrappedEnv::new(|_| {}).unwrap();
    let (node, s) = node_2(&w, Some(b"shared secret"));
    let mark = PeerProgram {
        pid: 7,
        start_time: 8,
        serial: 10,
    };
    s.state.lock().peer_program = Some(mark);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let handshake = |stream: TcpStream, serial: u64| {
        let (node, s) = (node.clone(), s.clone());
        std::thread::spawn(move || {
            let mut c = Conn {
                stream,
                deadline: Instant::now() + PATIENCE,
            };
            let request = HandshakeRequest {
                program_pid: mark.pid,
                program_start_time: mark.start_time,
                serial,
                ..Default::default()
            };
            let peer_session = ActorId::new(1, serial, 0);
            let ni = [1u8; challenge::NONCE_LEN];
            accept_verified(&node, &s, &mut c, (peer_session, &request), &ni, false)
        })
    };

    // At or below the mark: closed before any reply.
    let (a, mut a_peer) = pair(&l);
    let a_done = handshake(a, 10);
    assert_eq!(
        a_done.join().unwrap(),
        Err(HandshakeError::StaleSerial {
            serial: 10,
            last: 10
        })
    );
    let mut got = Vec::new();
    a_peer
        .set_read_timeout(Some(PATIENCE))
        .and_then(|()| a_peer.read_to_end(&mut got))
        .unwrap();
    assert!(got.is_empty(), "a stale request got {} bytes", got.len());

    // Above it, but never proven (a wrong answer to our nonce): refused, and the mark stays.
    let (b, mut b_peer) = pair(&l);
    let b_done = handshake(b, u64::MAX >> 1);
    b_peer.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut head = [0u8; 8];
    b_peer.read_exact(&mut head).unwrap();
    let size = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as usize;
    assert!(size <= ExBlock::MAX_SIZE);
    let mut success = vec![0u8; size];
    b_peer.read_exact(&mut success).unwrap();
    b_peer
        .write_all(&challenge::proof_frame(vec![0; 32]))
        .unwrap();
    assert_eq!(b_done.join().unwrap(), Err(HandshakeError::BadSecret));
    let st = s.state.lock();
    assert_eq!(st.peer_program, Some(mark));
    assert_eq!((st.established, st.proving), (false, 0));
    drop(st);
    w.stop_then_join().unwrap();
}
