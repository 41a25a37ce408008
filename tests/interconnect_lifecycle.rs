//! YDB's session lifecycle and the limits of what a session holds, against a live node
//! (node 1) and a fake node 2 driven by the test over a plain socket (or a real node 2):
//!
//! - what a session queues for its peer is bounded (events, bytes): an event beyond it
//!   comes back at once under the non-delivery rules, counted; `queued_events` and
//!   `queued_bytes` say what waits;
//! - a peer that pings but never confirms is dead after the dead-peer timeout: the session
//!   ends and every event is accounted for;
//! - the dead-peer timeout ends the session (subscribers get `NodeDisconnected`);
//! - a handshake from the same peer program with a serial at or below the last one is
//!   dropped and the running session goes on;
//! - a clean close with nothing pending ends the session at once; a resume refused by a
//!   restarted peer starts a new session at once, with the events that never left;
//! - the inbound event limit defaults to YDB's 140 MiB, and partial events of all channels
//!   together are held to four times the limit;
//! - XXH3 packet checksums when the peer asks, YDB's handshake fields, its ping cadence,
//!   pings answered at once, and the RTT measured.
//!
//! Waits are bounded by `SOON` (outcomes that follow at once from their cause) or by the
//! timers the test sets plus `SOON`; nothing asserts speed.

#![cfg(feature = "interconnect")]

mod interconnect_support;

use std::net::{SocketAddr, TcpListener};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use agentbox::actors::*;
use agentbox::interconnect::wire::{EventDescriptor, Packet, PacketChecksum, PacketKind};
use agentbox::interconnect::{
    EventCodec, HandshakeError, InterconnectSetup, Serde, SessionError, SessionStats, Subscribe,
};
use agentbox::{ActorId, WrappedEnv};
use interconnect_support::fake_peer::{event_payload, events_of, request, FakePeer, PROGRAM};
use interconnect_support::*;

/// Node 1 with node 2 at `peer`, a recorder actor, and what the tests look at.
struct Rig {
    wrapped: WrappedEnv,
    node: Node,
    addr: SocketAddr,
    recorder: ActorId,
    rx: Receiver<Got>,
}

impl Rig {
    fn start(peer_port: u16, tune: impl FnOnce(InterconnectSetup) -> InterconnectSetup) -> Rig {
        let wrapped = WrappedEnv::new(|_| {}).unwrap();
        let (listener, port) = bind();
        let addr = listener.local_addr().unwrap();
        let names = names(&[(1, port), (2, peer_port)]);
        let setup = remote_events(InterconnectSetup::new(names).listener(listener));
        let node = start_node(wrapped.environment(), 1, tune(setup));
        let (tx, rx) = channel();
        let recorder = node.system.register(recorder(tx)).unwrap();
        Rig {
            wrapped,
            node,
            addr,
            recorder,
            rx,
        }
    }

    fn stats(&self) -> SessionStats {
        self.node.ic.session_stats(2).unwrap()
    }

    /// Sends `Ping(n)` from the recorder to an actor of node 2 with `flags`, cookie `n`.
    fn send(&self, n: u64, flags: EventFlags) {
        let to = ActorId::new(2, 5, 0);
        self.node
            .system
            .send_with(to, self.recorder, Ping(n), flags, n);
    }

    /// A descriptor of an event for the recorder, as node 2 would send it.
    fn descriptor(&self, event_type: u32, channel: u16, cookie: u64) -> EventDescriptor {
        EventDescriptor {
            event_type,
            flags: u32::from(channel) << 20,
            recipient: self.recorder,
            sender: ActorId::new(2, 99, 0),
            cookie,
            ..Default::default()
        }
    }

    /// The payload of one `Ping(n)` for the recorder on channel 0, cookie `n`.
    fn ping_payload(&self, n: u64) -> Vec<u8> {
        let mut body = Vec::new();
        <Serde as EventCodec<Ping>>::encode(&Ping(n), &mut body).unwrap();
        event_payload(&self.descriptor(Ping::EVENT_TYPE, 0, n), 0, &body, 4096)
    }
}

/// A port where nothing listens: node 1's own connection attempts to node 2 fail at once.
fn closed_port() -> u16 {
    bind().1
}

const TRACKED: EventFlags = EventFlags::TRACK_DELIVERY;

