//! The handshake's protobuf messages (YDB's `interconnect.proto`, package
//! `NActorsInterconnect`, proto2).
//!
//! Hand-written `prost` structs with YDB's field numbers and types. proto2 presence is kept:
//! an `optional` field is an `Option` (`Some(false)` is encoded, `None` is absent, and YDB
//! tells the two apart for several fields), a `required` one a plain value that is always
//! encoded and whose absence fails [`decode`](HandshakeRequest::decode) with
//! [`WireError::MissingField`], as YDB's parser fails. Unknown fields are skipped. Field
//! meanings and what YDB does with them: YDB_WIRE.md §1.

use super::error::WireError;

/// Decodes a whole buffer as `T`, then checks `T`'s required fields.
fn decode_checked<T: prost::Message + Default>(
    bytes: &[u8],
    check: fn(&[u8]) -> Result<(), WireError>,
) -> Result<(T, usize), WireError> {
    let message = T::decode(bytes)?;
    check(bytes)?;
    Ok((message, bytes.len()))
}

/// `Err(MissingField)` for the first `None` among `fields`.
fn require(message: &'static str, fields: &[(&'static str, bool)]) -> Result<(), WireError> {
    match fields.iter().find(|(_, present)| !present) {
        Some(&(field, _)) => Err(WireError::MissingField { message, field }),
        None => Ok(()),
    }
}

macro_rules! codec {
    ($ty:ident, $check:expr) => {
        impl $ty {
            /// The protobuf bytes (known fields in ascending field-number order, as
            /// protobuf-C++ writes them).
            pub fn encode(&self) -> Vec<u8> {
                prost::Message::encode_to_vec(self)
            }

            /// Decodes the whole of `bytes` (a protobuf message has no length of its own:
            /// the consumed count is always `bytes.len()`), skipping unknown fields.
            ///
            /// # Errors
            ///
            /// [`WireError::Protobuf`] for malformed bytes (a string field that is not
            /// UTF-8 included), [`WireError::MissingField`] for an absent `required` field.
            pub fn decode(bytes: &[u8]) -> Result<(Self, usize), WireError> {
                decode_checked(bytes, $check)
            }
        }
    };
}

/// The protocol version of fields `Protocol`: 2 (`INTERCONNECT_PROTOCOL_VERSION`).
pub const HANDSHAKE_PROTOCOL: u64 = 2;

