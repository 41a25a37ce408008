//! [`SessionStats`] and [`Refusal`]: what a node's sessions did.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use super::error::{HandshakeError, SessionError};
use crate::actors::ActorId;

/// One session's figures ([`Interconnect::session_stats`](super::Interconnect::session_stats)).
///
/// Counters add up over the node's life, across the sessions with one peer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionStats {
    /// The peer node.
    pub peer_node: u32,
    /// This side's session id (its virtual id), empty before the first handshake.
    pub session_id: ActorId,
    /// The peer's session id, empty before the first handshake.
    pub peer_session_id: ActorId,
    /// Whether a connection is up now.
    pub connected: bool,
    /// Whether the session runs TLS (feature `tls`; decided by its first handshake).
    pub tls: bool,
    /// Bytes written to the socket (headers, resends and aux packets included).
    pub bytes_out: u64,
    /// Bytes read from the socket.
    pub bytes_in: u64,
    /// Events that left in data packets (counted once, when first sent).
    pub events_out: u64,
    /// Events received and handed to the local system. A batch is counted just after it
    /// is handed over: a handler may see an event a moment before it is counted.
    pub events_in: u64,
    /// Events received (and counted in `events_in`) whose type has no codec registered on
    /// this node: they reach the handler as bytes
    /// ([`EventHandle::serialized_bytes`](crate::actors::EventHandle::serialized_bytes)),
    /// never as their type. The first of each type is also logged through the
    /// environment's error logger, with the type number, for the first 256 types the node
    /// meets (the last of them says so; events of later types are only counted). Register
    /// the type with
    /// [`InterconnectSetup::event`](super::InterconnectSetup::event), or every linked one
    /// with [`InterconnectSetup::linked_events`](super::InterconnectSetup::linked_events).
    pub events_without_codec: u64,
    /// Events received from the peer that carried `FORWARD_ON_NONDELIVERY` or
    /// `SUBSCRIBE_ON_SESSION`: flags of a local send only (a forward target and a session
    /// subscription of the sender belong to the sending node; YDB's sender clears them
    /// from the wire), so this node clears them and delivers the event without them. A
    /// peer that sets them is not sending as YDB's nodes do.
    pub local_only_flags_cleared: u64,
    /// Events the interconnect proxy of this session (the local service
    /// [`ActorId::interconnect_proxy`](crate::ActorId::interconnect_proxy)`(peer)`)
    /// refused, from any node: a [`Poison`](crate::actors::Poison) (the proxy lives as long
    /// as the interconnect, as YDB's proxies live as long as their actor system), and a
    /// [`Subscribe`](super::Subscribe) or [`Unsubscribe`](super::Unsubscribe) from the empty
    /// id. Other events the proxy does not take are dead letters (`Unhandled`).
    pub proxy_refusals: u64,
    /// Data packets sent again after a reconnect.
    pub packets_resent: u64,
    /// Data packets received again and skipped (already processed).
    pub packets_skipped: u64,
    /// Connections made after the first one of a session (resumes).
    pub reconnects: u64,
    /// Sessions that ended (their queued events were not delivered).
    pub sessions_ended: u64,
    /// Events that the sessions that ended did not deliver: those still queued (surely
    /// not delivered) and those sent but never confirmed (the peer may have processed
    /// them). Each followed the non-delivery rules; those dropped are counted in the
    /// environment's [`DropCounts::unreachable`](crate::DropCounts::unreachable) too, and
    /// each session that ends with any logs their number once (a `tracing` warning).
    pub events_not_delivered: u64,
    /// Events waiting to leave now (not yet in a data packet).
    pub queued_events: usize,
    /// What the waiting events hold now: their bodies plus a fixed cost each, the figure
    /// [`InterconnectSetup::max_queued_bytes`](super::InterconnectSetup::max_queued_bytes)
    /// bounds.
    pub queued_bytes: usize,
    /// Events not queued because the session held its limit of events or bytes for the
    /// peer; each followed the non-delivery rules at once.
    pub events_refused: u64,
    /// Data packets sent and not yet confirmed now.
    pub unconfirmed_packets: usize,
    /// Actors subscribed to the session's notices now (explicitly, or through an event
    /// sent with `SUBSCRIBE_ON_SESSION`). One entry per actor; the list empties when the
    /// session ends, loses an actor that unsubscribes, and, each time it grows to 64,
    /// 128, 256, …, the actors of this node that are gone (passed away, or an answered
    /// request's id) without unsubscribing.
    pub subscribers: usize,
    /// The last round-trip time measured by a ping.
    pub rtt: Option<Duration>,
    /// The last error of the session: why a connection closed, a reconnect attempt
    /// failed, or a session ended. It stays once the session is connected again (the
    /// history of the last outage): [`last_error_at`](Self::last_error_at) says when it
    /// happened.
    pub last_error: Option<SessionError>,
    /// When [`last_error`](Self::last_error) happened (the system clock). An error older
    /// than the connection of the moment is from an earlier outage.
    pub last_error_at: Option<SystemTime>,
}

impl SessionStats {
    /// Records `err` as the last error, now.
    pub(crate) fn record_error(&mut self, err: SessionError) {
        self.last_error = Some(err);
        self.last_error_at = Some(SystemTime::now());
    }
}

/// A handshake this node refused ([`Interconnect::refusals`](super::Interconnect::refusals)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Where the connection came from.
    pub peer_addr: Option<SocketAddr>,
    /// The node id the peer claimed (0 if it did not get that far).
    pub claimed_node: u32,
    /// Why it was refused.
    pub reason: HandshakeError,
}