fn undelivered(g: &Got) -> Option<(u64, Undelivered)> {
    match g.what {
        What::Undelivered(u) => Some((g.cookie, u)),
        _ => None,
    }
}

fn session_id(serial: u64) -> ActorId {
    ActorId::new(2, serial, 0)
}

/// Sends ten tracked events to unreachable node 2 through a session that may queue
/// `events` events and `bytes` bytes, and checks that exactly the first three are queued
/// and the other seven come back at once; returns the bytes the three hold.
fn three_fit(events: usize, bytes: usize) -> usize {
    let rig = Rig::start(closed_port(), |s| {
        s.max_queued_events(events)
            .max_queued_bytes(bytes)
            .lost_connection_timeout(Duration::from_secs(3600))
    });
    for n in 0..10 {
        rig.send(n, TRACKED);
    }
    let back = take_within(&rig.rx, 7, SOON);
    let mut cookies: Vec<u64> = back
        .iter()
        .filter_map(undelivered)
        .map(|(c, u)| {
            assert_eq!(u.reason, UndeliveredReason::Disconnected, "{u:?}");
            assert!(!u.unsure, "{u:?}");
            c
        })
        .collect();
    cookies.sort_unstable();
    assert_eq!(
        cookies,
        (3..10).collect::<Vec<_>>(),
        "limits ({events}, {bytes})"
    );
    let st = rig.stats();
    assert_eq!((st.queued_events, st.events_refused), (3, 7), "{st:?}");
    assert!(st.queued_bytes > 0 && st.queued_bytes <= bytes, "{st:?}");
    assert!(rig.rx.try_recv().is_err(), "nothing else came back");
    rig.wrapped.stop_then_join().unwrap();
    st.queued_bytes
}

#[test]
fn an_event_beyond_the_queue_s_limits_comes_back_at_once_and_is_counted() {
    // Node 2 cannot be reached, so everything sent stays queued.
    let three = three_fit(3, usize::MAX);
    // The same three events, bounded by their bytes this time.
    three_fit(usize::MAX, three);
}

#[test]
fn a_peer_that_pings_but_never_confirms_ends_the_session_and_every_event_is_accounted() {
    const N: u64 = 3000;
    let dead_peer = Duration::from_millis(1500);
    let rig = Rig::start(closed_port(), |s| {
        s.dead_peer_timeout(dead_peer)
            .inflight_window(64 << 10)
            .max_queued_events(1000)
            .lost_connection_timeout(Duration::from_secs(3600))
    });
    let mut peer =
        FakePeer::connect(rig.addr, request(session_id(1000), 1, false)).expect("handshake");
    // Every event asks for an Undelivered, unsure ones included, so that each is accounted.
    let flags = TRACKED | EventFlags::GENERATE_UNSURE_UNDELIVERED;
    for n in 0..N {
        rig.send(n, flags);
    }
    // The peer reads everything and pings every 100 ms, and never confirms a packet.
    let started = Instant::now();
    let mut next_ping = Instant::now();
    let mut data = 0;
    let ended = loop {
        if let Some(SessionError::NotConfirming) = rig.stats().last_error {
            break true;
        }
        if started.elapsed() > dead_peer + SOON {
            break false;
        }
        if Instant::now() >= next_ping {
            next_ping += Duration::from_millis(100);
            if peer.send(&Packet::ping_request(0, 7)).is_err() {
                // Closed by the node: it ended the session.
                continue;
            }
        }
        let _ = peer.read_until(Duration::from_millis(50), |p| {
            data += usize::from(p.packet.is_data());
            false
        });
    };
    let st = rig.stats();
    assert!(ended, "the session never ended: {st:?}");
    assert_eq!(st.sessions_ended, 1, "{st:?}");
    assert!(st.events_refused > 0, "the queue was bounded: {st:?}");
    assert!(
        data > 0,
        "node 1 sent data packets before the window filled"
    );
    // Every event comes back once: refused or queued ones sure, sent ones unsure.
    let back = take_within(&rig.rx, N as usize, SOON);
    let mut cookies: Vec<u64> = back
        .iter()
        .filter_map(undelivered)
        .map(|(c, _)| c)
        .collect();
    cookies.sort_unstable();
    assert_eq!(cookies, (0..N).collect::<Vec<_>>());
    let unsure = back
        .iter()
        .filter_map(undelivered)
        .filter(|(_, u)| u.unsure)
        .count() as u64;
    assert!(
        unsure > 0 && unsure <= st.events_out,
        "{unsure} unsure: {st:?}"
    );
    rig.wrapped.stop_then_join().unwrap();
}