/// The connector's request for a new session (YDB's `THandshakeRequest`), sent in an
/// [`ExBlock`](super::ExBlock) after the initial packets.
///
/// A peer without TLS, XDC, XXH3 or RDMA sets fields 1–8, `cluster_uuids`,
/// `request_modern_frame = Some(true)` and `request_extended_trace_fmt = Some(true)`, and
/// leaves `require_encryption`, `cookie`, `do_check_cookie`, `handshake_id`,
/// `request_xxhash` and `rdma_handshake` absent (YDB_WIRE.md §3.4).
///
/// # Examples
///
/// ```
/// use agentbox::interconnect::wire::{HandshakeRequest, HANDSHAKE_PROTOCOL};
///
/// let request = HandshakeRequest {
///     protocol: HANDSHAKE_PROTOCOL,
///     serial: 0x1234,
///     receiver_node_id: 2,
///     sender_actor_id: "[1:4660:0]".into(),
///     request_modern_frame: Some(true),
///     request_extended_trace_fmt: Some(true),
///     ..Default::default()
/// };
/// let bytes = request.encode();
/// assert_eq!(&bytes[..2], &[0x08, 0x02]); // field 1, varint, 2
/// assert_eq!(HandshakeRequest::decode(&bytes)?, (request, bytes.len()));
///
/// // Required fields must be there, as for YDB's parser.
/// assert!(HandshakeRequest::decode(&[0x08, 0x02]).is_err());
/// # Ok::<(), agentbox::interconnect::wire::WireError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct HandshakeRequest {
    /// `Protocol` = 1, required: always [`HANDSHAKE_PROTOCOL`] (2).
    #[prost(uint64, required, tag = "1")]
    pub protocol: u64,
    /// `ProgramPID` = 2, required: the sender's process id.
    #[prost(uint64, required, tag = "2")]
    pub program_pid: u64,
    /// `ProgramStartTime` = 3, required: the sender's start stamp (opaque).
    #[prost(uint64, required, tag = "3")]
    pub program_start_time: u64,
    /// `Serial` = 4, required: the local id of the sender's session virtual id.
    #[prost(uint64, required, tag = "4")]
    pub serial: u64,
    /// `ReceiverNodeId` = 5, required: the node the sender expects to reach.
    #[prost(uint32, required, tag = "5")]
    pub receiver_node_id: u32,
    /// `SenderActorId` = 6, required: the sender's session virtual id in text form
    /// `[node:local:hint]`.
    #[prost(string, required, tag = "6")]
    pub sender_actor_id: String,
    /// `SenderHostName` = 7: the sender's host name as the receiver's name service lists it.
    #[prost(string, optional, tag = "7")]
    pub sender_host_name: Option<String>,
    /// `ReceiverHostName` = 8: the receiver's own host name (absent compares as "").
    #[prost(string, optional, tag = "8")]
    pub receiver_host_name: Option<String>,
    /// `UUID` = 9: legacy cluster id, used only without `cluster_uuids`.
    #[prost(string, optional, tag = "9")]
    pub uuid: Option<String>,
    /// `Ballast` = 10: filler for tests, ignored.
    #[prost(bytes = "vec", optional, tag = "10")]
    pub ballast: Option<Vec<u8>>,
    /// `VersionTag` = 11: legacy compatibility tag.
    #[prost(string, optional, tag = "11")]
    pub version_tag: Option<String>,
    /// `AcceptedVersionTags` = 12: legacy accepted tags.
    #[prost(string, repeated, tag = "12")]
    pub accepted_version_tags: Vec<String>,
    /// `ClusterUUIDs` = 13: the sender's cluster id and accept list.
    #[prost(message, optional, tag = "13")]
    pub cluster_uuids: Option<ClusterUuids>,
    /// `RequireEncryption` = 14: **present** asks a YDB receiver in OPTIONAL mode for TLS,
    /// even when false. A peer without TLS leaves it absent.
    #[prost(bool, optional, tag = "14")]
    pub require_encryption: Option<bool>,
    /// `ClientScopeId` = 15: sent only for a scope other than (0, 0).
    #[prost(message, optional, tag = "15")]
    pub client_scope_id: Option<ScopeId>,
    /// `Cookie` = 16: present makes the receiver check it over a reverse connection.
    #[prost(string, optional, tag = "16")]
    pub cookie: Option<String>,
    /// `DoCheckCookie` = 17: present only in a reverse cookie-check request.
    #[prost(bool, optional, tag = "17")]
    pub do_check_cookie: Option<bool>,
    /// `RequestModernFrame` = 18: must be `Some(true)` or YDB refuses.
    #[prost(bool, optional, tag = "18")]
    pub request_modern_frame: Option<bool>,
    /// `RequestAuthOnly` = 19: TLS for authentication only.
    #[prost(bool, optional, tag = "19")]
    pub request_auth_only: Option<bool>,
    /// `RequestExtendedTraceFmt` = 20: must be `Some(true)` or YDB refuses.
    #[prost(bool, optional, tag = "20")]
    pub request_extended_trace_fmt: Option<bool>,
    /// `RequestExternalDataChannel` = 21: asks for XDC (a second TCP stream).
    #[prost(bool, optional, tag = "21")]
    pub request_external_data_channel: Option<bool>,
    /// `CompatibilityInfo` = 22: YDB's version-compatibility blob.
    #[prost(bytes = "vec", optional, tag = "22")]
    pub compatibility_info: Option<Vec<u8>>,
    /// `HandshakeId` = 23: 32 random bytes pairing an XDC socket with this handshake.
    #[prost(bytes = "vec", optional, tag = "23")]
    pub handshake_id: Option<Vec<u8>>,
    /// `RequestXxhash` = 24: XXH3 packet checksums; absent or false means CRC32C.
    #[prost(bool, optional, tag = "24")]
    pub request_xxhash: Option<bool>,
    /// `RequestXdcShuffle` = 25: matters only with XDC.
    #[prost(bool, optional, tag = "25")]
    pub request_xdc_shuffle: Option<bool>,
    /// `Params` = 26: key/value pairs of connection-checker actors (newest YDB).
    #[prost(message, repeated, tag = "26")]
    pub params: Vec<KeyValuePair>,
    /// `RdmaHandshake` = 27: an RDMA queue-pair offer (newest YDB).
    #[prost(message, optional, tag = "27")]
    pub rdma_handshake: Option<RdmaHandshake>,
}

