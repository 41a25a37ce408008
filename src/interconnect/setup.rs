//! [`InterconnectSetup`]: what a node's interconnect is made of.

use std::fmt;
use std::net::TcpListener;
use std::time::Duration;

use super::codec::{Codecs, RemoteEvent};
use super::names::NameService;

/// The longest timer or timeout kept: ten years, "never" in practice. A longer one (such as
/// `Duration::MAX`, too long for an `Instant`) is taken as this, never a panic.
const FOREVER: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// What a node's [`Interconnect`](super::Interconnect) is made of: the name service, who may
/// join, the remote event types, and the session's timers and limits (YDB's defaults). A
/// timer or timeout longer than ten years (up to `Duration::MAX`) means ten years: never,
/// in practice, and never a panic.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use agentbox::interconnect::{InterconnectSetup, NameService, NodeAddress};
///
/// let names = NameService::new()
///     .node(1, NodeAddress::new("127.0.0.1", 13301))
///     .node(2, NodeAddress::new("127.0.0.1", 13302));
/// let setup = InterconnectSetup::new(names)
///     .cluster_uuid("prod-1")            // who we are
///     .accept_uuid("prod-1")             // whom we accept (none: anyone)
///     .secret(b"correct horse battery")  // the shared-secret proof
///     .dead_peer_timeout(Duration::from_secs(5));
/// # let _ = setup;
/// ```
pub struct InterconnectSetup {
    pub(crate) names: NameService,
    pub(crate) listener: Option<TcpListener>,
    pub(crate) cluster_uuid: Option<String>,
    pub(crate) accept_uuids: Vec<String>,
    pub(crate) secret: Option<Vec<u8>>,
    pub(crate) codecs: Codecs,
    pub(crate) cfg: Config,
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<super::TlsSetup>,
}

/// YDB's `EventMaxByteSize` (140 MiB): its senders refuse a larger event, and its input
/// session has no limit of its own, so a peer must take events up to this size.
const EVENT_MAX_BYTE_SIZE: usize = 140 << 20;

/// A session's timers and limits (see the setters of [`InterconnectSetup`]).
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) ping_period: Duration,
    pub(crate) dead_peer_timeout: Duration,
    pub(crate) lost_connection_timeout: Duration,
    pub(crate) handshake_timeout: Duration,
    pub(crate) max_event_size: usize,
    pub(crate) inflight_window: usize,
    /// The most events, and bytes, a session queues for its peer (not yet in a packet).
    pub(crate) max_queued_events: usize,
    pub(crate) max_queued_bytes: usize,
    /// How long a received data packet may wait for a pure confirm when nothing else goes
    /// out.
    pub(crate) confirm_delay: Duration,
    /// How long a stopped node keeps its connections open for reading.
    pub(crate) close_linger: Duration,
}

impl InterconnectSetup {
    /// A setup with the cluster's name service; everything else at YDB's defaults, no
    /// cluster id, no secret, and the system events ([`Undelivered`](crate::actors::Undelivered),
    /// [`Poison`](crate::actors::Poison), [`Gone`](crate::actors::Gone)) as the only remote
    /// event types.
    pub fn new(names: NameService) -> InterconnectSetup {
        InterconnectSetup {
            names,
            listener: None,
            cluster_uuid: None,
            accept_uuids: Vec::new(),
            secret: None,
            codecs: Codecs::with_system_events(),
            #[cfg(feature = "tls")]
            tls: None,
            cfg: Config {
                ping_period: Duration::from_secs(3),
                dead_peer_timeout: Duration::from_secs(10),
                lost_connection_timeout: Duration::from_secs(10),
                handshake_timeout: Duration::from_secs(5),
                max_event_size: EVENT_MAX_BYTE_SIZE,
                inflight_window: 40 << 20,
                max_queued_events: 1 << 20,
                max_queued_bytes: 512 << 20,
                confirm_delay: Duration::from_millis(10),
                close_linger: Duration::from_secs(2),
            },
        }
    }

    /// Registers the remote event type `E`: events of this type may leave the node and are
    /// decoded when they arrive. Every node that sends or receives `E` registers it.
    pub fn event<E: RemoteEvent>(mut self) -> InterconnectSetup {
        self.codecs.add::<E>();
        self
    }