#[test]
fn the_dead_peer_timeout_ends_the_session() {
    let rig = Rig::start(closed_port(), |s| {
        s.dead_peer_timeout(Duration::from_millis(500))
            .lost_connection_timeout(Duration::from_secs(3600))
    });
    let _peer =
        FakePeer::connect(rig.addr, request(session_id(1000), 1, false)).expect("handshake");
    wait_until("connected", || rig.stats().connected);
    rig.node.system.send_with(
        ActorId::interconnect_proxy(2),
        rig.recorder,
        Subscribe,
        EventFlags::empty(),
        9,
    );
    // The fake peer says nothing from now on.
    let deadline = Instant::now() + SOON;
    let mut disconnected = false;
    while !disconnected {
        let left = deadline.saturating_duration_since(Instant::now());
        let got = rig.rx.recv_timeout(left).unwrap_or_else(|_| {
            panic!(
                "no NodeDisconnected after the dead-peer timeout: {:?}",
                rig.stats()
            )
        });
        disconnected = matches!(got.what, What::Disconnected(2));
    }
    let st = rig.stats();
    assert_eq!(st.last_error, Some(SessionError::DeadPeer), "{st:?}");
    assert_eq!(st.sessions_ended, 1, "{st:?}");
    rig.wrapped.stop_then_join().unwrap();
}

#[test]
fn a_handshake_with_a_stale_serial_is_dropped_and_the_session_goes_on() {
    let rig = Rig::start(closed_port(), |s| s);
    let mut a =
        FakePeer::connect(rig.addr, request(session_id(1000), 1, false)).expect("handshake A");
    a.send(&Packet::data(0, 1, rig.ping_payload(1))).unwrap();
    a.read_until(SOON, |p| p.packet.confirm >= 1).unwrap();
    assert_eq!(next_within(&rig.rx, SOON, "Ping(1)").what, What::Ping(1));

    // The same program, a lower serial, then the same serial: dropped without a reply.
    for serial in [500, 1000] {
        let err = FakePeer::connect(rig.addr, request(session_id(serial), 1, false))
            .err()
            .unwrap_or_else(|| panic!("serial {serial} got a session"));
        assert!(err.contains("reading"), "serial {serial}: {err}");
    }
    wait_until("the refusal is recorded", || {
        rig.node.ic.refusals().iter().any(|r| {
            r.reason
                == HandshakeError::StaleSerial {
                    serial: 500,
                    last: 1000,
                }
        })
    });
    // A's session is untouched: same ids, still connected, and it still delivers.
    let st = rig.stats();
    assert_eq!((st.sessions_ended, st.connected), (0, true), "{st:?}");
    assert_eq!(st.peer_session_id, session_id(1000), "{st:?}");
    a.send(&Packet::data(0, 2, rig.ping_payload(2))).unwrap();
    a.read_until(SOON, |p| p.packet.confirm >= 2).unwrap();
    assert_eq!(next_within(&rig.rx, SOON, "Ping(2)").what, What::Ping(2));

    // Another program (a restarted peer) with a lower serial is a new session.
    let mut other = request(session_id(7), 1, false);
    other.program_start_time = PROGRAM.1 + 1;
    let _restarted = FakePeer::connect(rig.addr, other).expect("a restarted peer's handshake");
    wait_until("the old session ended", || rig.stats().sessions_ended == 1);
    assert_ne!(rig.stats().peer_session_id, session_id(1000));
    rig.wrapped.stop_then_join().unwrap();
}

