//! Races between handshakes of one session: a resume attempt that was under way when the
//! peer's new session was accepted fails with `SessionMismatch`; that stale failure must
//! not end the new session. Node 2 is real; node 1 is faked with the public wire codec
//! (lower id, so node 2 accepts its new session while node 2's own resume is in flight).

#![cfg(feature = "interconnect")]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use agentbox::actors::*;
use agentbox::interconnect::wire::{
    ExBlock, HandshakeReply, HandshakeRequest, InitialPacket, Packet, HANDSHAKE_PROTOCOL,
};
use agentbox::interconnect::{Interconnect, InterconnectSetup, NameService, NodeAddress};
use agentbox::{ActorId, WrappedEnv};

/// The next connection to `l`, failing after `patience` (no test waits unbounded).
fn accept_within(l: &TcpListener, patience: Duration) -> TcpStream {
    l.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + patience;
    loop {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).unwrap();
                return s;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(Instant::now() < deadline, "no connection in {patience:?}");
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("accept: {e}"),
        }
    }
}

fn read_n(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    s.read_exact(&mut b).unwrap();
    b
}

fn handshake(addr: std::net::SocketAddr, ours: ActorId) -> (TcpStream, ActorId) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&InitialPacket::new_session(ours).encode())
        .unwrap();
    let r = read_n(&mut s, InitialPacket::LEN);
    assert_eq!(
        InitialPacket::decode(&r).unwrap().0,
        InitialPacket::empty_reply()
    );
    let req = HandshakeRequest {
        protocol: HANDSHAKE_PROTOCOL,
        program_pid: 1,
        program_start_time: 1,
        serial: ours.local_id(),
        receiver_node_id: 2,
        sender_actor_id: ours.to_string(),
        sender_host_name: Some("127.0.0.1".into()),
        receiver_host_name: Some("127.0.0.1".into()),
        request_modern_frame: Some(true),
        request_extended_trace_fmt: Some(true),
        ..Default::default()
    };
    s.write_all(&ExBlock::new(req.encode()).encode()).unwrap();
    let mut head = read_n(&mut s, 8);
    let size = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as usize;
    head.extend(read_n(&mut s, size));
    let (block, _) = ExBlock::decode(&head).unwrap();
    let (reply, _) = HandshakeReply::decode(&block.payload).unwrap();
    let success = reply.success.expect("success");
    (s, success.sender_actor_id.parse().unwrap())
}

#[test]
fn a_stale_resume_s_session_mismatch_does_not_end_the_session_that_replaced_it() {
    let wrapped = WrappedEnv::new(|_| {}).unwrap();
    let fake_listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let real_listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let real = real_listener.local_addr().unwrap();
    let names = NameService::new()
        .node(
            1,
            NodeAddress::new("127.0.0.1", fake_listener.local_addr().unwrap().port()),
        )
        .node(2, NodeAddress::new("127.0.0.1", real.port()));
    let system = ActorSystem::start(wrapped.environment(), SystemSetup::new(2)).unwrap();
    let ic = Interconnect::start(
        &system,
        InterconnectSetup::new(names).listener(real_listener),
    )
    .unwrap();

    // Session 1: the fake node 1 connects, gets an event it never confirms, then drops the
    // connection (with nothing pending, node 2 would end the session instead of resuming).
    let f1 = ActorId::new(1, 0x1111, 0);
    let (mut s1, t1) = handshake(real, f1);
    system.send(ActorId::new(1, 5, 0), Poison);
    let _ = read_n(&mut s1, Packet::HEADER_LEN);
    drop(s1);
    // Node 2 (established) now tries to resume: hold its attempt without answering.
    let mut resume = accept_within(&fake_listener, Duration::from_secs(30));
    resume
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let hello = InitialPacket::decode(&read_n(&mut resume, InitialPacket::LEN))
        .unwrap()
        .0;
    assert_eq!(hello.peer_virtual_id, f1, "a resume of session 1");
    assert_eq!(hello.self_virtual_id, t1);

    // Node 1 "restarted": a new session, accepted while node 2's resume is in flight.
    let f2 = ActorId::new(1, 0x2222, 0);
    let (mut s2, t2) = handshake(real, f2);
    assert_ne!(t1, t2);
    let ended_after_new = ic.session_stats(1).unwrap().sessions_ended;

    // Node 1 answers the stale resume as YDB does for a session it does not know.
    resume
        .write_all(&InitialPacket::empty_reply().encode())
        .unwrap();

    // The new session goes on: s2 stays open (a bound that can only make the test pass
    // wrongly on a slow machine, never fail wrongly).
    s2.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let until = Instant::now() + Duration::from_secs(2);
    let mut buf = [0u8; 4096];
    let mut closed = false;
    while Instant::now() < until {
        match s2.read(&mut buf) {
            Ok(0) => {
                closed = true;
                break;
            }
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => {
                closed = true;
                break;
            }
        }
    }
    let st = ic.session_stats(1).unwrap();
    assert!(
        !closed && st.sessions_ended == ended_after_new,
        "the stale resume's SessionMismatch ended the new session: closed={closed}, sessions_ended {} -> {}",
        ended_after_new,
        st.sessions_ended
    );
    wrapped.stop_then_join().unwrap();
}
