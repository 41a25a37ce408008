//! The interconnect's settings and figures: the session figures reach the environment's
//! stats controller, under `ic/node<N>/peer<P>` (see the `stats` module docs); timers too
//! long for an `Instant` mean "never", not a panic.

#![cfg(feature = "interconnect")]

mod interconnect_support;

use std::sync::mpsc::{channel, Sender};
use std::time::Duration;

use agentbox::prelude::*;
use agentbox::{Quantity, StatsFinished, WrappedEnv};
use interconnect_support::*;

/// Collects the quantities of one prefix, and sends them after each distribution.
struct Monitor {
    prefix: String,
    seen: Vec<(&'static str, usize)>,
    out: Sender<Vec<(&'static str, usize)>>,
}

impl Agent for Monitor {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let stats = ctx.environment().stats_controller().mbox();
        ctx.subscribe(&stats)
            .event(|a: &mut Self, _, q: &Quantity| {
                if q.prefix == a.prefix {
                    a.seen.push((q.suffix, q.value));
                }
            })?;
        ctx.subscribe(&stats)
            .event(|a: &mut Self, _, _: &StatsFinished| {
                let _ = a.out.send(std::mem::take(&mut a.seen));
            })?;
        Ok(())
    }
}

#[test]
fn the_stats_controller_distributes_each_session_s_figures() {
    const N: u64 = 50;
    let w = WrappedEnv::new(|_| {}).unwrap();
    let env = w.environment().clone();
    let nodes = cluster(&env, &[1, 2], |_, s| s);
    let (tx, rx) = channel();
    let sink = nodes[1].system.register(recorder(tx)).unwrap();
    for i in 0..N {
        nodes[0].system.send(sink, Ping(i));
    }
    take(&rx, N as usize);

    let (qtx, qrx) = channel();
    env.introduce_coop(|coop| {
        coop.add_agent(Monitor {
            prefix: "ic/node1/peer2".to_owned(),
            seen: Vec::new(),
            out: qtx,
        });
    })
    .unwrap();
    let stats = env.stats_controller();
    stats.set_distribution_period(Duration::from_millis(20));
    stats.turn_on();
    let value = |seen: &[(&str, usize)], suffix: &str| {
        seen.iter().find(|(s, _)| *s == suffix).map(|(_, v)| *v)
    };
    // The first distributions may come before the monitor subscribed: take the first
    // complete one.
    let seen = loop {
        let seen = qrx
            .recv_timeout(Duration::from_secs(60))
            .expect("a distribution");
        if !seen.is_empty() {
            break seen;
        }
    };
    stats.turn_off();
    assert_eq!(value(&seen, "connected.count"), Some(1));
    assert_eq!(value(&seen, "events_out.count"), Some(N as usize));
    assert_eq!(value(&seen, "sessions_ended.count"), Some(0));
    assert!(value(&seen, "bytes_out.count").unwrap() > 0);
    assert!(value(&seen, "rtt.us").is_some());
    w.stop_then_join().unwrap();
}

#[test]
fn timers_too_long_for_an_instant_mean_never_and_the_session_works() {
    use agentbox::interconnect::InterconnectSetup;
    let w = WrappedEnv::new(|_| {}).unwrap();
    let env = w.environment().clone();
    let forever = |_, s: InterconnectSetup| {
        s.ping_period(Duration::MAX)
            .dead_peer_timeout(Duration::MAX)
            .lost_connection_timeout(Duration::MAX)
            .handshake_timeout(Duration::MAX)
            .close_linger(Duration::MAX)
    };
    let nodes = cluster(&env, &[1, 2], forever);
    let (tx, rx) = channel();
    let sink = nodes[1].system.register(recorder(tx)).unwrap();
    for i in 0..10 {
        nodes[0].system.send(sink, Ping(i));
    }
    take(&rx, 10);
    w.stop_then_join().unwrap();
}

/// Zero is accepted by every timer of the setup: a ping period, a dead-peer or handshake
/// timeout of zero is taken as its floor (1 ms), a zero lost-connection timeout ends a
/// session as soon as its connection is lost, a zero linger closes at once; nothing panics,
/// and a session whose peer answers at once still carries events.
#[test]
fn zero_timers_are_accepted_and_the_session_works() {
    use agentbox::interconnect::InterconnectSetup;
    let w = WrappedEnv::new(|_| {}).unwrap();
    let env = w.environment().clone();
    let zero = |_, s: InterconnectSetup| {
        s.ping_period(Duration::ZERO)
            .lost_connection_timeout(Duration::ZERO)
            .close_linger(Duration::ZERO)
    };
    let nodes = cluster(&env, &[1, 2], zero);
    let (tx, rx) = channel();
    let sink = nodes[1].system.register(recorder(tx)).unwrap();
    for i in 0..10 {
        nodes[0].system.send(sink, Ping(i));
    }
    take(&rx, 10);
    w.stop_then_join().unwrap();
    // Timeouts of zero that end sessions or handshakes at once: the node starts and stops.
    let w = WrappedEnv::new(|_| {}).unwrap();
    let env = w.environment().clone();
    let _nodes = cluster(&env, &[1, 2], |_, s: InterconnectSetup| {
        s.dead_peer_timeout(Duration::ZERO)
            .handshake_timeout(Duration::ZERO)
    });
    std::thread::sleep(Duration::from_millis(50));
    w.stop_then_join().unwrap();
}