/// The answer to a [`HandshakeRequest`] (YDB's `THandshakeReply`), sent in an
/// [`ExBlock`](super::ExBlock). The requester fails permanently when
/// `error_explanation` is present or `success` is absent.
///
/// # Examples
///
/// ```
/// use agentbox::interconnect::wire::{HandshakeReply, HandshakeSuccess, HANDSHAKE_PROTOCOL};
///
/// let reply = HandshakeReply {
///     success: Some(HandshakeSuccess {
///         protocol: HANDSHAKE_PROTOCOL,
///         serial: 9,
///         sender_actor_id: "[2:9:0]".into(),
///         use_modern_frame: Some(true),
///         use_extended_trace_fmt: Some(true),
///         use_xxhash: Some(false),
///         use_external_data_channel: Some(false),
///         ..Default::default()
///     }),
///     ..Default::default()
/// };
/// let bytes = reply.encode();
/// assert_eq!(HandshakeReply::decode(&bytes)?, (reply, bytes.len()));
/// # Ok::<(), agentbox::interconnect::wire::WireError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct HandshakeReply {
    /// `Success` = 1: set when the session is accepted.
    #[prost(message, optional, tag = "1")]
    pub success: Option<HandshakeSuccess>,
    /// `ErrorExplaination` = 2 (YDB's spelling): the reason of a permanent refusal.
    #[doc(alias = "ErrorExplaination")]
    #[prost(string, optional, tag = "2")]
    pub error_explanation: Option<String>,
    /// `CookieCheckResult` = 3: only in the answer to a cookie-check request.
    #[prost(bool, optional, tag = "3")]
    pub cookie_check_result: Option<bool>,
    /// `Params` = 4: checker key/value pairs sent with an error (newest YDB).
    #[prost(message, repeated, tag = "4")]
    pub params: Vec<KeyValuePair>,
}

/// The accepting side's half of a new session (YDB's `THandshakeSuccess`), inside
/// [`HandshakeReply::success`].
///
/// A peer without TLS, XDC or XXH3 sets fields 1–5, `use_modern_frame = Some(true)`,
/// `use_extended_trace_fmt = Some(true)`, `use_xxhash = Some(false)`,
/// `use_external_data_channel = Some(false)` and `start_encryption = Some(false)`.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct HandshakeSuccess {
    /// `Protocol` = 1, required: [`HANDSHAKE_PROTOCOL`] (2).
    #[prost(uint64, required, tag = "1")]
    pub protocol: u64,
    /// `ProgramPID` = 2, required: the replier's process id.
    #[prost(uint64, required, tag = "2")]
    pub program_pid: u64,
    /// `ProgramStartTime` = 3, required: the replier's start stamp.
    #[prost(uint64, required, tag = "3")]
    pub program_start_time: u64,
    /// `Serial` = 4, required: the local id of the replier's session virtual id.
    #[prost(uint64, required, tag = "4")]
    pub serial: u64,
    /// `SenderActorId` = 5, required: the replier's session virtual id in text form; the
    /// requester resumes later with it as the peer virtual id.
    #[prost(string, required, tag = "5")]
    pub sender_actor_id: String,
    /// `VersionTag` = 6: legacy.
    #[prost(string, optional, tag = "6")]
    pub version_tag: Option<String>,
    /// `AcceptedVersionTags` = 7: legacy.
    #[prost(string, repeated, tag = "7")]
    pub accepted_version_tags: Vec<String>,
    /// `ClusterUUIDs` = 8: the replier's cluster identity.
    #[prost(message, optional, tag = "8")]
    pub cluster_uuids: Option<ClusterUuids>,
    /// `StartEncryption` = 9: if true, both sides now run TLS on the socket.
    #[prost(bool, optional, tag = "9")]
    pub start_encryption: Option<bool>,
    /// `ServerScopeId` = 10: sent only for a scope other than (0, 0).
    #[prost(message, optional, tag = "10")]
    pub server_scope_id: Option<ScopeId>,
    /// `UseModernFrame` = 11: must be `Some(true)`.
    #[prost(bool, optional, tag = "11")]
    pub use_modern_frame: Option<bool>,
    /// `AuthOnly` = 12: honoured only with `start_encryption`.
    #[prost(bool, optional, tag = "12")]
    pub auth_only: Option<bool>,
    /// `UseExtendedTraceFmt` = 13: must be `Some(true)`.
    #[prost(bool, optional, tag = "13")]
    pub use_extended_trace_fmt: Option<bool>,
    /// `UseExternalDataChannel` = 14: XDC granted.
    #[prost(bool, optional, tag = "14")]
    pub use_external_data_channel: Option<bool>,
    /// `CompatibilityInfo` = 15: as in the request.
    #[prost(bytes = "vec", optional, tag = "15")]
    pub compatibility_info: Option<Vec<u8>>,
    /// `UseXxhash` = 16: XXH3 packet checksums when true, CRC32C when false or absent.
    #[prost(bool, optional, tag = "16")]
    pub use_xxhash: Option<bool>,
    /// `UseXdcShuffle` = 17: only with XDC.
    #[prost(bool, optional, tag = "17")]
    pub use_xdc_shuffle: Option<bool>,
    /// `Params` = 18: checker key/value pairs (newest YDB).
    #[prost(message, repeated, tag = "18")]
    pub params: Vec<KeyValuePair>,
    /// The `RdmaHandshake` oneof, fields 19 and 20 (newest YDB).
    #[prost(oneof = "SuccessRdma", tags = "19, 20")]
    pub rdma: Option<SuccessRdma>,
}

