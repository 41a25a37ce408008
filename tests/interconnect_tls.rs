//! TLS on the interconnect (feature `tls`), as YDB runs it: the modes' rules, events over
//! TLS (encrypted on the wire, resumed across cut connections), certificates checked
//! against the cluster's CA and the name service's host names, and a resume with session
//! ids read off the wire refused. The CA and the node certificates are made at test time.

#![cfg(feature = "tls")]

mod interconnect_support;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use agentbox::actors::*;
use agentbox::interconnect::wire::{ExBlock, HandshakeReply, InitialPacket, Packet};
use agentbox::interconnect::{
    EncryptionMode, HandshakeError, InterconnectSetup, NameService, NodeAddress, Refusal,
    SessionError, TlsSetup,
};
use agentbox::{ActorId, WrappedEnv};
use interconnect_support::*;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

/// A certificate authority made for the test.
struct Ca(CertifiedIssuer<'static, KeyPair>);

impl Ca {
    fn new() -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        Ca(CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap())
    }

    /// A node's setup in `mode`: a certificate for `host` signed by this CA, and `trusted`
    /// as the cluster's CA.
    fn node(&self, host: &str, mode: EncryptionMode, trusted: &Ca) -> TlsSetup {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec![host.to_owned()]).unwrap();
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let cert = params.signed_by(&key, &self.0).unwrap();
        TlsSetup::from_pem(
            mode,
            cert.pem().as_bytes(),
            key.serialize_pem().as_bytes(),
            trusted.0.pem().as_bytes(),
        )
        .unwrap()
    }
}

fn host(id: u32) -> String {
    format!("node-{id}")
}

/// Names of loopback nodes with host names `node-<id>`.
fn tls_names(entries: &[(u32, u16)]) -> NameService {
    entries.iter().fold(NameService::new(), |n, &(id, port)| {
        n.node(id, NodeAddress::new("127.0.0.1", port).host(host(id)))
    })
}

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

/// A body no cipher text contains by chance.
const MARKER: &[u8] = b"plain text that TLS must hide";