    /// Registers every remote event type submitted with
    /// [`register_remote_event!`](crate::register_remote_event) in the crates linked into
    /// this binary (see [`linked_events`](super::linked_events)), so that no node forgets a
    /// type another node sends. Types registered with [`event`](Self::event) after this
    /// call replace a linked one of the same type number.
    ///
    /// # Examples
    ///
    /// ```
    /// use agentbox::actors::{event_space_begin, Event, ES_USERSPACE};
    /// use agentbox::interconnect::{InterconnectSetup, NameService, NodeAddress, RemoteEvent, Serde};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Serialize, Deserialize)]
    /// struct Hello(String);
    /// impl Event for Hello { const EVENT_TYPE: u32 = event_space_begin(ES_USERSPACE) + 1; }
    /// impl RemoteEvent for Hello { type Codec = Serde; }
    /// agentbox::register_remote_event!(Hello);
    ///
    /// let names = NameService::new().node(1, NodeAddress::new("127.0.0.1", 0));
    /// let setup = InterconnectSetup::new(names).linked_events(); // Hello included
    /// # let _ = setup;
    /// ```
    pub fn linked_events(mut self) -> InterconnectSetup {
        for linked in super::linked_events() {
            linked.add_to(&mut self.codecs);
        }
        self
    }

    /// Accepts connections on `listener` instead of binding the name service's address for
    /// this node (tests bind port 0 first, then build the name service from the ports
    /// they got).
    pub fn listener(mut self, listener: TcpListener) -> InterconnectSetup {
        self.listener = Some(listener);
        self
    }

    /// This node's cluster id (`ClusterUUIDs.ClusterUUID`), sent in every handshake.
    pub fn cluster_uuid(mut self, uuid: impl Into<String>) -> InterconnectSetup {
        self.cluster_uuid = Some(uuid.into());
        self
    }

    /// Adds a cluster id this node accepts (`ClusterUUIDs.AcceptUUID`). With none, any
    /// peer is accepted; otherwise a peer is accepted if its cluster id is in this list or
    /// this node's cluster id is in the peer's list (YDB's rule).
    pub fn accept_uuid(mut self, uuid: impl Into<String>) -> InterconnectSetup {
        self.accept_uuids.push(uuid.into());
        self
    }

    /// A secret every node of the cluster shares. Each side of every handshake, new
    /// session or resume, then proves it holds the secret with an HMAC-SHA256 over a nonce
    /// the other side has just drawn (a challenge), so a recorded handshake, replayed
    /// later (after a restart too), or a resume with session ids read off the wire is
    /// refused ([`HandshakeError::BadSecret`](super::HandshakeError::BadSecret)) before the
    /// session changes or any of its data is read. A peer without the proof, or with a
    /// wrong one, is refused; so is a reply without it.
    ///
    /// The proofs travel in the handshake's key/value params and in frames of agentbox's
    /// own, so every node of such a cluster must be an agentbox node with the secret; YDB
    /// nodes take part only in a cluster without one. The secret does not hide the
    /// traffic: a reader of the wire still reads the events.
    pub fn secret(mut self, secret: impl AsRef<[u8]>) -> InterconnectSetup {
        self.secret = Some(secret.as_ref().to_vec());
        self
    }

    /// TLS on this node's connections (feature `tls`), with `setup`'s mode, certificate,
    /// key and CA. Without it a node runs no TLS (YDB's DISABLED mode): a peer that requires
    /// TLS is refused.
    ///
    /// The modes follow YDB's rules ([`EncryptionMode`](super::EncryptionMode)): a new
    /// session runs TLS when one side requires it and the other allows it, or both allow
    /// it; it starts on the socket right after the handshake's last frame, and a resumed
    /// connection runs it again right after the initial packets. Each side checks that the
    /// other's certificate is signed by the CA, as YDB does (and, with
    /// [`TlsSetup::check_host_names`](super::TlsSetup::check_host_names), that it is for
    /// the host name the name service gives the peer); a failure refuses the peer for good
    /// ([`HandshakeError::Tls`](super::HandshakeError::Tls)). A session with TLS is only
    /// taken over (by a resume or a new session) by a peer that completed the TLS
    /// handshake, so session ids read off the wire are worth nothing.
    #[cfg(feature = "tls")]
    pub fn tls(mut self, setup: super::TlsSetup) -> InterconnectSetup {
        self.tls = Some(setup);
        self
    }

    /// How often a ping request and a clock sample go to an idle peer (default 3 s, YDB's
    /// `PingPeriod`). While the session has traffic, they go out with it at most once a
    /// second (YDB's `PingPeriodicity`), or once a period if that is shorter.
    pub fn ping_period(mut self, period: Duration) -> InterconnectSetup {
        self.cfg.ping_period = period.clamp(Duration::from_millis(1), FOREVER);
        self
    }

