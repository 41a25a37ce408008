//! The interconnect's errors: [`InterconnectError`] (starting a node),
//! [`HandshakeError`] (why a connection was refused or failed) and [`SessionError`] (why an
//! established session closed a connection or ended).

use std::io;

use thiserror::Error;

use super::wire::WireError;
use crate::actors::ActorId;

/// Why [`Interconnect::start`](super::Interconnect::start) failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum InterconnectError {
    /// The system's node is not in the name service.
    #[error("node {0} is not in the name service")]
    NotInNameService(u32),
    /// The listening socket could not be bound or set up.
    #[error("cannot listen on {address}: {source}")]
    Listen {
        /// Where.
        address: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The system already has an interconnect.
    #[error("node {0} already has an interconnect")]
    AlreadyStarted(u32),
    /// The environment is stopping.
    #[error("the environment is stopping")]
    Stopping,
}

/// Why a handshake failed: the peer (or this node) refused it, or the connection broke.
///
/// A refused peer gets the reason as text in the handshake reply
/// (`THandshakeReply.ErrorExplaination`) and nothing it sent reaches an actor; the refusing
/// node logs it and keeps it in [`Interconnect::refusals`](super::Interconnect::refusals).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum HandshakeError {
    /// The peer's node id is not in this node's name service.
    #[error("node {0} is not in the name service")]
    UnknownNode(u32),
    /// The request was meant for another node (`ReceiverNodeId`).
    #[error("the peer wants node {wanted}, this is node {actual}")]
    WrongReceiverNode {
        /// The node id the peer asked for.
        wanted: u32,
        /// This node's id.
        actual: u32,
    },
    /// A host name does not match the name service (`SenderHostName` /
    /// `ReceiverHostName`).
    #[error("host name mismatch: {field} is {got:?}, the name service says {expected:?}")]
    HostNameMismatch {
        /// Which field.
        field: &'static str,
        /// What the peer sent.
        got: String,
        /// What the name service has.
        expected: String,
    },
    /// The cluster ids do not accept each other (YDB's `ClusterUUIDs`/`AcceptUUID` rules).
    #[error("cluster id mismatch: the peer is {peer:?}")]
    ClusterMismatch {
        /// The peer's cluster id.
        peer: String,
    },
    /// The shared-secret proof is missing or wrong: a request's, a reply's, or the answer
    /// to this node's challenge (a recorded handshake replayed, a resume by a node without
    /// the secret).
    #[error("the shared-secret proof is missing or wrong")]
    BadSecret,
    /// Something the protocol requires is missing or has another value (protocol version,
    /// modern frame, extended trace format, or TLS, XDC or a cookie check asked of a node
    /// without them).
    #[error("incompatible peer: {0}")]
    Incompatible(String),
    /// The peer refused the handshake, with its reason.
    #[error("refused by the peer: {0}")]
    Refused(String),
    /// A resume found that one side's session is not the one the other knows (the peer
    /// restarted, or ended the session): a new session starts.
    #[error("session mismatch: the peer does not know session {0}")]
    SessionMismatch(ActorId),
    /// A new-session request from the peer's program (the same `ProgramPID` and
    /// `ProgramStartTime`) with a `Serial` at or below the last one seen from it: an old
    /// or repeated handshake (YDB's "handshake is too old"). Its connection is closed
    /// without a reply and the running session is untouched.
    #[error("stale handshake: serial {serial} after {last} from the same peer program")]
    StaleSerial {
        /// The request's serial.
        serial: u64,
        /// The last serial seen from that program.
        last: u64,
    },
    /// Both nodes connected at once and this connection lost (the lower node id's outgoing
    /// connection wins).
    #[error("simultaneous connect: the other connection wins")]
    Simultaneous,
    /// TLS (feature `tls`): the modes of the two sides do not agree (YDB's rules, see
    /// `EncryptionMode`), or the TLS handshake failed (a
    /// certificate not signed by the cluster's CA, or not for the host name the name
    /// service gives the peer). Permanent, as in YDB.
    #[error("TLS: {0}")]
    Tls(String),
    /// The handshake did not complete in time.
    #[error("the handshake timed out")]
    Timeout,
    /// A frame could not be decoded.
    #[error("bad handshake frame: {0}")]
    Wire(#[from] WireError),
    /// The connection failed (`io::ErrorKind`, then the message).
    #[error("connection failed ({0:?}): {1}")]
    Io(io::ErrorKind, String),
    /// The node is stopping.
    #[error("the node is stopping")]
    Stopping,
}

