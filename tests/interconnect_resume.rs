//! Resume across broken connections: every connection between two nodes goes through a
//! TCP proxy of the test that cuts it after 200–400 ms (both directions: node 1's entry
//! for node 2 and node 2's entry for node 1 are such proxies, since after a cut both sides
//! try to reconnect). A stream of 20 000 numbered events on three channels from node 1 to
//! node 2 keeps going until the proxies have cut several connections and the session has
//! resumed; every event must arrive exactly once and in order on its channel, within one
//! session.

#![cfg(feature = "interconnect")]

mod interconnect_support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use agentbox::actors::*;
use agentbox::interconnect::InterconnectSetup;
use agentbox::{ActorId, WrappedEnv};
use interconnect_support::*;

const N: u64 = 20_000;
const CHANNELS: u16 = 3;
/// Events sent in one burst while waiting for cuts.
const BURST: u64 = 100;
/// Events kept back until the cuts and resumes have happened.
const RESERVE: u64 = 2_000;
const CUTS: usize = 5;

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

#[test]
fn a_stream_survives_cut_connections_exactly_once_and_in_order_per_channel() {
    let w = WrappedEnv::new(|_| {}).unwrap();
    let (l1, p1) = bind();
    let (l2, p2) = bind();
    let to2 = CuttingProxy::start(loopback(p2));
    let to1 = CuttingProxy::start(loopback(p1));
    let setup = |own: (u32, u16), peer: (u32, u16), l| {
        remote_events(InterconnectSetup::new(names(&[own, peer])).listener(l))
            // Not needed for the cuts (they are seen at once), but a stuck connection
            // must not stall the test for the default 10 s.
            .dead_peer_timeout(Duration::from_secs(3))
            .ping_period(Duration::from_millis(500))
            // The session must outlive any gap between connections.
            .lost_connection_timeout(Duration::from_secs(30))
    };
    let node1 = start_node(w.environment(), 1, setup((1, p1), (2, to2.port()), l1));
    let node2 = start_node(w.environment(), 2, setup((2, p2), (1, to1.port()), l2));
    let (tx, rx) = channel();
    let sink = node2.system.register(recorder(tx)).unwrap();

    let mut next = [0u64; CHANNELS as usize];
    let mut sent = 0u64;
    let mut send = |count: u64| {
        for _ in 0..count {
            let ch = (sent % u64::from(CHANNELS)) as u16;
            let n = next[ch as usize];
            next[ch as usize] += 1;
            let len = (n as usize * 7) % 64;
            let flags = EventFlags::empty().with_channel(ch);
            node1
                .system
                .send_with(sink, ActorId::EMPTY, Seq::new(ch, n, len), flags, n);
            sent += 1;
        }
    };

    // Bursts until the proxies have cut at least CUTS connections and node 1's session has
    // resumed as often; the rest of the stream only then.
    let deadline = Instant::now() + PATIENCE;
    let mut streamed = 0;
    loop {
        let cuts = to1.cuts() + to2.cuts();
        let resumes = node1.ic.session_stats(2).unwrap().reconnects;
        if cuts >= CUTS && resumes >= CUTS as u64 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "only {cuts} cuts and {resumes} resumes so far"
        );
        if streamed < N - RESERVE {
            send(BURST);
            streamed += BURST;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    send(N - streamed);
    // A last event per channel: anything repeated would come before it.
    for _ in 0..CHANNELS {
        send(1);
    }
    let total = N + u64::from(CHANNELS);

    let mut per_channel: BTreeMap<u16, Vec<u64>> = BTreeMap::new();
    let mut got = 0;
    let deadline = Instant::now() + PATIENCE;
    while got < total {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(g) = rx.recv_timeout(left) else {
            panic!(
                "{got} of {total} arrived; node 1: {:?}; node 2: {:?}",
                node1.ic.session_stats(2),
                node2.ic.session_stats(1)
            );
        };
        let What::Seq {
            channel,
            n,
            body_ok,
            ..
        } = g.what
        else {
            panic!("unexpected {g:?}");
        };
        assert!(body_ok, "damaged body: {g:?}");
        assert_eq!((g.flags.channel(), g.cookie), (channel, n), "{g:?}");
        per_channel.entry(channel).or_default().push(n);
        got += 1;
    }
    for ch in 0..CHANNELS {
        let want: Vec<u64> = (0..next[ch as usize]).collect();
        let seen = per_channel.remove(&ch).unwrap_or_default();
        if seen != want {
            let first_bad = seen.iter().zip(&want).position(|(a, b)| a != b);
            panic!(
                "channel {ch}: {} events, {} expected; first difference at {first_bad:?}",
                seen.len(),
                want.len()
            );
        }
    }
    assert!(rx.try_recv().is_err());

    // The reader thread counts a batch of events after handing them over: the counts
    // catch up with what the recorder saw a moment later.
    let deadline = Instant::now() + PATIENCE;
    let (s1, s2) = loop {
        let s1 = node1.ic.session_stats(2).unwrap();
        let s2 = node2.ic.session_stats(1).unwrap();
        if s2.events_in >= total || Instant::now() >= deadline {
            break (s1, s2);
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    println!(
        "cuts {} + {}, accepted {} + {}\nnode 1: {s1:?}\nnode 2: {s2:?}",
        to1.cuts(),
        to2.cuts(),
        to1.accepted(),
        to2.accepted()
    );
    assert!(s1.reconnects >= CUTS as u64, "{s1:?}");
    assert!(s2.reconnects > 0, "{s2:?}");
    // One session from start to end: the resumes did not start new ones.
    assert_eq!((s1.sessions_ended, s2.sessions_ended), (0, 0));
    assert_eq!(s1.events_out, total);
    assert_eq!(s2.events_in, total);
    w.stop_then_join().unwrap();
}