    /// How long a peer may stay silent, or keep data packets unconfirmed, before it is
    /// taken for dead (default 10 s, YDB's `DeadPeer`). The session then ends
    /// ([`SessionError::DeadPeer`](super::SessionError::DeadPeer) or
    /// [`SessionError::NotConfirming`](super::SessionError::NotConfirming)): it is not
    /// resumed, its events follow the non-delivery rules and its subscribers get
    /// [`NodeDisconnected`](super::NodeDisconnected). A write that blocks this long drops
    /// the connection (the session resumes on a new one).
    pub fn dead_peer_timeout(mut self, timeout: Duration) -> InterconnectSetup {
        self.cfg.dead_peer_timeout = timeout.clamp(Duration::from_millis(1), FOREVER);
        self
    }

    /// How long a session may go without a connection before it ends: its queued events
    /// become not delivered and its subscribers get
    /// [`NodeDisconnected`](super::NodeDisconnected) (default 10 s).
    pub fn lost_connection_timeout(mut self, timeout: Duration) -> InterconnectSetup {
        self.cfg.lost_connection_timeout = timeout.min(FOREVER);
        self
    }

    /// How long a stopping node keeps each connection open for reading after it closed its
    /// sending half (default 2 s).
    ///
    /// A node that stops closes its connections cleanly: the peer reads an end of stream
    /// and, with nothing of its own pending, ends the session at once (subscribers get
    /// [`NodeDisconnected`](super::NodeDisconnected) then, not after the peer's
    /// lost-connection timeout). Meanwhile what the peer still sends (a ping, a confirm) is
    /// accepted and dropped: closed at once, the connection would answer it with a reset,
    /// which the peer could see before the end of stream and take for a lost connection. A
    /// peer that closes its side first ends the wait sooner.
    pub fn close_linger(mut self, linger: Duration) -> InterconnectSetup {
        self.cfg.close_linger = linger.min(FOREVER);
        self
    }

    /// How long a handshake may take (default 5 s; an incoming one gets 90% of it, and its
    /// first packet must come within 1 s, or this if shorter: see the interconnect's
    /// admission rules on [`Interconnect`](super::Interconnect)).
    pub fn handshake_timeout(mut self, timeout: Duration) -> InterconnectSetup {
        self.cfg.handshake_timeout = timeout.clamp(Duration::from_millis(1), FOREVER);
        self
    }

    /// The largest event body accepted from a peer (default 140 MiB, YDB's
    /// `EventMaxByteSize`, the largest a YDB node sends). A larger one ends the session
    /// ([`SessionError::OversizedEvent`](super::SessionError::OversizedEvent)), and so do
    /// partial events of all channels together over four times this; a larger one sent is
    /// not delivered (`NotSerializable`). Nothing is allocated ahead from a length a peer
    /// announces: a partial event grows with the bytes that came.
    pub fn max_event_size(mut self, bytes: usize) -> InterconnectSetup {
        self.cfg.max_event_size = bytes;
        self
    }

    /// The most events a session queues for its peer, not yet in a data packet (default
    /// 1 048 576). An event sent beyond it is not queued: it follows the non-delivery rules
    /// at once (reason [`Overloaded`](crate::actors::DeadLetterReason::Overloaded): a
    /// forward, an `Undelivered { Disconnected }` if tracked, a dead letter) and is counted
    /// in [`SessionStats::events_refused`](super::SessionStats::events_refused). Events
    /// already queued are kept. The queue fills when the peer does not confirm what it got
    /// (the in-flight window is full) or the network is slower than the senders.
    pub fn max_queued_events(mut self, events: usize) -> InterconnectSetup {
        self.cfg.max_queued_events = events;
        self
    }

    /// The most bytes a session queues for its peer (default 512 MiB, YDB's default
    /// `SendBufferDieLimitInMB`): the events' bodies plus a fixed cost of each queued event.
    /// Beyond it, as beyond [`max_queued_events`](Self::max_queued_events). An event larger
    /// than this is never queued.
    pub fn max_queued_bytes(mut self, bytes: usize) -> InterconnectSetup {
        self.cfg.max_queued_bytes = bytes;
        self
    }

    /// How many bytes of data packets may wait for the peer's confirmation before the
    /// session stops sending more (default 40 MiB, YDB's `TotalInflightAmountOfData`).
    pub fn inflight_window(mut self, bytes: usize) -> InterconnectSetup {
        self.cfg.inflight_window = bytes.max(64 << 10);
        self
    }
}

impl fmt::Debug for InterconnectSetup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InterconnectSetup")
            .field("names", &self.names)
            .field("cluster_uuid", &self.cluster_uuid)
            .field("accept_uuids", &self.accept_uuids)
            .field("secret", &self.secret.as_ref().map(|_| "…"))
            .field("codecs", &self.codecs)
            .field("cfg", &self.cfg)
            .finish_non_exhaustive()
    }
}
