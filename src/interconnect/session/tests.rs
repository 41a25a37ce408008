//! Races of a stopping node that no peer can time from outside: a handshake held in the
//! window between its claim on the session and its install (by a full socket buffer, as in
//! `handshake/tests.rs`) while the node stops.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Session;
use crate::actors::{ActorId, ActorSystem, SystemSetup};
use crate::interconnect::handshake;
use crate::interconnect::shared::NodeShared;
use crate::interconnect::wire::{InitialPacket, Packet};
use crate::interconnect::{Interconnect, InterconnectSetup, NameService, NodeAddress};
use crate::WrappedEnv;

const PATIENCE: Duration = Duration::from_secs(60);

/// Fills the send buffer of `s` (the peer reads nothing): its next write blocks. Returns
/// the bytes written. (The first `WouldBlock` is not the end: the bytes in flight reach
/// the peer's buffer and free some of ours, so it writes until a pause frees nothing.)
fn fill(s: &TcpStream) -> usize {
    s.set_nonblocking(true).unwrap();
    let chunk = vec![0u8; 64 << 10];
    let mut n = 0;
    let mut quiet = 0;
    while quiet < 3 {
        let before = n;
        loop {
            match (&*s).write(&chunk) {
                Ok(k) => n += k,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("filling: {e}"),
            }
        }
        quiet = if n == before { quiet + 1 } else { 0 };
        std::thread::sleep(Duration::from_millis(20));
    }
    s.set_nonblocking(false).unwrap();
    n
}

/// Reads exactly `n` bytes from `s`; returns the last `tail` of them, or why it could not.
fn drain(s: &mut TcpStream, n: usize, tail: usize) -> Result<Vec<u8>, String> {
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut all = Vec::with_capacity(n);
    let mut buf = vec![0u8; 64 << 10];
    while all.len() < n {
        let want = (n - all.len()).min(buf.len());
        match s.read(&mut buf[..want]) {
            Ok(0) => return Err(format!("an end of stream after {} of {n} bytes", all.len())),
            Ok(k) => all.extend_from_slice(&buf[..k]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("{e} after {} of {n} bytes", all.len())),
        }
    }
    Ok(all.split_off(n - tail))
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Node 2 with an established session with node 1 (peer session `peer`), which is not
/// running: its connections are played by the test.
fn node_2(w: &WrappedEnv, peer: ActorId) -> (Interconnect, Arc<NodeShared>, Arc<Session>) {
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
    // The linger is long so that nothing here depends on how fast the test runs.
    let setup = InterconnectSetup::new(names)
        .listener(l)
        .handshake_timeout(PATIENCE)
        .lost_connection_timeout(Duration::from_secs(3600))
        .close_linger(Duration::from_secs(600));
    let ic = Interconnect::start(&system, setup).unwrap();
    let node = ic.shared().clone();
    let s = node.session(1).unwrap();
    {
        let mut st = s.state.lock();
        st.established = true;
        st.peer_id = peer;
    }
    (ic, node, s)
}

/// Reads from `s` until its end: `Ok` on an end of stream, `Err` on a reset or any other
/// error.
fn read_to_end(s: &mut TcpStream) -> Result<(), String> {
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// The rule: a stopping node closes every connection cleanly (an end of stream, never a
/// reset), also one whose handshake it answered but had not yet installed when it stopped.
/// The peer has installed its side once it read the answer; a reset there is a lost
/// connection, which it tries to resume for its whole lost-connection timeout, where an end
/// of stream with nothing pending ends its session at once (`interconnect_lifecycle`'s
/// clean-close test, which failed so once in 25 runs on 16 cores: the stopping node's
/// accepting thread was between its reply and its install, and the peer's first ping lay
/// unread on the connection it dropped).
#[test]
fn a_node_stopping_between_its_answer_and_its_install_closes_that_connection_cleanly() {
    let w = WrappedEnv::new(|_| {}).unwrap();
    let peer = ActorId::new(1, 55, 0);
    let (ic, node, s) = node_2(&w, peer);
    let ours = s.state.lock().self_id;
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut remote = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (local, _) = l.accept().unwrap();

    // The node's resume handshake claims the session, then waits in the write of its reply.
    // Small fixed buffers (no autotuning), so that nothing frees room for the reply.
    socket2::SockRef::from(&remote)
        .set_recv_buffer_size(4096)
        .unwrap();
    socket2::SockRef::from(&local)
        .set_send_buffer_size(4096)
        .unwrap();
    let filled = fill(&local);
    remote
        .write_all(&InitialPacket::resume(peer, ours, 0).encode())
        .unwrap();
    let accepting = {
        let node = node.clone();
        std::thread::spawn(move || handshake::accept(&node, local, std::time::Instant::now()))
    };
    wait_until("the resume claims the session", || {
        assert!(
            !accepting.is_finished(),
            "the handshake did not wait in its reply"
        );
        s.state.lock().accepting.is_some()
    });
    ic.stop();
    // The peer takes the answer for its connection and sends on it (its first ping).
    remote
        .write_all(&Packet::ping_request(0, 7).encode())
        .unwrap();
    // (Dropped with the ping unread, the node's end was reset: the peer's read failed
    // here, the answer lost with the rest of what it had not read yet.)
    let reply = drain(&mut remote, filled + InitialPacket::LEN, InitialPacket::LEN)
        .expect("the answer and an end of stream, not a reset");
    let reply = InitialPacket::decode(&reply).unwrap().0;
    assert_eq!((reply.self_virtual_id, reply.peer_virtual_id), (ours, peer));
    accepting.join().unwrap();
    assert_eq!(
        read_to_end(&mut remote),
        Ok(()),
        "a reset, not an end of stream"
    );
    w.stop_then_join().unwrap();
}
