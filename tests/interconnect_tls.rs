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
use agentbox::interconnect::wire::{
    EventDescriptor, ExBlock, HandshakeReply, HandshakeRequest, InitialPacket, Packet,
    PacketChecksum, WireError,
};
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

/// Node `stranger` (with `its_tls`) sends to node `host` (the cluster's certificate; it
/// checks host names if `check_names`): refused, nothing delivered.
fn stranger_is_refused(
    host_id: u32,
    stranger_id: u32,
    its_tls: TlsSetup,
    ca: &Ca,
    check_names: bool,
) {
    let host_tls = ca.node(&host(host_id), EncryptionMode::Required, ca);
    let host_tls = if check_names {
        host_tls.check_host_names()
    } else {
        host_tls
    };
    let w = WrappedEnv::new(|_| {}).unwrap();
    let (lh, ph) = bind();
    let (ls, ps) = bind();
    let names = tls_names(&[(host_id, ph), (stranger_id, ps)]);
    let host_node = start_node(
        w.environment(),
        host_id,
        remote_events(InterconnectSetup::new(names.clone()).listener(lh)).tls(host_tls),
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
        false,
    );
    stranger_is_refused(
        2,
        1,
        other.node(&host(1), EncryptionMode::Required, &ca),
        &ca,
        false,
    );
}

#[test]
fn with_host_names_checked_a_certificate_for_another_host_is_refused_whichever_side_is_the_tls_server(
) {
    let ca = Ca::new();
    // Signed by the cluster's CA, but for node 3's host.
    let other = || ca.node(&host(3), EncryptionMode::Required, &ca);
    stranger_is_refused(1, 2, other(), &ca, true);
    stranger_is_refused(2, 1, other(), &ca, true);
}

/// YDB's rule: a peer's certificate is checked against the cluster's CA, not the host
/// name, so nodes whose certificates name no host of theirs talk (both ways, whichever
/// side is the TLS server); checking host names is an option.
#[test]
fn by_default_a_certificate_of_the_ca_is_accepted_whatever_host_it_names() {
    let ca = Ca::new();
    let tls = |_| {
        ca.node(
            "not-a-host-of-this-cluster.example",
            EncryptionMode::Required,
            &ca,
        )
    };
    assert!(!tls(0).checks_host_names());
    assert!(tls(0).check_host_names().checks_host_names());
    let w = WrappedEnv::new(|_| {}).unwrap();
    let (n1, n2, _proxy) = pair_through_proxy(&w, |id, s| s.tls(tls(id)));
    let (to2, rx2) = sink(&n2, 2);
    let (to1, rx1) = sink(&n1, 1);
    deliver(&n1, to2, &rx2, 0..3);
    deliver(&n2, to1, &rx1, 0..3);
    for (node, peer) in [(&n1, 2), (&n2, 1)] {
        let s = node.ic.session_stats(peer).unwrap();
        assert!(s.tls && s.connected, "{s:?}");
    }
    w.stop_then_join().unwrap();
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

/// A YDB peer under TLS, written from YDB's rules: node 2, whose certificate (for
/// `node-2`) the cluster's CA signed; it connects to node 1 for a new session and is the
/// TLS client (the higher node id). Its packets carry 0 in their checksum field.
struct TlsPeer {
    tls: rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
    /// Our session id.
    ours: ActorId,
    /// The data serial of our last packet.
    serial: u64,
    inbuf: Vec<u8>,
}

/// The rustls client of node 2 (the fake peer): its certificate, the CA.
fn peer_client(ca: &Ca) -> std::sync::Arc<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec![host(2)]).unwrap();
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let cert = params.signed_by(&key, &ca.0).unwrap();
    let chain = vec![CertificateDer::from_pem_slice(cert.pem().as_bytes()).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca.0.pem().as_bytes()).unwrap())
        .unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .unwrap();
    std::sync::Arc::new(config)
}

fn read_exact_n(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    s.read_exact(&mut b).unwrap();
    b
}

impl TlsPeer {
    /// A new session (our session `local`, also the request's serial) with node 1 at
    /// `port`, TLS completed on our side (the client's side ends before the server's).
    fn connect(port: u16, client: &std::sync::Arc<rustls::ClientConfig>, local: u64) -> TlsPeer {
        let ours = ActorId::new(2, local, 0);
        let mut sock = TcpStream::connect(("127.0.0.1", port)).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        sock.set_write_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let _ = sock.set_nodelay(true);
        sock.write_all(&InitialPacket::new_session(ours).encode())
            .unwrap();
        let reply = InitialPacket::decode(&read_exact_n(&mut sock, InitialPacket::LEN)).unwrap();
        assert_eq!(reply.0, InitialPacket::empty_reply());
        let request = HandshakeRequest {
            sender_host_name: Some(host(2)),
            receiver_host_name: Some(host(1)),
            require_encryption: Some(true),
            ..fake_peer::request(ours, 1, true)
        };
        sock.write_all(&ExBlock::new(request.encode()).encode())
            .unwrap();
        let mut head = read_exact_n(&mut sock, ExBlock::HEADER_LEN);
        let size = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as usize;
        head.extend(read_exact_n(&mut sock, size));
        let block = ExBlock::decode(&head).unwrap().0;
        let reply = HandshakeReply::decode(&block.payload).unwrap().0;
        let success = reply.success.expect("a success");
        assert_eq!(success.start_encryption, Some(true), "{success:?}");
        let name = rustls::pki_types::ServerName::try_from(host(1)).unwrap();
        let mut conn = rustls::ClientConnection::new(client.clone(), name).unwrap();
        while conn.is_handshaking() {
            conn.complete_io(&mut sock).unwrap();
        }
        TlsPeer {
            tls: rustls::StreamOwned::new(conn, sock),
            ours,
            serial: 0,
            inbuf: Vec::new(),
        }
    }