/// Node `from` sends `Seq`s `range` (with `MARKER` in their bodies) to `to`; each arrives.
fn deliver(from: &Node, to: ActorId, rx: &Receiver<(u32, u64)>, range: std::ops::Range<u64>) {
    for n in range {
        let mut ev = Seq::new(0, n, 0);
        ev.body = MARKER.to_vec();
        from.system
            .send_with(to, ActorId::EMPTY, ev, EventFlags::empty(), n);
        assert_eq!(next(rx, "a Seq"), (Seq::EVENT_TYPE, n));
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn tls_refusal_from(refusals: &[Refusal], node: u32) -> bool {
    refusals
        .iter()
        .any(|r| r.claimed_node == node && matches!(r.reason, HandshakeError::Tls(_)))
}

/// Nodes 1 and 2; node 1 reaches node 2 through a recording proxy. `tune` adds each
/// node's TLS (and more) to its setup.
fn pair_through_proxy(
    w: &WrappedEnv,
    tune: impl Fn(u32, InterconnectSetup) -> InterconnectSetup,
) -> (Node, Node, RecordingProxy) {
    let (l1, p1) = bind();
    let (l2, p2) = bind();
    let proxy = RecordingProxy::start(SocketAddr::from(([127, 0, 0, 1], p2)));
    let n1 = start_node(
        w.environment(),
        1,
        tune(
            1,
            remote_events(
                InterconnectSetup::new(tls_names(&[(1, p1), (2, proxy.port)])).listener(l1),
            ),
        ),
    );
    let n2 = start_node(
        w.environment(),
        2,
        tune(
            2,
            remote_events(InterconnectSetup::new(tls_names(&[(1, p1), (2, p2)])).listener(l2)),
        ),
    );
    (n1, n2, proxy)
}

#[test]
fn events_go_encrypted_between_nodes_that_require_tls_with_or_without_a_secret() {
    let ca = Ca::new();
    for secret in [false, true] {
        let w = WrappedEnv::new(|_| {}).unwrap();
        let (n1, n2, proxy) = pair_through_proxy(&w, |id, s| {
            let s = s.tls(ca.node(&host(id), EncryptionMode::Required, &ca));
            if secret {
                s.secret(b"s3cret")
            } else {
                s
            }
        });
        let (to, rx) = sink(&n2, 2);
        deliver(&n1, to, &rx, 0..20);
        let (up, _) = proxy.recorded(0);
        assert!(
            !contains(&up, MARKER),
            "an event body crossed in plain text"
        );
        for (node, peer) in [(&n1, 2), (&n2, 1)] {
            let s = node.ic.session_stats(peer).unwrap();
            assert!(s.tls && s.connected, "secret {secret}: {s:?}");
        }
        w.stop_then_join().unwrap();
    }
}

#[test]
fn without_tls_the_same_events_cross_in_plain_text() {
    // The check above means something: the marker is visible when TLS is off.
    let w = WrappedEnv::new(|_| {}).unwrap();
    let (n1, n2, proxy) = pair_through_proxy(&w, |_, s| s);
    let (to, rx) = sink(&n2, 2);
    deliver(&n1, to, &rx, 0..2);
    let (up, _) = proxy.recorded(0);
    assert!(contains(&up, MARKER));
    assert!(!n1.ic.session_stats(2).unwrap().tls);
    w.stop_then_join().unwrap();
}

#[test]
fn the_modes_follow_ydb_s_rules() {
    let ca = Ca::new();
    let mode = |m: Option<EncryptionMode>| m;
    // (node 1's mode, node 2's mode, TLS or refused); `None`: no TLS setup at all.
    let cases = [
        (mode(Some(EncryptionMode::Optional)), None, Some(false)),
        (
            Some(EncryptionMode::Optional),
            Some(EncryptionMode::Optional),
            Some(true),
        ),
        (
            Some(EncryptionMode::Required),
            Some(EncryptionMode::Optional),
            Some(true),
        ),
        (
            Some(EncryptionMode::Disabled),
            Some(EncryptionMode::Optional),
            Some(false),
        ),
        (Some(EncryptionMode::Required), None, None),
        (None, Some(EncryptionMode::Required), None),
    ];
    for (m1, m2, want) in cases {
        let w = WrappedEnv::new(|_| {}).unwrap();
        let (n1, n2, _proxy) = pair_through_proxy(&w, |id, s| {
            let s = s
                .lost_connection_timeout(Duration::from_secs(3))
                .handshake_timeout(Duration::from_secs(5));
            match if id == 1 { m1 } else { m2 } {
                Some(m) => s.tls(ca.node(&host(id), m, &ca)),
                None => s,
            }
        });
        let (to, rx) = sink(&n2, 2);
        let (tx, back) = channel();
        let me = n1.system.register(recorder(tx)).unwrap();
        n1.system
            .send_with(to, me, Ping(1), EventFlags::TRACK_DELIVERY, 1);
        match want {
            Some(tls) => {
                assert_eq!(
                    next(&rx, "the Ping"),
                    (Ping::EVENT_TYPE, 1),
                    "{m1:?}/{m2:?}"
                );
                assert_eq!(n1.ic.session_stats(2).unwrap().tls, tls, "{m1:?}/{m2:?}");
            }
            None => {
                let got = next(&back, "the Undelivered");
                assert!(
                    matches!(got.what, What::Undelivered(_)),
                    "{m1:?}/{m2:?}: {got:?}"
                );
                let s = n1.ic.session_stats(2).unwrap();
                assert!(
                    matches!(
                        s.last_error,
                        Some(SessionError::Handshake(
                            HandshakeError::Tls(_) | HandshakeError::Refused(_)
                        ))
                    ),
                    "{m1:?}/{m2:?}: {s:?}"
                );
                assert!(rx.try_recv().is_err());
            }
        }
        w.stop_then_join().unwrap();
    }
}

#[test]
fn a_tls_session_resumes_cut_connections_exactly_once_and_in_order() {
    let ca = Ca::new();
    let w = WrappedEnv::new(|_| {}).unwrap();
    let (l1, p1) = bind();
    let (l2, p2) = bind();
    let proxy = CuttingProxy::start(SocketAddr::from(([127, 0, 0, 1], p2)));
    let tls = |id: u32| ca.node(&host(id), EncryptionMode::Required, &ca);
    let n1 = start_node(
        w.environment(),
        1,
        remote_events(
            InterconnectSetup::new(tls_names(&[(1, p1), (2, proxy.port())])).listener(l1),
        )
        .tls(tls(1)),
    );
    // Node 2 can only accept: every reconnect is node 1's resume through the proxy.
    let (closed, closed_port) = bind();
    drop(closed);
    let n2 = start_node(
        w.environment(),
        2,
        remote_events(InterconnectSetup::new(tls_names(&[(1, closed_port), (2, p2)])).listener(l2))
            .tls(tls(2)),
    );
    let (to, rx) = sink(&n2, 2);
    let deadline = Instant::now() + PATIENCE;
    let mut n = 0u64;
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
    assert!(s.reconnects >= 1 && s.tls, "{s:?}");
    assert_eq!((s.sessions_ended, s.events_in), (0, n), "{s:?}");
    w.stop_then_join().unwrap();
}

/// Node `stranger` (with `its_tls`) sends to node `host` (the cluster's certificate):
/// refused, nothing delivered. Returns the host's refusals.
fn stranger_is_refused(host_id: u32, stranger_id: u32, its_tls: TlsSetup, ca: &Ca) {
    let w = WrappedEnv::new(|_| {}).unwrap();
    let (lh, ph) = bind();
    let (ls, ps) = bind();
    let names = tls_names(&[(host_id, ph), (stranger_id, ps)]);
    let host_node = start_node(
        w.environment(),
        host_id,
        remote_events(InterconnectSetup::new(names.clone()).listener(lh)).tls(ca.node(
            &host(host_id),
            EncryptionMode::Required,
            ca,
        )),
    );
    let stranger = start_node(
        w.environment(),
        stranger_id,
        remote_events(InterconnectSetup::new(names).listener(ls))
            .tls(its_tls)
            .lost_connection_timeout(Duration::from_secs(2)),
    );
    let (to, rx) = sink(&host_node, host_id);
    stranger
        .system
        .send_with(to, ActorId::EMPTY, Ping(1), EventFlags::empty(), 1);
    // The TLS server (the lower id) checks the client's certificate, the client the
    // server's: the host refuses, or the stranger gives up on the host's certificate.
    wait_until("the handshake fails", || {
        tls_refusal_from(&host_node.ic.refusals(), stranger_id)
            || matches!(
                stranger.ic.session_stats(host_id).unwrap().last_error,
                Some(SessionError::Handshake(HandshakeError::Tls(_)))
            )
    });
    let s = host_node.ic.session_stats(stranger_id).unwrap();
    assert_eq!((s.events_in, s.connected), (0, false), "{s:?}");
    assert!(rx.try_recv().is_err(), "the stranger's event was delivered");
    w.stop_then_join().unwrap();
}

#[test]
fn a_certificate_of_another_ca_is_refused_whichever_side_is_the_tls_server() {
    let (ca, other) = (Ca::new(), Ca::new());
    // The stranger trusts the cluster's CA, but its certificate is the other one's.
    stranger_is_refused(
        1,
        2,
        other.node(&host(2), EncryptionMode::Required, &ca),
        &ca,
    );
    stranger_is_refused(
        2,
        1,
        other.node(&host(1), EncryptionMode::Required, &ca),
        &ca,
    );
}

#[test]
fn a_certificate_for_another_host_is_refused_whichever_side_is_the_tls_server() {
    let ca = Ca::new();
    // Signed by the cluster's CA, but for node 3's host.
    stranger_is_refused(1, 2, ca.node(&host(3), EncryptionMode::Required, &ca), &ca);
    stranger_is_refused(2, 1, ca.node(&host(3), EncryptionMode::Required, &ca), &ca);
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

#[test]
fn a_resume_with_session_ids_read_off_the_wire_cannot_take_a_tls_session() {
    let ca = Ca::new();
    let w = WrappedEnv::new(|_| {}).unwrap();
    let (n1, n2, proxy) = pair_through_proxy(&w, |id, s| {
        s.tls(ca.node(&host(id), EncryptionMode::Required, &ca))
    });
    let (to, rx) = sink(&n2, 2);
    deliver(&n1, to, &rx, 0..3);

    // The session ids, off the wire (the handshake's frames come before TLS).
    let (up, down) = proxy.recorded(0);
    let ours = InitialPacket::decode(&up).unwrap().0.self_virtual_id;
    let block = ExBlock::decode(&down[InitialPacket::LEN..]).unwrap().0;
    let success = HandshakeReply::decode(&block.payload).unwrap().0.success;
    let theirs: ActorId = success.unwrap().sender_actor_id.parse().unwrap();
    let before = n2.ic.session_stats(1).unwrap();
    assert_eq!((before.session_id, before.peer_session_id), (theirs, ours));

    // A stranger resumes: initial packet, then plain data packets (it cannot do TLS with
    // node 1's certificate).
    let mut stranger = TcpStream::connect(("127.0.0.1", n2.ic.local_addr().port())).unwrap();
    stranger
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stranger
        .write_all(&InitialPacket::resume(ours, theirs, 3).encode())
        .unwrap();
    let data: Vec<u8> = (1..=8)
        .flat_map(|k| Packet::data(0, k, vec![0; 8]).encode())
        .collect();
    let _ = stranger.write_all(&data);
    let _ = stranger.shutdown(Shutdown::Write);
    until_closed(&mut stranger);

    // The real session goes on, on its own connection.
    let after = n2.ic.session_stats(1).unwrap();
    assert_eq!(
        (after.session_id, after.peer_session_id, after.reconnects),
        (theirs, ours, before.reconnects),
        "{after:?}"
    );
    deliver(&n1, to, &rx, 3..5);
    assert!(
        rx.try_recv().is_err(),
        "the stranger's bytes became an event"
    );
    wait_until("node 2 refuses the stranger's TLS", || {
        tls_refusal_from(&n2.ic.refusals(), 1)
    });
    w.stop_then_join().unwrap();
}

#[test]
fn two_nodes_with_tls_that_connect_to_each_other_at_once_lose_nothing() {
    let ca = Ca::new();
    let (one, two) = (
        ca.node("127.0.0.1", EncryptionMode::Required, &ca),
        ca.node("127.0.0.1", EncryptionMode::Required, &ca),
    );
    let failed = simultaneous_connects_lose_nothing(40, |id, s| {
        s.tls(if id == 1 { one.clone() } else { two.clone() })
    });
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