/// The `RdmaHandshake` oneof of [`HandshakeSuccess`]: newest YDB sends `RdmaErr` when
/// RDMA is not ready, which is the usual case; a peer without RDMA ignores both.
#[derive(Clone, PartialEq, Eq, Hash, prost::Oneof)]
pub enum SuccessRdma {
    /// `QpPrepared` = 19: the replier's queue pair.
    #[prost(message, tag = "19")]
    QpPrepared(RdmaHandshake),
    /// `RdmaErr` = 20: why RDMA is not used.
    #[prost(string, tag = "20")]
    RdmaErr(String),
}

/// YDB's `TClusterUUIDs`: a node's cluster id and the cluster ids it accepts.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct ClusterUuids {
    /// `ClusterUUID` = 1: the sender's cluster id.
    #[prost(string, optional, tag = "1")]
    pub cluster_uuid: Option<String>,
    /// `AcceptUUID` = 2: the cluster ids the sender accepts (empty: accepts any).
    #[prost(string, repeated, tag = "2")]
    pub accept_uuid: Vec<String>,
}

/// YDB's `TScopeId`: a pair of u64, each `fixed64`.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct ScopeId {
    /// `X1` = 1.
    #[prost(fixed64, optional, tag = "1")]
    pub x1: Option<u64>,
    /// `X2` = 2.
    #[prost(fixed64, optional, tag = "2")]
    pub x2: Option<u64>,
}

/// YDB's `TKeyValuePair` (the three identical nested messages of the request, the success
/// and the reply): a connection checker's parameter.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct KeyValuePair {
    /// `Key` = 1.
    #[prost(string, optional, tag = "1")]
    pub key: Option<String>,
    /// `Value` = 2.
    #[prost(bytes = "vec", optional, tag = "2")]
    pub value: Option<Vec<u8>>,
}

/// YDB's `TRdmaHandshake` (newest YDB), declared so that it decodes and re-encodes;
/// its required fields are not checked.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct RdmaHandshake {
    /// `QpNum` = 1.
    #[prost(uint32, required, tag = "1")]
    pub qp_num: u32,
    /// `SubnetPrefix` = 3.
    #[prost(fixed64, required, tag = "3")]
    pub subnet_prefix: u64,
    /// `InterfaceId` = 4.
    #[prost(fixed64, required, tag = "4")]
    pub interface_id: u64,
    /// `MtuIndex` = 5.
    #[prost(uint32, required, tag = "5")]
    pub mtu_index: u32,
    /// `Read` = 6, the only member of the oneof `Verb`.
    #[prost(message, optional, tag = "6")]
    pub read: Option<RdmaCred>,
    /// `RdmaChecksum` = 11.
    #[prost(bool, optional, tag = "11")]
    pub rdma_checksum: Option<bool>,
}

