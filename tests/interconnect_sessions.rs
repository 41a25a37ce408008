//! Sessions between nodes in one process over loopback TCP: events by id both ways (a
//! windowed ping-pong, in order, cookies echoed), a service on a remote node,
//! `Undelivered(ActorUnknown)` from a remote node, per-channel order with large events
//! interleaved, five nodes all talking to each other, an event type without a codec
//! (`Undelivered(Unknown)`), and subscriptions to a node's session through its proxy.

#![cfg(feature = "interconnect")]

mod interconnect_support;

use std::collections::BTreeMap;
use std::sync::mpsc::channel;
use std::time::Duration;

use agentbox::actors::*;
use agentbox::interconnect::Subscribe;
use agentbox::{ActorId, WrappedEnv};
use interconnect_support::*;

fn env() -> WrappedEnv {
    WrappedEnv::new(|_| {}).unwrap()
}

#[test]
fn a_thousand_numbered_events_go_both_ways_in_order_with_their_cookies() {
    const N: u64 = 1000;
    const WINDOW: u64 = 8;
    const COOKIE: u64 = 70_000;
    let w = env();
    let nodes = cluster(w.environment(), &[1, 2], |_, s| s);
    let (seen2, pings) = channel();
    let ponger = nodes[1].system.register(echo(Some(seen2))).unwrap();
    let (seen1, pongs) = channel();
    let mut next = WINDOW;
    let pinger = Scripted::new(move |ctx, ev| {
        let _ = seen1.send(Got::of(ctx.self_id(), &ev));
        if ev.is::<Pong>() && next < N {
            ctx.send_with(ponger, Ping(next), EventFlags::empty(), COOKIE + next);
            next += 1;
        }
        Handled::Yes
    })
    .boot(move |ctx| {
        for i in 0..WINDOW {
            ctx.send_with(ponger, Ping(i), EventFlags::empty(), COOKIE + i);
        }
    });
    let pinger = nodes[0].system.register(pinger).unwrap();

    let got = take(&pongs, N as usize);
    for (i, g) in (0..N).zip(&got) {
        assert_eq!(
            (&g.what, g.cookie, g.sender, g.by),
            (&What::Pong(i), COOKIE + i, ponger, pinger),
            "pong {i}"
        );
    }
    let got = take(&pings, N as usize);
    for (i, g) in (0..N).zip(&got) {
        assert_eq!(
            (&g.what, g.cookie, g.sender, g.recipient),
            (&What::Ping(i), COOKIE + i, pinger, ponger),
            "ping {i}"
        );
    }
    let s1 = nodes[0].ic.session_stats(2).unwrap();
    let s2 = nodes[1].ic.session_stats(1).unwrap();
    assert!(s1.events_out >= N && s2.events_out >= N, "{s1:?} {s2:?}");
    assert_eq!((s1.sessions_ended, s2.sessions_ended), (0, 0));
    assert_eq!(s1.peer_session_id, s2.session_id);
    assert_eq!(s2.peer_session_id, s1.session_id);
    assert!(pongs.try_recv().is_err() && pings.try_recv().is_err());
    w.stop_then_join().unwrap();
}