/// The stale-serial rule with the session started by node 1's own connect: node 2's
/// answer names its program and serial, and a later new-session request from that program
/// must carry a higher serial (YDB keeps the mark from both directions): a lower or equal
/// one (a replayed or delayed handshake) is dropped and the session goes on.
#[test]
fn a_request_at_or_below_the_serial_of_the_peer_s_answer_to_our_connect_is_dropped() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let rig = Rig::start(listener.local_addr().unwrap().port(), |s| s);
    rig.send(1, EventFlags::empty());
    let (stream, hello) = FakePeer::accept_initial(&listener);
    let mut ours = FakePeer::accept_new(stream, &hello, session_id(1000));
    ours.read_until(SOON, |p| !events_of(&p.packet.payload).is_empty())
        .unwrap();
    // (Another session id than the one node 1 knows: a request naming that one is a
    // connect of node 2's that lost a race, refused quietly before the serial is looked at.)
    for serial in [500, 1000] {
        let mut r = request(session_id(serial + 1), 1, false);
        r.serial = serial;
        let err = FakePeer::connect(rig.addr, r)
            .err()
            .unwrap_or_else(|| panic!("serial {serial} got a session"));
        assert!(err.contains("reading"), "serial {serial}: {err}");
    }
    wait_until("both refusals are recorded", || {
        let stale = |serial| HandshakeError::StaleSerial { serial, last: 1000 };
        let refused = rig.node.ic.refusals();
        [500, 1000]
            .into_iter()
            .all(|s| refused.iter().any(|r| r.reason == stale(s)))
    });
    let st = rig.stats();
    assert_eq!((st.sessions_ended, st.connected), (0, true), "{st:?}");
    assert_eq!(st.peer_session_id, session_id(1000), "{st:?}");
    rig.wrapped.stop_then_join().unwrap();
}

#[test]
fn a_clean_close_with_nothing_pending_ends_the_session_at_once() {
    let w = WrappedEnv::new(|_| {}).unwrap();
    let env = w.environment().clone();
    let nodes = cluster(&env, &[1, 2], |_, s| {
        s.lost_connection_timeout(Duration::from_secs(3600))
    });
    let (tx, rx) = channel();
    let watcher = nodes[0].system.register(recorder(tx)).unwrap();
    nodes[0].system.send_with(
        ActorId::interconnect_proxy(2),
        watcher,
        Subscribe,
        EventFlags::empty(),
        3,
    );
    let got = next_within(&rx, SOON, "NodeConnected");
    assert_eq!(got.what, What::Connected(2));
    // Node 2 stops: its side closes the connection, nothing of node 1's is pending.
    nodes[1].ic.stop();
    let got = rx
        .recv_timeout(SOON)
        .unwrap_or_else(|_| panic!("no NodeDisconnected: {:?}", nodes[0].ic.session_stats(2)));
    assert_eq!((got.what, got.cookie), (What::Disconnected(2), 3));
    let st = nodes[0].ic.session_stats(2).unwrap();
    assert_eq!(st.last_error, Some(SessionError::ClosedByPeer), "{st:?}");
    assert_eq!(st.sessions_ended, 1, "{st:?}");
    w.stop_then_join().unwrap();
}

/// Reads from `peer` until the node's end of stream: `Ok` on it, `Err` with the error on
/// a reset or any other error, or when nothing ends within [`SOON`].
fn read_to_end(peer: &mut FakePeer) -> Result<(), String> {
    use std::io::{ErrorKind, Read};
    let deadline = Instant::now() + SOON;
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        match peer.stream.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Err("no end of stream".into())
}

#[test]
fn a_stopping_node_closes_cleanly_and_takes_what_the_peer_sends_meanwhile() {
    // The linger is long so that nothing here depends on how fast the test runs.
    let rig = Rig::start(closed_port(), |s| s.close_linger(Duration::from_secs(600)));
    let mut peer =
        FakePeer::connect(rig.addr, request(session_id(1000), 1, false)).expect("handshake");
    // The node's side of the handshake ends after its reply: the session must hold the
    // connection when the node stops (a handshake still running is cut, not closed).
    wait_until("the session is connected", || rig.stats().connected);
    rig.node.ic.stop();
    // A clean close: an end of stream, not a reset.
    assert_eq!(read_to_end(&mut peer), Ok(()));
    // What the peer sends after it (a ping, as a peer's writer would) is taken, not
    // answered with a reset: the peer still reads a plain end of stream. (Closed both
    // ways at once, the node answered the first with a reset: the second write or the
    // read failed.)
    peer.send(&Packet::ping_request(0, 7)).expect("first write");
    std::thread::sleep(Duration::from_millis(200));
    peer.send(&Packet::ping_request(0, 8))
        .expect("second write");
    assert_eq!(read_to_end(&mut peer), Ok(()));
    rig.wrapped.stop_then_join().unwrap();
}

