//! The interconnect's local events: [`NodeConnected`], [`NodeDisconnected`], [`Subscribe`],
//! [`Unsubscribe`]. None of them travels on the wire (YDB's `TEventLocal`s).

use crate::actors::{
    Event, EventType, EV_NODE_CONNECTED, EV_NODE_DISCONNECTED, EV_SUBSCRIBE, EV_UNSUBSCRIBE,
};

/// The session to `node_id` is up (`TEvInterconnect::TEvNodeConnected`, `0x20005`).
///
/// Sent from the node's interconnect proxy ([`ActorId::interconnect_proxy`](crate::ActorId::interconnect_proxy))
/// to each actor that subscribes ([`Subscribe`], or an event sent with
/// [`SUBSCRIBE_ON_SESSION`](crate::actors::EventFlags::SUBSCRIBE_ON_SESSION)) once the
/// session is established, with the subscription's cookie.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeConnected {
    /// The peer node.
    pub node_id: u32,
}

impl Event for NodeConnected {
    const EVENT_TYPE: EventType = EV_NODE_CONNECTED;
}

/// The session to `node_id` ended: what was queued for it was not delivered
/// (`TEvInterconnect::TEvNodeDisconnected`, `0x20006`).
///
/// Sent to every subscriber of the session, with its subscription's cookie, when the
/// session cannot go on: the peer could not be reached again within the lost-connection
/// timeout, refused the handshake, restarted (its session is a new one), or broke the
/// protocol; also to an actor that subscribes while the peer cannot be reached. The
/// subscription ends with it: a new session needs a new subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeDisconnected {
    /// The peer node.
    pub node_id: u32,
}

impl Event for NodeDisconnected {
    const EVENT_TYPE: EventType = EV_NODE_DISCONNECTED;
}

/// Subscribes the sender to the session of a node (`TEvents::TEvSubscribe`, `0x10003`):
/// send it to [`ActorId::interconnect_proxy`](crate::ActorId::interconnect_proxy)`(node)`;
/// the answer is [`NodeConnected`] once the session is up, [`NodeDisconnected`] when it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Subscribe;

impl Event for Subscribe {
    const EVENT_TYPE: EventType = EV_SUBSCRIBE;
}

/// Ends the sender's subscription to a node's session (`TEvents::TEvUnsubscribe`,
/// `0x10004`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Unsubscribe;

impl Event for Unsubscribe {
    const EVENT_TYPE: EventType = EV_UNSUBSCRIBE;
}
