//! Strangers are refused and nothing they send reaches an actor: a node of another cluster
//! (cluster ids that do not accept each other), a node with a wrong shared secret, and a
//! node whose handshake names another receiver node id than the one it reached. Each time
//! the stranger's tracked event comes back `Undelivered(Disconnected)` when its session
//! ends, the refusing node keeps a `Refusal` with the matching `HandshakeError`, and the
//! actor the event was meant for gets nothing.

#![cfg(feature = "interconnect")]

mod interconnect_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::sync::Arc;
use std::time::Duration;

use agentbox::actors::*;
use agentbox::interconnect::{
    HandshakeError, InterconnectSetup, NameService, Refusal, SessionError,
};
use agentbox::{ActorId, WrappedEnv};
use interconnect_support::*;

/// The refusing node and the stranger: ids, the names each of them has, and their setups.
struct Case {
    host_id: u32,
    stranger_id: u32,
    /// The id the stranger addresses the host's sink with.
    target_node: u32,
    host: fn(InterconnectSetup) -> InterconnectSetup,
    stranger: fn(InterconnectSetup) -> InterconnectSetup,
    /// The names of (host, stranger), from (host port, stranger port).
    names: fn(u16, u16) -> (NameService, NameService),
    refused: fn(&HandshakeError) -> bool,
}

fn same_names(host_id: u32, stranger_id: u32) -> impl Fn(u16, u16) -> (NameService, NameService) {
    move |hp, sp| {
        let n = names(&[(host_id, hp), (stranger_id, sp)]);
        (n.clone(), n)
    }
}

fn run(case: Case) {
    let w = WrappedEnv::new(|_| {}).unwrap();
    let (hl, hp) = bind();
    let (sl, sp) = bind();
    let (host_names, stranger_names) = (case.names)(hp, sp);
    let host = start_node(
        w.environment(),
        case.host_id,
        (case.host)(remote_events(
            InterconnectSetup::new(host_names).listener(hl),
        )),
    );
    let stranger_setup = remote_events(InterconnectSetup::new(stranger_names).listener(sl))
        .handshake_timeout(Duration::from_secs(5))
        .lost_connection_timeout(Duration::from_secs(2));
    let stranger = start_node(
        w.environment(),
        case.stranger_id,
        (case.stranger)(stranger_setup),
    );

    // The host's sink counts whatever it gets.
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    let sink = host
        .system
        .register(Scripted::new(move |_, ev| {
            if ev.event_type() != EV_POISON {
                c.fetch_add(1, Ordering::SeqCst);
            }
            Handled::Yes
        }))
        .unwrap();
    host.system
        .register_local_service(ActorId::service(case.host_id, b"sink").unwrap(), sink)
        .unwrap();

    let target = ActorId::service(case.target_node, b"sink").unwrap();
    let (tx, rx) = channel();
    let sender = stranger.system.register(recorder(tx)).unwrap();
    stranger
        .system
        .send_with(target, sender, Ping(1), EventFlags::TRACK_DELIVERY, 5);
    let got = next_within(&rx, SOON, "the Undelivered");
    assert_eq!(
        (got.what, got.sender, got.cookie),
        (
            What::Undelivered(Undelivered {
                source_type: Ping::EVENT_TYPE,
                reason: UndeliveredReason::Disconnected,
                unsure: false,
            }),
            target,
            5
        )
    );
    let s = stranger.ic.session_stats(case.target_node).unwrap();
    assert!(
        matches!(
            s.last_error,
            Some(SessionError::Handshake(HandshakeError::Refused(_)))
        ),
        "the stranger was refused: {s:?}"
    );
    assert_eq!((s.sessions_ended, s.events_out), (1, 0), "{s:?}");

    let mut refusals: Vec<Refusal> = Vec::new();
    wait_until("the host keeps the refusal", || {
        refusals = host.ic.refusals();
        !refusals.is_empty()
    });
    assert!(
        refusals.iter().all(|r| (case.refused)(&r.reason)
            && r.claimed_node == case.stranger_id
            && r.peer_addr.is_some_and(|a| a.ip().is_loopback())),
        "{refusals:?}"
    );
    let hs = host.ic.session_stats(case.stranger_id).unwrap();
    assert_eq!(
        (hs.events_in, hs.reconnects, hs.peer_session_id),
        (0, 0, ActorId::EMPTY),
        "{hs:?}"
    );
    assert!(!hs.connected);
    assert_eq!(count.load(Ordering::SeqCst), 0);
    assert_eq!(host.system.stats().dead_letters, 0);
    w.stop_then_join().unwrap();
}

#[test]
fn a_node_of_another_cluster_is_refused() {
    run(Case {
        host_id: 1,
        stranger_id: 2,
        target_node: 1,
        host: |s| s.cluster_uuid("a").accept_uuid("a"),
        stranger: |s| s.cluster_uuid("b").accept_uuid("b"),
        names: |hp, sp| same_names(1, 2)(hp, sp),
        refused: |e| matches!(e, HandshakeError::ClusterMismatch { peer } if peer == "b"),
    });
}

#[test]
fn a_node_with_a_wrong_secret_is_refused() {
    run(Case {
        host_id: 1,
        stranger_id: 2,
        target_node: 1,
        host: |s| s.secret(b"correct horse battery staple"),
        stranger: |s| s.secret(b"incorrect horse battery staple"),
        names: |hp, sp| same_names(1, 2)(hp, sp),
        refused: |e| matches!(e, HandshakeError::BadSecret),
    });
}

#[test]
fn a_node_that_asks_for_another_receiver_node_is_refused() {
    // The stranger (node 1) believes node 2 listens where node 3 does.
    run(Case {
        host_id: 3,
        stranger_id: 1,
        target_node: 2,
        host: |s| s,
        stranger: |s| s,
        names: |hp, sp| (names(&[(3, hp), (1, sp)]), names(&[(1, sp), (2, hp)])),
        refused: |e| {
            matches!(
                e,
                HandshakeError::WrongReceiverNode {
                    wanted: 2,
                    actual: 3
                }
            )
        },
    });
}

#[test]
fn a_node_without_the_secret_is_refused() {
    run(Case {
        host_id: 1,
        stranger_id: 2,
        target_node: 1,
        host: |s| s.secret(b"correct horse battery staple"),
        stranger: |s| s,
        names: |hp, sp| same_names(1, 2)(hp, sp),
        refused: |e| matches!(e, HandshakeError::BadSecret),
    });
}
