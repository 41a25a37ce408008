//! A cluster with a shared secret refuses what a stranger can record or read off the wire:
//! a whole recorded handshake (and the data after it), replayed to a restarted node, and a
//! resume with the session ids of a live session. The stranger gets no session and
//! nothing it sends reaches an actor; the real session goes on. Sessions of such a cluster
//! still resume across cut connections (the resume's challenge) without losing or
//! repeating an event.

#![cfg(feature = "interconnect")]

mod interconnect_support;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use agentbox::actors::*;
use agentbox::interconnect::wire::{
    crc32c, ChannelPart, EventDescriptor, ExBlock, HandshakeReply, InitialPacket, KeyValuePair,
    Packet,
};
use agentbox::interconnect::{HandshakeError, InterconnectSetup, Refusal};
use agentbox::{ActorId, WrappedEnv};
use interconnect_support::*;

const SECRET: &[u8] = b"correct horse battery staple";
/// The cookie of what the stranger sends: the sink must never see it.
const FORGED: u64 = 0xBAD_C0DE;

/// Registers the sink service of `node` (id `node_id`): it reports (event type, cookie)
/// of everything it gets.
fn sink(node: &Node, node_id: u32) -> (ActorId, Receiver<(u32, u64)>) {
    let (tx, rx) = channel();
    let actor = node
        .system
        .register(Scripted::new(move |_, ev| {
            let _ = tx.send((ev.event_type(), ev.cookie()));
            Handled::Yes
        }))
        .unwrap();
    let service = ActorId::service(node_id, b"sink").unwrap();
    node.system.register_local_service(service, actor).unwrap();
    (service, rx)
}

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

/// Reads (and throws away) until the other side closes, within [`PATIENCE`].
fn until_closed(s: &mut TcpStream) {
    let deadline = Instant::now() + PATIENCE;
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return,
        }
        assert!(
            Instant::now() < deadline,
            "the node kept the connection open"
        );
    }
}

/// A data packet carrying one event with `cookie` for `recipient`, from `sender`.
fn forged_packet(serial: u64, recipient: ActorId, sender: ActorId) -> Vec<u8> {
    let body = vec![serial as u8];
    let d = EventDescriptor {
        event_type: Ping::EVENT_TYPE,
        flags: 0,
        recipient,
        sender,
        cookie: FORGED,
        trace_id: [0; 28],
        payload_checksum: crc32c(&body),
    };
    let mut payload = ChannelPart::inline(0, body).encode();
    payload.extend(ChannelPart::descriptor(0, &d).encode());
    Packet::data(0, serial, payload).encode()
}

/// An agentbox handshake frame with these params (what a stranger can make).
fn frame(params: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let reply = HandshakeReply {
        params: params
            .iter()
            .map(|(k, v)| KeyValuePair {
                key: Some((*k).to_owned()),
                value: Some(v.clone()),
            })
            .collect(),
        ..Default::default()
    };
    ExBlock::new(reply.encode()).encode()
}

/// Node 1 sends `Ping(n)` with cookie `n` for n in `range` to `sink`; each arrives.
fn deliver(from: &Node, to: ActorId, rx: &Receiver<(u32, u64)>, range: std::ops::Range<u64>) {
    for n in range {
        from.system
            .send_with(to, ActorId::EMPTY, Ping(n), EventFlags::empty(), n);
        assert_eq!(next(rx, "a Ping"), (Ping::EVENT_TYPE, n));
    }
}

fn secret(setup: InterconnectSetup) -> InterconnectSetup {
    setup.secret(SECRET)
}

fn bad_secret_from(refusals: &[Refusal], node: u32) -> bool {
    refusals
        .iter()
        .any(|r| r.claimed_node == node && r.reason == HandshakeError::BadSecret)
}