/// Senders on several threads at once, in bursts and one by one: an event into an idle
/// session is written by its sender, the rest by the session's writer, one writer at a
/// time. Every event arrives, each sender's in its order.
#[test]
fn senders_on_several_threads_write_in_turn_and_each_sender_s_order_is_kept() {
    const THREADS: u64 = 4;
    const EACH: u64 = 600;
    let w = env();
    let nodes = cluster(w.environment(), &[1, 2], |_, s| s);
    let (seen, got) = channel();
    let sink = nodes[1].system.register(echo(Some(seen))).unwrap();
    let senders: Vec<_> = (0..THREADS)
        .map(|t| {
            let sys = nodes[0].system.clone();
            std::thread::spawn(move || {
                for i in 0..EACH {
                    sys.send_with(sink, ActorId::EMPTY, Ping(i), EventFlags::empty(), t);
                    // Now and then a pause: the session goes idle and the next event is
                    // written by this thread.
                    if i % 50 == (t * 7) % 50 {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                }
            })
        })
        .collect();
    for s in senders {
        s.join().unwrap();
    }
    let got = take(&got, (THREADS * EACH) as usize);
    let mut next: BTreeMap<u64, u64> = BTreeMap::new();
    for g in &got {
        let What::Ping(i) = g.what else {
            panic!("not a ping: {:?}", g.what)
        };
        let n = next.entry(g.cookie).or_insert(0);
        assert_eq!(i, *n, "sender {}: event {i} after {}", g.cookie, *n);
        *n += 1;
    }
    assert_eq!(next, (0..THREADS).map(|t| (t, EACH)).collect());
    let s1 = nodes[0].ic.session_stats(2).unwrap();
    assert_eq!(s1.sessions_ended, 0);
    assert_eq!(s1.events_out, THREADS * EACH);
    w.stop_then_join().unwrap();
}

#[test]
fn a_service_on_a_remote_node_is_reached_by_its_service_id() {
    let w = env();
    let nodes = cluster(w.environment(), &[1, 2], |_, s| s);
    let service = ActorId::service(2, b"echo").unwrap();
    let (seen2, at_echo) = channel();
    let actor = nodes[1].system.register(echo(Some(seen2))).unwrap();
    nodes[1]
        .system
        .register_local_service(service, actor)
        .unwrap();
    let (tx, rx) = channel();
    let client = nodes[0].system.register(recorder(tx)).unwrap();

    nodes[0].system.send_with(
        service,
        client,
        Ping(5),
        EventFlags::TRACK_DELIVERY.with_channel(3),
        55,
    );
    let got = next(&rx, "the pong");
    assert_eq!(
        (got.what, got.cookie, got.sender, got.flags.channel()),
        (What::Pong(5), 55, actor, 3)
    );
    let got = next(&at_echo, "the ping at the service");
    assert_eq!(
        (got.what, got.recipient, got.rewrite, got.sender, got.cookie),
        (What::Ping(5), service, actor, client, 55)
    );
    assert!(got.flags.contains(EventFlags::TRACK_DELIVERY));
    assert_eq!(got.flags.channel(), 3);
    w.stop_then_join().unwrap();
}

#[test]
fn a_tracked_event_to_an_unknown_remote_actor_comes_back_undelivered_actor_unknown() {
    let w = env();
    let nodes = cluster(w.environment(), &[1, 2], |_, s| s);
    let nobody = ActorId::new(2, 12345, 0);
    let (tx, rx) = channel();
    let sender = nodes[0].system.register(recorder(tx)).unwrap();
    nodes[0]
        .system
        .send_with(nobody, sender, Ping(1), EventFlags::TRACK_DELIVERY, 77);
    let got = next_within(&rx, SOON, "the Undelivered");
    assert_eq!(
        (got.what, got.sender, got.recipient, got.cookie),
        (
            What::Undelivered(Undelivered {
                source_type: Ping::EVENT_TYPE,
                reason: UndeliveredReason::ActorUnknown,
                unsure: false,
            }),
            nobody,
            sender,
            77
        )
    );
    assert_eq!(nodes[1].system.stats().dead_letters, 1);
    w.stop_then_join().unwrap();
}

#[test]
fn each_channel_keeps_its_order_with_large_events_interleaved() {
    const CHANNELS: u16 = 4;
    const PER_CHANNEL: u64 = 60;
    const LARGE: usize = 200 << 10;
    let w = env();
    let nodes = cluster(w.environment(), &[1, 2], |_, s| s);
    let (tx, rx) = channel();
    let sink = nodes[1].system.register(recorder(tx)).unwrap();
    let mut large = 0;
    for n in 0..PER_CHANNEL {
        for ch in 0..CHANNELS {
            // Every fourth event of channel 1 is large; the others are small.
            let len = if ch == 1 && n % 4 == 0 {
                large += 1;
                LARGE
            } else {
                (n as usize * 13 + usize::from(ch)) % 200
            };
            let flags = EventFlags::empty().with_channel(ch);
            nodes[0]
                .system
                .send_with(sink, ActorId::EMPTY, Seq::new(ch, n, len), flags, n);
        }
    }
    let got = take(&rx, (PER_CHANNEL * u64::from(CHANNELS)) as usize);
    let mut per_channel: BTreeMap<u16, Vec<u64>> = BTreeMap::new();
    let mut large_seen = 0;
    for g in &got {
        let What::Seq {
            channel,
            n,
            len,
            body_ok,
        } = g.what
        else {
            panic!("unexpected {g:?}");
        };
        assert!(body_ok, "damaged body: {g:?}");
        assert_eq!(g.flags.channel(), channel, "the channel travels: {g:?}");
        assert_eq!(g.cookie, n);
        if len == LARGE {
            large_seen += 1;
        }
        per_channel.entry(channel).or_default().push(n);
    }
    assert_eq!(large_seen, large);
    let want: Vec<u64> = (0..PER_CHANNEL).collect();
    for ch in 0..CHANNELS {
        assert_eq!(per_channel.get(&ch), Some(&want), "channel {ch}");
    }
    assert!(rx.try_recv().is_err());
    w.stop_then_join().unwrap();
}

/// Five nodes, each with a service `sink`; every node sends `EACH` greetings to every
/// other node's sink, all nodes at once; all greetings arrive, in order per pair, and no
/// session ends. With `connect_first`, the sessions are opened one side at a time first.
fn five_nodes_greet_each_other(connect_first: bool) {
    const EACH: u32 = 10;
    let ids = [1, 2, 3, 4, 5];
    let w = env();
    let nodes = cluster(w.environment(), &ids, |_, s| s);
    let (tx, rx) = channel();
    for (node, &id) in nodes.iter().zip(&ids) {
        let sink = node.system.register(recorder(tx.clone())).unwrap();
        node.system
            .register_local_service(ActorId::service(id, b"sink").unwrap(), sink)
            .unwrap();
    }
    if connect_first {
        // Each session is opened by its lower node alone (a subscription makes it
        // connect), so that no two nodes connect to each other at once.
        let (ctx, crx) = channel();
        for (i, node) in nodes.iter().enumerate() {
            let watcher = node.system.register(recorder(ctx.clone())).unwrap();
            for &peer in &ids[i + 1..] {
                node.system.send_with(
                    ActorId::interconnect_proxy(peer),
                    watcher,
                    Subscribe,
                    EventFlags::empty(),
                    u64::from(peer),
                );
            }
        }
        for g in take(&crx, ids.len() * (ids.len() - 1) / 2) {
            assert_eq!(g.what, What::Connected(g.cookie as u32), "{g:?}");
        }
    }
    // Every node greets every other, all at once.
    let senders: Vec<_> = nodes
        .iter()
        .zip(ids)
        .map(|(node, from)| {
            let system = node.system.clone();
            std::thread::spawn(move || {
                for n in 0..EACH {
                    for to in ids.into_iter().filter(|&to| to != from) {
                        let sink = ActorId::service(to, b"sink").unwrap();
                        system.send_with(
                            sink,
                            ActorId::EMPTY,
                            Hello { from, to, n },
                            EventFlags::empty(),
                            u64::from(n),
                        );
                    }
                }
            })
        })
        .collect();
    for s in senders {
        s.join().unwrap();
    }
    let total = ids.len() * (ids.len() - 1) * EACH as usize;
    let mut per_pair: BTreeMap<(u32, u32), Vec<u32>> = BTreeMap::new();
    let mut count = 0;
    while count < total {
        let Ok(g) = rx.recv_timeout(PATIENCE) else {
            let stats: Vec<_> = nodes.iter().flat_map(|n| n.ic.stats()).collect();
            panic!("{count} of {total} arrived: {per_pair:?}\n{stats:#?}");
        };
        let What::Hello(h) = g.what else {
            panic!("unexpected {g:?}");
        };
        assert_eq!(g.by.node_id(), h.to, "{g:?}");
        per_pair.entry((h.from, h.to)).or_default().push(h.n);
        count += 1;
    }
    let want: Vec<u32> = (0..EACH).collect();
    for from in ids {
        for to in ids.into_iter().filter(|&to| to != from) {
            assert_eq!(per_pair.get(&(from, to)), Some(&want), "{from} -> {to}");
        }
    }
    for node in &nodes {
        for s in node.ic.stats() {
            assert_eq!(s.sessions_ended, 0, "node {}: {s:?}", node.ic.node_id());
        }
    }
    assert!(rx.try_recv().is_err());
    w.stop_then_join().unwrap();
}

#[test]
fn five_nodes_in_one_process_all_reach_each_other() {
    five_nodes_greet_each_other(true);
}

#[test]
fn five_nodes_in_one_process_all_reach_each_other_when_they_all_connect_at_once() {
    five_nodes_greet_each_other(false);
}

#[test]
fn two_nodes_that_connect_to_each_other_at_once_lose_nothing() {
    const ROUNDS: usize = 40;
    const EACH: u64 = 5;
    let mut failed = Vec::new();
    for round in 0..ROUNDS {
        let w = env();
        let nodes = cluster(w.environment(), &[1, 2], |_, s| s);
        let (tx, rx) = channel();
        let a = nodes[0].system.register(recorder(tx.clone())).unwrap();
        let b = nodes[1].system.register(recorder(tx)).unwrap();
        // Both nodes send their first events at the same moment: both connect.
        let start = std::sync::Arc::new(std::sync::Barrier::new(2));
        let senders: Vec<_> = [(nodes[0].system.clone(), b), (nodes[1].system.clone(), a)]
            .into_iter()
            .map(|(system, to)| {
                let start = start.clone();
                std::thread::spawn(move || {
                    start.wait();
                    for i in 0..EACH {
                        system.send(to, Ping(i));
                    }
                })
            })
            .collect();
        for s in senders {
            s.join().unwrap();
        }
        // Everything arrives, or a session ends (its events are then lost for good).
        let mut got = 0;
        let ended = |n: &Node, peer| n.ic.session_stats(peer).unwrap().sessions_ended > 0;
        wait_until("all events, or a session's end", || {
            while rx.try_recv().is_ok() {
                got += 1;
            }
            got == 2 * EACH || ended(&nodes[0], 2) || ended(&nodes[1], 1)
        });
        if got != 2 * EACH || ended(&nodes[0], 2) || ended(&nodes[1], 1) {
            failed.push(format!(
                "round {round}: {got} of {} events arrived (so far)\n  1->2 {:?}\n  2->1 {:?}",
                2 * EACH,
                nodes[0].ic.session_stats(2),
                nodes[1].ic.session_stats(1)
            ));
        }
        w.stop_then_join().unwrap();
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn an_event_type_without_a_codec_comes_back_undelivered_and_the_session_goes_on() {
    let w = env();
    let nodes = cluster(w.environment(), &[1, 2], |_, s| s);
    let (seen2, at_echo) = channel();
    let target = nodes[1].system.register(echo(Some(seen2))).unwrap();
    let (tx, rx) = channel();
    let sender = nodes[0].system.register(recorder(tx)).unwrap();

    nodes[0]
        .system
        .send_with(target, sender, NoCodec(1), EventFlags::TRACK_DELIVERY, 9);
    let got = next_within(&rx, SOON, "the Undelivered");
    assert_eq!(
        (got.what, got.sender, got.cookie),
        (
            What::Undelivered(Undelivered {
                source_type: NoCodec::EVENT_TYPE,
                reason: UndeliveredReason::Unknown,
                unsure: false,
            }),
            target,
            9
        )
    );
    // The session goes on: a registered event after it is delivered, and is the first
    // thing the target ever gets.
    nodes[0]
        .system
        .send_with(target, sender, Ping(2), EventFlags::TRACK_DELIVERY, 10);
    let got = next(&rx, "the pong");
    assert_eq!((got.what, got.cookie), (What::Pong(2), 10));
    let first = next(&at_echo, "the ping");
    assert_eq!((first.what, first.cookie), (What::Ping(2), 10));
    assert_eq!(nodes[0].system.stats().dead_letters, 1);
    w.stop_then_join().unwrap();
}

#[test]
fn subscribing_to_a_node_s_proxy_gives_node_connected_then_node_disconnected() {
    let w = env();
    let nodes = cluster(w.environment(), &[1, 2], |id, s| {
        if id == 1 {
            s.ping_period(Duration::from_millis(500))
                .dead_peer_timeout(Duration::from_secs(2))
                .lost_connection_timeout(Duration::from_secs(2))
        } else {
            s
        }
    });
    let (tx, rx) = channel();
    let subscriber = nodes[0].system.register(recorder(tx)).unwrap();
    let proxy = ActorId::interconnect_proxy(2);
    nodes[0]
        .system
        .send_with(proxy, subscriber, Subscribe, EventFlags::empty(), 31);
    let got = next(&rx, "NodeConnected");
    assert_eq!(
        (got.what, got.sender, got.recipient, got.cookie),
        (What::Connected(2), proxy, subscriber, 31)
    );
    assert!(nodes[0].ic.is_connected(2));

    // Node 2's interconnect stops: it closes the connection with nothing of node 1's
    // pending, so node 1's session ends at once.
    nodes[1].ic.stop();
    let got = next_within(&rx, SOON, "NodeDisconnected");
    assert_eq!(
        (got.what, got.sender, got.recipient, got.cookie),
        (What::Disconnected(2), proxy, subscriber, 31)
    );
    let s = nodes[0].ic.session_stats(2).unwrap();
    assert_eq!(s.sessions_ended, 1, "{s:?}");
    assert!(!s.connected);
    w.stop_then_join().unwrap();
}