/// The rule (`SessionStats::last_error`): the last error stays once the session is
/// connected again, and `last_error_at` says when it happened, so that an operator can
/// tell an error of an earlier outage from one of the connection of the moment. (A user
/// saw `connected: true` beside a `last_error` with nothing to say how old it was.)
#[test]
fn the_last_error_says_when_it_happened_and_stays_once_connected_again() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let rig = Rig::start(listener.local_addr().unwrap().port(), |s| {
        s.lost_connection_timeout(Duration::from_secs(3600))
    });
    let before = std::time::SystemTime::now();
    rig.send(1, EventFlags::empty());
    // The first attempt fails: node 2 closes the connection at its initial packet.
    let (stream, _) = FakePeer::accept_initial(&listener);
    drop(stream);
    wait_until("node 1 saw the attempt fail", || {
        rig.stats().last_error.is_some()
    });
    let failed = rig.stats();
    let at = failed.last_error_at.expect("when it failed");
    assert!(
        before <= at && at <= std::time::SystemTime::now(),
        "{failed:?}"
    );
    // The next one succeeds.
    let (stream, hello) = FakePeer::accept_initial(&listener);
    let _peer = FakePeer::accept_new(stream, &hello, session_id(1000));
    wait_until("node 1 is connected", || rig.stats().connected);
    let st = rig.stats();
    assert!(
        matches!(st.last_error, Some(SessionError::Handshake(_))),
        "{st:?}"
    );
    assert_eq!(st.last_error_at, Some(at), "{st:?}");
    rig.wrapped.stop_then_join().unwrap();
}

#[test]
fn a_resume_refused_by_a_restarted_peer_starts_a_new_session_with_what_never_left() {
    // Node 2 is the test, listening where the name service says.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let rig = Rig::start(listener.local_addr().unwrap().port(), |s| {
        s.lost_connection_timeout(Duration::from_secs(3600))
    });
    rig.send(1, TRACKED);
    let (stream, hello) = FakePeer::accept_initial(&listener);
    let mut first = FakePeer::accept_new(stream, &hello, session_id(1000));
    let mut got = Vec::new();
    first
        .read_until(SOON, |p| {
            got.extend(events_of(&p.packet.payload).into_iter().map(|d| d.cookie));
            !got.is_empty()
        })
        .unwrap();
    assert_eq!(got, vec![1]);
    // Node 2 "restarts": the connection closes with packet 1 unconfirmed, so node 1 will
    // try to resume; an event sent meanwhile waits in the session.
    drop(first);
    wait_until("node 1 saw the connection end", || !rig.stats().connected);
    rig.send(2, TRACKED);
    let (mut stream, hello) = FakePeer::accept_initial(&listener);
    assert_eq!(
        hello.peer_virtual_id,
        session_id(1000),
        "a resume: {hello:?}"
    );
    use std::io::Write;
    stream
        .write_all(&agentbox::interconnect::wire::InitialPacket::empty_reply().encode())
        .unwrap();
    // Refused: node 1 starts a new session at once, and event 2 goes out in it.
    let (stream, hello) = FakePeer::accept_initial(&listener);
    let mut second = FakePeer::accept_new(stream, &hello, session_id(2000));
    let mut got = Vec::new();
    second
        .read_until(SOON, |p| {
            got.extend(events_of(&p.packet.payload).into_iter().map(|d| d.cookie));
            !got.is_empty()
        })
        .unwrap();
    assert_eq!(got, vec![2], "the event sent after the restart");
    let st = rig.stats();
    assert_eq!(st.sessions_ended, 1, "{st:?}");
    // Event 1 went to the old peer (unsure, so a dead letter only); event 2 was delivered.
    assert!(rig.rx.try_recv().is_err(), "no Undelivered");
    rig.wrapped.stop_then_join().unwrap();
}