#[test]
fn a_recorded_handshake_replayed_to_a_restarted_node_gets_no_session() {
    // Node 1 reaches node 2 through the recording proxy; three events go through.
    let w = WrappedEnv::new(|_| {}).unwrap();
    let (l1, p1) = bind();
    let (l2, p2) = bind();
    let proxy = RecordingProxy::start(SocketAddr::from(([127, 0, 0, 1], p2)));
    let n1 = start_node(
        w.environment(),
        1,
        secret(remote_events(
            InterconnectSetup::new(names(&[(1, p1), (2, proxy.port)])).listener(l1),
        )),
    );
    let n2 = start_node(
        w.environment(),
        2,
        secret(remote_events(
            InterconnectSetup::new(names(&[(1, p1), (2, p2)])).listener(l2),
        )),
    );
    let (to, rx) = sink(&n2, 2);
    deliver(&n1, to, &rx, 1..4);
    let (recorded, _) = proxy.recorded(0);
    w.stop_then_join().unwrap();

    // Node 2 restarts (same id, same secret, nothing remembered); the recording is
    // replayed to it: initial packet, request, everything after it.
    let w = WrappedEnv::new(|_| {}).unwrap();
    let (l2, p2) = bind();
    let n2 = start_node(
        w.environment(),
        2,
        secret(remote_events(
            InterconnectSetup::new(names(&[(1, p1), (2, p2)])).listener(l2),
        )),
    );
    let (_, rx) = sink(&n2, 2);
    let mut replay = connect(p2);
    replay.write_all(&recorded).unwrap();
    let _ = replay.shutdown(Shutdown::Write);
    until_closed(&mut replay);

    let s = n2.ic.session_stats(1).unwrap();
    assert_eq!(
        (s.events_in, s.peer_session_id, s.connected),
        (0, ActorId::EMPTY, false),
        "the replay got a session: {s:?}"
    );
    assert!(rx.try_recv().is_err(), "a replayed event was delivered");
    wait_until("node 2 keeps the refusal", || {
        bad_secret_from(&n2.ic.refusals(), 1)
    });
    w.stop_then_join().unwrap();
}

#[test]
fn a_resume_with_session_ids_read_off_the_wire_is_refused() {
    let w = WrappedEnv::new(|_| {}).unwrap();
    let (l1, p1) = bind();
    let (l2, p2) = bind();
    let proxy = RecordingProxy::start(SocketAddr::from(([127, 0, 0, 1], p2)));
    let n1 = start_node(
        w.environment(),
        1,
        secret(remote_events(
            InterconnectSetup::new(names(&[(1, p1), (2, proxy.port)])).listener(l1),
        )),
    );
    let n2 = start_node(
        w.environment(),
        2,
        secret(remote_events(
            InterconnectSetup::new(names(&[(1, p1), (2, p2)])).listener(l2),
        )),
    );
    let (to, rx) = sink(&n2, 2);
    deliver(&n1, to, &rx, 1..4);

    // The session ids, off the wire: node 1's initial packet and node 2's success.
    let (up, down) = proxy.recorded(0);
    let ours = InitialPacket::decode(&up).unwrap().0.self_virtual_id;
    let block = ExBlock::decode(&down[InitialPacket::LEN..]).unwrap().0;
    let success = HandshakeReply::decode(&block.payload).unwrap().0.success;
    let theirs: ActorId = success.unwrap().sender_actor_id.parse().unwrap();
    let before = n2.ic.session_stats(1).unwrap();
    assert_eq!((before.session_id, before.peer_session_id), (theirs, ours));

    // Data packets 1..=8 carry forged events: those at or below what node 2 processed are
    // skipped as resends, the others would be delivered.
    let forged: Vec<u8> = (1..=8)
        .flat_map(|serial| forged_packet(serial, to, ActorId::new(1, 77, 0)))
        .collect();
    let hello = InitialPacket::resume(ours, theirs, 3).encode();

    // A stranger resumes as YDB does: the initial packet, then data at once.
    let mut stranger = connect(p2);
    stranger.write_all(&hello).unwrap();
    stranger.write_all(&forged).unwrap();
    let _ = stranger.shutdown(Shutdown::Write);
    until_closed(&mut stranger);
    assert!(rx.try_recv().is_err(), "a forged event was delivered");

    // A stranger that plays agentbox's resume: its nonce, then a made-up proof.
    let mut stranger = connect(p2);
    stranger.write_all(&hello).unwrap();
    stranger
        .write_all(&frame(&[("agentbox.nonce", vec![7; 32])]))
        .unwrap();
    stranger
        .write_all(&frame(&[("agentbox.proof", vec![9; 32])]))
        .unwrap();
    stranger.write_all(&forged).unwrap();
    let _ = stranger.shutdown(Shutdown::Write);
    until_closed(&mut stranger);
    assert!(rx.try_recv().is_err(), "a forged event was delivered");

    wait_until("node 2 refuses the made-up proof", || {
        bad_secret_from(&n2.ic.refusals(), 1)
    });
    // The real session goes on, on its own connection, and nothing forged arrived.
    deliver(&n1, to, &rx, 4..6);
    let after = n2.ic.session_stats(1).unwrap();
    assert_eq!(
        (after.session_id, after.peer_session_id, after.reconnects),
        (theirs, ours, before.reconnects),
        "{after:?}"
    );
    assert!(rx.try_recv().is_err(), "a forged event was delivered");
    w.stop_then_join().unwrap();
}