impl HandshakeError {
    /// Whether retrying may help (a broken or refused connection, a timeout, a lost
    /// simultaneous connect), as opposed to a permanent refusal that ends the session.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            HandshakeError::Io(..)
                | HandshakeError::Timeout
                | HandshakeError::Simultaneous
                | HandshakeError::Wire(WireError::BadChecksum { .. })
                | HandshakeError::Wire(WireError::Truncated { .. })
        )
    }

    pub(crate) fn io(e: &io::Error) -> HandshakeError {
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => HandshakeError::Timeout,
            kind => HandshakeError::Io(kind, e.to_string()),
        }
    }
}

/// Why a session closed its connection (and resumed on a new one) or ended.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The connection broke or was closed by the peer.
    #[error("connection lost ({0:?}): {1}")]
    Io(io::ErrorKind, String),
    /// Nothing came from the peer for the dead-peer timeout: the session ends (YDB's
    /// `DeadPeer`, which destroys the session, not only the connection).
    #[error("dead peer: nothing received for the dead-peer timeout")]
    DeadPeer,
    /// The peer kept sending (pings, say) but confirmed none of the data packets it was
    /// sent for the dead-peer timeout: the session ends. A YDB node confirms what it
    /// processed within a second (`ForceConfirmPeriod`).
    #[error("the peer confirmed no data packet for the dead-peer timeout")]
    NotConfirming,
    /// The peer closed the connection while nothing was queued or unconfirmed: the
    /// session ends at once (YDB's rule for a clean end of stream), and the next send
    /// starts a new one.
    #[error("the peer closed the connection with nothing pending")]
    ClosedByPeer,
    /// A packet's checksum did not match (the connection is dropped, the session resumes).
    #[error("checksum error: {0}")]
    Checksum(WireError),
    /// The peer broke the protocol (bad serial, malformed parts...): the session ends.
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// An event larger than the limit arrived: the session ends.
    #[error("event of {size} bytes over the limit of {max}")]
    OversizedEvent {
        /// The size reached.
        size: usize,
        /// The limit ([`InterconnectSetup::max_event_size`](super::InterconnectSetup::max_event_size)).
        max: usize,
    },
    /// No connection could be made again within the lost-connection timeout: the session
    /// ends.
    #[error("could not reconnect within the lost-connection timeout")]
    LostConnection,
    /// The handshake failed permanently: the session ends.
    #[error("handshake: {0}")]
    Handshake(HandshakeError),
    /// The peer started a new session (it restarted or ended ours): ours ends.
    #[error("the peer started a new session")]
    PeerRestarted,
    /// The node is stopping.
    #[error("the node is stopping")]
    Stopping,
}

impl SessionError {
    pub(crate) fn io(e: &io::Error) -> SessionError {
        SessionError::Io(e.kind(), e.to_string())
    }

    /// Whether the session ends (rather than resuming on a new connection).
    pub fn ends_session(&self) -> bool {
        !matches!(self, SessionError::Io(..) | SessionError::Checksum(_))
    }
}

/// Why an outgoing handshake failed, and whether the session still is the one it was for
/// (a stale attempt's failure must not end a session that replaced it).
pub(crate) struct ConnectFailed {
    pub(crate) error: HandshakeError,
    pub(crate) stale: bool,
}