    /// Sends an event of a type node 1 has no codec for (its handler gets the bytes) to
    /// `to`, with `cookie`, in the next data packet, checksum field 0.
    fn send_event(&mut self, to: ActorId, cookie: u64) {
        let body = cookie.to_le_bytes();
        let d = EventDescriptor {
            event_type: NoCodec::EVENT_TYPE,
            flags: 0,
            recipient: to,
            sender: ActorId::new(2, 9, 0),
            cookie,
            trace_id: [0; 28],
            payload_checksum: 0,
        };
        self.serial += 1;
        let packet = Packet::data(0, self.serial, fake_peer::event_payload(&d, 0, &body, 64));
        let bytes = packet.encode_with(PacketChecksum::Tls).unwrap();
        assert_eq!(&bytes[16..20], &[0; 4]);
        self.tls.write_all(&bytes).unwrap();
        self.tls.flush().unwrap();
    }

    /// The node's next packet, with the checksum field as it came.
    fn next_packet(&mut self) -> (Packet, u32) {
        let mut buf = [0u8; 16 << 10];
        loop {
            if self.inbuf.len() >= Packet::HEADER_LEN {
                let field = u32::from_le_bytes(self.inbuf[16..20].try_into().unwrap());
                match Packet::decode_with(&self.inbuf, PacketChecksum::Tls) {
                    Ok((p, n)) => {
                        self.inbuf.drain(..n);
                        return (p, field);
                    }
                    Err(WireError::Truncated { .. }) => {}
                    Err(e) => panic!("a bad packet from the node: {e}"),
                }
            }
            let n = self.tls.read(&mut buf).expect("the node's packets");
            assert!(n > 0, "the node closed the connection");
            self.inbuf.extend_from_slice(&buf[..n]);
        }
    }
}

/// Node 1 with TLS required (certificate for `node-1`) and the sink; node 2 is a
/// [`TlsPeer`].
fn node_for_tls_peer(w: &WrappedEnv, ca: &Ca) -> (Node, u16) {
    let (l1, p1) = bind();
    let (_l2, p2) = bind();
    let n1 = start_node(
        w.environment(),
        1,
        remote_events(InterconnectSetup::new(tls_names(&[(1, p1), (2, p2)])).listener(l1))
            .tls(ca.node(&host(1), EncryptionMode::Required, ca))
            .ping_period(Duration::from_millis(100)),
    );
    (n1, p1)
}

/// YDB's rule under TLS: the packet checksum field is 0 both ways. The node writes 0 in
/// every packet it sends (data, confirms, pings; the handshake asked for XXH3), and takes
/// the peer's packets with 0.
#[test]
fn under_tls_packets_carry_a_zero_checksum_both_ways() {
    let ca = Ca::new();
    let w = WrappedEnv::new(|_| {}).unwrap();
    let (n1, p1) = node_for_tls_peer(&w, &ca);
    let (to, rx) = sink(&n1, 1);
    let mut peer = TlsPeer::connect(p1, &peer_client(&ca), 100);
    peer.send_event(to, 7);
    assert_eq!(next(&rx, "the peer's event"), (NoCodec::EVENT_TYPE, 7));
    // The node sends an event to node 2, then confirms, pings: every packet has 0.
    n1.system.send_with(
        ActorId::new(2, 5, 0),
        ActorId::EMPTY,
        Ping(1),
        EventFlags::empty(),
        11,
    );
    let (mut data, mut confirmed, mut seen) = (false, false, 0);
    while !(data && confirmed) || seen < 3 {
        let (p, field) = peer.next_packet();
        assert_eq!(field, 0, "a packet with a checksum under TLS: {p:?}");
        data |= fake_peer::events_of(&p.payload)
            .iter()
            .any(|d| d.cookie == 11);
        confirmed |= p.confirm >= 1;
        seen += 1;
        assert!(seen < 1000, "no data packet and confirm among {seen}");
    }
    let s = n1.ic.session_stats(2).unwrap();
    assert_eq!(
        (s.tls, s.connected, s.peer_session_id),
        (true, true, peer.ours)
    );
    w.stop_then_join().unwrap();
}

/// YDB's peer starts a new session while its old one is live and closes the old
/// connection right after its own side of the TLS handshake (YDB ends the old session
/// when it accepts the new request). The new session must hold: what the peer sends on
/// it arrives, every time.
#[test]
fn a_new_session_whose_peer_closes_the_old_connection_right_after_tls_holds() {
    let ca = Ca::new();
    let w = WrappedEnv::new(|_| {}).unwrap();
    let (n1, p1) = node_for_tls_peer(&w, &ca);
    let (to, rx) = sink(&n1, 1);
    let client = peer_client(&ca);
    let mut old = TlsPeer::connect(p1, &client, 1000);
    old.send_event(to, 1000);
    assert_eq!(next(&rx, "the first event"), (NoCodec::EVENT_TYPE, 1000));
    for k in 1001..1031 {
        let mut new = TlsPeer::connect(p1, &client, k);
        // Our side of TLS is done: the old connection goes.
        let _ = old.tls.sock.shutdown(Shutdown::Both);
        new.send_event(to, k);
        let got = next_within(&rx, SOON, "the event of the new session");
        assert_eq!(got, (NoCodec::EVENT_TYPE, k), "session {k}");
        old = new;
    }
    let s = n1.ic.session_stats(2).unwrap();
    assert_eq!((s.connected, s.peer_session_id), (true, old.ours), "{s:?}");
    w.stop_then_join().unwrap();
}
