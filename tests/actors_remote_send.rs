//! A send from an actor (or from outside one) to an actor of another node: the event is
//! encoded on the sender's thread and arrives as its type; one the node cannot send comes
//! back `Undelivered` to a sender that tracks it — reason `Unknown` for an event type
//! without a codec, `Disconnected` for a node the interconnect does not know — with its
//! cookie and type, as the non-delivery rules say.

#![cfg(feature = "interconnect")]

mod interconnect_support;

use std::sync::mpsc::channel;

use agentbox::actors::*;
use agentbox::{ActorId, WrappedEnv};
use interconnect_support::*;

#[test]
fn remote_sends_arrive_or_come_back_undelivered_with_their_reason() {
    let w = WrappedEnv::new(|_| {}).unwrap();
    let nodes = cluster(w.environment(), &[1, 2], |_, s| s);
    let (to_echo, at_echo) = channel();
    let echo2 = nodes[1].system.register(echo(Some(to_echo))).unwrap();
    let (to_me, at_me) = channel();
    let unknown_node = ActorId::new(9, 1, 1);
    let me = nodes[0]
        .system
        .register(recorder(to_me).boot(move |ctx| {
            let track = EventFlags::TRACK_DELIVERY;
            ctx.send_with(echo2, NoCodec(1), track, 7);
            ctx.send_with(unknown_node, Ping(2), track, 8);
            ctx.send_with(echo2, Ping(3), EventFlags::empty(), 9);
            ctx.send(echo2, Ping(4));
        }))
        .unwrap();
    // From outside any actor, with the recorder as the sender.
    nodes[0]
        .system
        .send_with(echo2, me, NoCodec(5), EventFlags::TRACK_DELIVERY, 10);

    let mut got = take(&at_me, 5);
    got.sort_by_key(|g| g.cookie);
    let undelivered = |source_type, reason| {
        What::Undelivered(Undelivered {
            source_type,
            reason,
            unsure: false,
        })
    };
    let seen: Vec<(u64, What, ActorId)> = got
        .into_iter()
        .map(|g| (g.cookie, g.what, g.sender))
        .collect();
    let no_codec = undelivered(NoCodec::EVENT_TYPE, UndeliveredReason::Unknown);
    let no_node = undelivered(Ping::EVENT_TYPE, UndeliveredReason::Disconnected);
    assert_eq!(
        seen,
        [
            (0, What::Pong(4), echo2),
            (7, no_codec.clone(), echo2),
            (8, no_node, unknown_node),
            (9, What::Pong(3), echo2),
            (10, no_codec, echo2),
        ]
    );
    // The echo got the two pings, in order, from the actor, with their cookies.
    let pings: Vec<(What, ActorId, u64)> = take(&at_echo, 2)
        .into_iter()
        .map(|g| (g.what, g.sender, g.cookie))
        .collect();
    assert_eq!(pings, [(What::Ping(3), me, 9), (What::Ping(4), me, 0)]);
    w.stop_then_join().unwrap();
}