#[test]
fn the_default_inbound_limit_takes_an_event_over_64_mib() {
    const SIZE: usize = 65 << 20;
    let rig = Rig::start(closed_port(), |s| s);
    let mut peer =
        FakePeer::connect(rig.addr, request(session_id(1000), 1, false)).expect("handshake");
    // An event of a type node 1 has no codec for: the recorder sees its type only.
    let body = vec![0x5A; SIZE];
    let d = rig.descriptor(0x7000_0001, 1, 77);
    let payload = event_payload(&d, 1, &body, Packet::MAX_PAYLOAD - 4);
    drop(body);
    let mut serial = 0;
    let mut at = 0;
    while at < payload.len() {
        let n = (payload.len() - at).min(Packet::MAX_PAYLOAD);
        serial += 1;
        peer.send(&Packet::data(0, serial, payload[at..at + n].to_vec()))
            .unwrap();
        at += n;
    }
    // Waits for the event, or fails as soon as the session ends instead.
    let deadline = Instant::now() + PATIENCE;
    let got = loop {
        if let Ok(got) = rig.rx.recv_timeout(Duration::from_millis(100)) {
            break got;
        }
        let st = rig.stats();
        assert_eq!(
            st.sessions_ended, 0,
            "the 65 MiB event ended the session: {st:?}"
        );
        assert!(
            Instant::now() < deadline,
            "the 65 MiB event did not come: {st:?}"
        );
    };
    assert_eq!((got.what, got.cookie), (What::Other(0x7000_0001), 77));
    // The reader counts a batch after handing it over.
    wait_until("events_in counts it", || rig.stats().events_in == 1);
    assert_eq!(rig.stats().sessions_ended, 0);
    rig.wrapped.stop_then_join().unwrap();
}

#[test]
fn partial_events_of_all_channels_together_are_held_to_four_times_the_limit() {
    const MAX: usize = 1024;
    let rig = Rig::start(closed_port(), |s| {
        s.max_event_size(MAX)
            .lost_connection_timeout(Duration::from_secs(3600))
    });
    let mut peer =
        FakePeer::connect(rig.addr, request(session_id(1000), 1, false)).expect("handshake");
    // Five channels each start an event of 900 bytes (each within the limit); the fifth
    // takes the total over 4 × 1024.
    for ch in 0..5u16 {
        let part = agentbox::interconnect::wire::ChannelPart::inline(ch, vec![1; 900]).encode();
        let _ = peer.send(&Packet::data(0, u64::from(ch) + 1, part));
    }
    assert!(peer.closed_by_node(SOON), "node 1 kept the connection");
    wait_until("the session ends", || rig.stats().sessions_ended == 1);
    let st = rig.stats();
    assert_eq!(
        st.last_error,
        Some(SessionError::OversizedEvent {
            size: 4500,
            max: 4 * MAX
        }),
        "{st:?}"
    );
    rig.wrapped.stop_then_join().unwrap();
}

#[test]
fn xxh3_checksums_when_the_peer_asks_for_them() {
    let rig = Rig::start(closed_port(), |s| s);
    let mut peer =
        FakePeer::connect(rig.addr, request(session_id(1000), 1, true)).expect("handshake");
    let success = peer.success.clone().unwrap();
    assert_eq!(success.use_xxhash, Some(true), "{success:?}");
    assert_eq!(peer.mode, PacketChecksum::Xxh3);
    // YDB's fields of a success.
    assert_eq!(success.auth_only, Some(false), "{success:?}");
    assert!(success.rdma.is_some(), "RdmaErr: {success:?}");
    // Our XXH3 packet is taken and confirmed in XXH3 packets (read_until decodes XXH3).
    peer.send(&Packet::data(0, 1, rig.ping_payload(5))).unwrap();
    peer.read_until(SOON, |p| p.packet.confirm >= 1).unwrap();
    assert_eq!(next_within(&rig.rx, SOON, "Ping(5)").what, What::Ping(5));
    // A CRC32C packet is now a checksum error: the connection closes (the session stays,
    // to be resumed) and its event is not delivered.
    let crc = Packet::data(0, 2, rig.ping_payload(6)).encode();
    std::io::Write::write_all(&mut peer.stream, &crc).unwrap();
    assert!(peer.closed_by_node(SOON));
    let st = rig.stats();
    assert_eq!((st.events_in, st.sessions_ended), (1, 0), "{st:?}");
    assert!(rig.rx.try_recv().is_err(), "the CRC32C packet's event came");
    rig.wrapped.stop_then_join().unwrap();
}