/// YDB's `TRdmaCred` (newest YDB).
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct RdmaCred {
    /// `Address` = 1.
    #[prost(fixed64, required, tag = "1")]
    pub address: u64,
    /// `Size` = 2.
    #[prost(uint64, required, tag = "2")]
    pub size: u64,
    /// `Rkey` = 3.
    #[prost(fixed32, required, tag = "3")]
    pub rkey: u32,
}

/// YDB's `TExternalDataChannelParams` and `TContinuationParams` (identical): the ExBlock
/// after a version-4 or version-3 initial packet on an XDC socket. A peer that never
/// negotiates XDC never sends it.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct XdcParams {
    /// `HandshakeId` = 1: the 32 bytes of the handshake that granted XDC.
    #[prost(bytes = "vec", optional, tag = "1")]
    pub handshake_id: Option<Vec<u8>>,
}

codec!(HandshakeRequest, check_request);
codec!(HandshakeReply, check_reply);
codec!(HandshakeSuccess, check_success);
codec!(XdcParams, |_| Ok(()));

// Presence of the required fields. prost decodes an absent `required` field as its default,
// so presence is read by decoding the same bytes once more into these shadow messages, whose
// fields have the same numbers and wire types but are all `optional` (strings as bytes: the
// UTF-8 check was done by the first decode).

#[derive(Clone, PartialEq, prost::Message)]
struct RequestPresence {
    #[prost(uint64, optional, tag = "1")]
    protocol: Option<u64>,
    #[prost(uint64, optional, tag = "2")]
    program_pid: Option<u64>,
    #[prost(uint64, optional, tag = "3")]
    program_start_time: Option<u64>,
    #[prost(uint64, optional, tag = "4")]
    serial: Option<u64>,
    #[prost(uint32, optional, tag = "5")]
    receiver_node_id: Option<u32>,
    #[prost(bytes = "vec", optional, tag = "6")]
    sender_actor_id: Option<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct SuccessPresence {
    #[prost(uint64, optional, tag = "1")]
    protocol: Option<u64>,
    #[prost(uint64, optional, tag = "2")]
    program_pid: Option<u64>,
    #[prost(uint64, optional, tag = "3")]
    program_start_time: Option<u64>,
    #[prost(uint64, optional, tag = "4")]
    serial: Option<u64>,
    #[prost(bytes = "vec", optional, tag = "5")]
    sender_actor_id: Option<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ReplyPresence {
    #[prost(message, optional, tag = "1")]
    success: Option<SuccessPresence>,
}

fn check_request(bytes: &[u8]) -> Result<(), WireError> {
    let p: RequestPresence = prost::Message::decode(bytes)?;
    require(
        "THandshakeRequest",
        &[
            ("Protocol", p.protocol.is_some()),
            ("ProgramPID", p.program_pid.is_some()),
            ("ProgramStartTime", p.program_start_time.is_some()),
            ("Serial", p.serial.is_some()),
            ("ReceiverNodeId", p.receiver_node_id.is_some()),
            ("SenderActorId", p.sender_actor_id.is_some()),
        ],
    )
}

fn success_present(p: &SuccessPresence) -> Result<(), WireError> {
    require(
        "THandshakeSuccess",
        &[
            ("Protocol", p.protocol.is_some()),
            ("ProgramPID", p.program_pid.is_some()),
            ("ProgramStartTime", p.program_start_time.is_some()),
            ("Serial", p.serial.is_some()),
            ("SenderActorId", p.sender_actor_id.is_some()),
        ],
    )
}

fn check_success(bytes: &[u8]) -> Result<(), WireError> {
    success_present(&prost::Message::decode(bytes)?)
}

fn check_reply(bytes: &[u8]) -> Result<(), WireError> {
    let p: ReplyPresence = prost::Message::decode(bytes)?;
    match &p.success {
        Some(success) => success_present(success),
        None => Ok(()),
    }
}