#[test]
fn a_cluster_with_a_secret_resumes_cut_connections_exactly_once_and_in_order() {
    let w = WrappedEnv::new(|_| {}).unwrap();
    let (l1, p1) = bind();
    let (l2, p2) = bind();
    let proxy = CuttingProxy::start(SocketAddr::from(([127, 0, 0, 1], p2)));
    let n1 = start_node(
        w.environment(),
        1,
        secret(remote_events(
            InterconnectSetup::new(names(&[(1, p1), (2, proxy.port())])).listener(l1),
        )),
    );
    // Node 2 may only accept (node 1 is unreachable for it): every reconnect is node 1's
    // resume through the proxy.
    let n2 = start_node(
        w.environment(),
        2,
        secret(remote_events(
            InterconnectSetup::new(names(&[(1, closed_port()), (2, p2)])).listener(l2),
        )),
    );
    let (to, rx) = sink(&n2, 2);
    let deadline = Instant::now() + PATIENCE;
    let mut n = 0u64;
    // Until a few cuts were resumed, then the rest of the stream.
    while proxy.cuts() < 3 || n < 2_000 {
        assert!(Instant::now() < deadline, "only {} cuts", proxy.cuts());
        n1.system
            .send_with(to, ActorId::EMPTY, Ping(n), EventFlags::empty(), n);
        n += 1;
        if n.is_multiple_of(100) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    for k in 0..n {
        assert_eq!(next(&rx, "the stream"), (Ping::EVENT_TYPE, k));
    }
    // The reader counts a batch just after handing it over: the last events may be handled
    // a moment before they are counted.
    wait_until("every event counted", || {
        n2.ic.session_stats(1).unwrap().events_in >= n
    });
    let s = n2.ic.session_stats(1).unwrap();
    assert!(s.reconnects >= 1, "{s:?}");
    assert_eq!((s.sessions_ended, s.events_in), (0, n), "{s:?}");
    assert!(n2.ic.refusals().is_empty(), "{:?}", n2.ic.refusals());
    w.stop_then_join().unwrap();
}

/// A port nothing listens on.
fn closed_port() -> u16 {
    let (l, port) = bind();
    drop(l);
    port
}

#[test]
fn two_nodes_with_a_secret_that_connect_to_each_other_at_once_lose_nothing() {
    let failed = simultaneous_connects_lose_nothing(40, |_, s| s.secret(SECRET));
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