#[test]
fn the_node_s_request_carries_the_fields_ydb_always_sets() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let rig = Rig::start(listener.local_addr().unwrap().port(), |s| {
        s.cluster_uuid("c-1")
    });
    rig.send(1, EventFlags::empty());
    let (stream, hello) = FakePeer::accept_initial(&listener);
    let peer = FakePeer::accept_new(stream, &hello, session_id(1000));
    let r = peer.request.clone().unwrap();
    assert_eq!(r.request_xxhash, Some(true), "{r:?}");
    assert_eq!(r.request_xdc_shuffle, Some(true), "{r:?}");
    assert_eq!(r.request_auth_only, Some(false), "{r:?}");
    assert_eq!(r.handshake_id.as_ref().map(Vec::len), Some(32), "{r:?}");
    assert_eq!(r.uuid.as_deref(), Some("c-1"), "{r:?}");
    assert_eq!(peer.mode, PacketChecksum::Xxh3);
    rig.wrapped.stop_then_join().unwrap();
}

#[test]
fn a_lone_ping_request_is_answered_at_once_and_the_rtt_is_the_measured_one() {
    // Every timer of node 1 is an hour away: only a wake-up answers a ping.
    let hour = Duration::from_secs(3600);
    let rig = Rig::start(closed_port(), |s| {
        s.ping_period(hour)
            .dead_peer_timeout(hour)
            .lost_connection_timeout(hour)
    });
    let mut peer =
        FakePeer::connect(rig.addr, request(session_id(1000), 1, false)).expect("handshake");
    // Node 1's first ping comes at once; we answer it 300 ms late.
    let mut stamp = None;
    peer.read_until(SOON, |p| match p.kind() {
        PacketKind::PingRequest { stamp: s } => {
            stamp = Some(s);
            true
        }
        _ => false,
    })
    .unwrap();
    let delay = Duration::from_millis(300);
    std::thread::sleep(delay);
    peer.send(&Packet::ping_response(0, stamp.unwrap()))
        .unwrap();
    wait_until("an RTT figure", || rig.stats().rtt.is_some());
    let rtt = rig.stats().rtt.unwrap();
    assert!(rtt >= delay && rtt < SOON + delay, "rtt {rtt:?}");
    // Let node 1's writer fall asleep, then ask: the answer does not wait for a timer.
    std::thread::sleep(Duration::from_millis(200));
    peer.send(&Packet::ping_request(0, 0xABC)).unwrap();
    peer.read_until(SOON, |p| {
        p.kind() == PacketKind::PingResponse { stamp: 0xABC }
    })
    .expect("the ping answered while every timer of node 1 is an hour away");
    rig.wrapped.stop_then_join().unwrap();
}

#[test]
fn pings_go_out_with_traffic_at_most_once_a_second() {
    let rig = Rig::start(closed_port(), |s| {
        s.ping_period(Duration::from_secs(3600))
            .lost_connection_timeout(Duration::from_secs(3600))
    });
    let mut peer =
        FakePeer::connect(rig.addr, request(session_id(1000), 1, false)).expect("handshake");
    peer.read_until(SOON, |p| matches!(p.kind(), PacketKind::PingRequest { .. }))
        .unwrap();
    // More than a second later, traffic brings a ping with it (the idle period is an hour).
    std::thread::sleep(Duration::from_millis(1200));
    rig.send(1, EventFlags::empty());
    peer.read_until(SOON, |p| matches!(p.kind(), PacketKind::PingRequest { .. }))
        .expect("a ping with the traffic");
    // Under steady traffic for 2.5 s, no more than one ping a second.
    let start = Instant::now();
    let mut pings = 0;
    let mut n = 2;
    let mut confirm_to = 0;
    while start.elapsed() < Duration::from_millis(2500) {
        rig.send(n, EventFlags::empty());
        n += 1;
        let _ = peer.read_until(Duration::from_millis(20), |p| {
            if p.packet.is_data() {
                confirm_to = confirm_to.max(p.packet.serial);
            }
            pings += usize::from(matches!(p.kind(), PacketKind::PingRequest { .. }));
            false
        });
        let _ = peer.send(&Packet::pure_confirm(confirm_to));
    }
    let elapsed = start.elapsed().as_secs_f64();
    assert!(
        pings as f64 <= elapsed + 1.0,
        "{pings} pings in {elapsed:.1} s of traffic"
    );
    rig.wrapped.stop_then_join().unwrap();
}
