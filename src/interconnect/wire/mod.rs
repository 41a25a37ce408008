//! The wire codec: every frame of YDB's interconnect protocol, byte for byte, with no I/O.
//!
//! Each frame type has `encode(&self) -> Vec<u8>` and `decode(&[u8]) -> Result<(Self,
//! usize), WireError>`, the `usize` being the number of bytes consumed from the start of
//! the input (the rest is left for the next frame). Checksums are computed by `encode` and
//! verified by `decode`. Decoders never panic: malformed, truncated or oversized input is a
//! [`WireError`], and [`WireError::Truncated`] says how many bytes the frame needs, so a
//! reader can buffer and retry. All integers are little-endian; "CRC32C" is CRC-32C
//! (Castagnoli, reflected polynomial `0x82F63B78`, preset and final xor `0xFFFFFFFF`), as
//! YDB's `Crc32c`.
//!
//! | frame | type | size | where |
//! |---|---|---|---|
//! | initial packet | [`InitialPacket`] | 52 | first, from both sides of every connection |
//! | handshake block | [`ExBlock`] | 8 + ≤ 1 MiB | after the initial packets of a new session, holding a protobuf |
//! | handshake messages | [`HandshakeRequest`], [`HandshakeReply`] ([`HandshakeSuccess`]) | protobuf | inside ExBlocks |
//! | packet | [`Packet`] ([`PacketKind`]) | 22 + ≤ 65 535 | the data stream: data, confirm, ping, clock |
//! | channel part | [`ChannelPart`] ([`parts`], [`PartRef`]) | 4 + ≤ 65 535 | inside a data packet's payload |
//! | event descriptor | [`EventDescriptor`] | 80 | the last part of every event |
//!
//! A connection of a new session, as the connecting side sees it:
//!
//! 1. send an [`InitialPacket::new_session`]; read the peer's (all-zero ids, version 2);
//! 2. send an [`ExBlock`] holding a [`HandshakeRequest`]; read one holding a
//!    [`HandshakeReply`] whose [`HandshakeSuccess`] names the peer's session;
//! 3. then [`Packet`]s both ways, whose payloads are [`ChannelPart`]s: the body bytes of an
//!    event on a channel, then its [`EventDescriptor`].
//!
//! A resumed session skips step 2 ([`InitialPacket::resume`] from both sides). The facts and
//! their sources in YDB are in the project's `YDB_WIRE.md`.
//!
//! # Examples
//!
//! ```
//! use agentbox::interconnect::wire::{
//!     parts, ChannelPart, EventDescriptor, ExBlock, HandshakeRequest, InitialPacket, Packet,
//!     HANDSHAKE_PROTOCOL,
//! };
//! use agentbox::ActorId;
//!
//! // 1. The initial packet of a new session.
//! let session = ActorId::new(1, 0x5EED, 0);
//! let mut stream = InitialPacket::new_session(session).encode();
//!
//! // 2. The handshake request, in an ExBlock.
//! let request = HandshakeRequest {
//!     protocol: HANDSHAKE_PROTOCOL,
//!     serial: session.local_id(),
//!     receiver_node_id: 2,
//!     sender_actor_id: session.to_string(),
//!     request_modern_frame: Some(true),
//!     request_extended_trace_fmt: Some(true),
//!     ..Default::default()
//! };
//! stream.extend(ExBlock::new(request.encode()).encode());
//!
//! // 3. One event with a 3-byte body on channel 0, in data packet 1.
//! let descriptor = EventDescriptor {
//!     event_type: 0x1000_0000,
//!     recipient: ActorId::new(2, 7, 0),
//!     sender: ActorId::new(1, 9, 0),
//!     ..Default::default()
//! };
//! let mut payload = ChannelPart::inline(0, b"abc".to_vec()).encode();
//! payload.extend(ChannelPart::descriptor(0, &descriptor).encode());
//! stream.extend(Packet::data(0, 1, payload).encode());
//!
//! // The receiving side reads the frames back, one after the other.
//! let (hello, n) = InitialPacket::decode(&stream)?;
//! assert_eq!(hello.self_virtual_id, session);
//! let (block, m) = ExBlock::decode(&stream[n..])?;
//! assert_eq!(HandshakeRequest::decode(&block.payload)?.0, request);
//! let (packet, k) = Packet::decode(&stream[n + m..])?;
//! assert_eq!(n + m + k, stream.len());
//! let mut body = Vec::new();
//! for part in parts(&packet.payload) {
//!     let part = part?;
//!     if part.is_descriptor() {
//!         let (d, _) = EventDescriptor::decode(part.bytes)?;
//!         assert_eq!((d, body.as_slice()), (descriptor, &b"abc"[..]));
//!     } else {
//!         body.extend_from_slice(part.bytes);
//!     }
//! }
//! # Ok::<(), agentbox::interconnect::wire::WireError>(())
//! ```

mod descriptor;
mod error;
mod exblock;
mod handshake;
mod initial;
mod packet;
mod parts;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_handshake;

pub use descriptor::EventDescriptor;
pub use error::WireError;
pub use exblock::ExBlock;
pub use handshake::{
    ClusterUuids, HandshakeReply, HandshakeRequest, HandshakeSuccess, KeyValuePair, RdmaCred,
    RdmaHandshake, ScopeId, SuccessRdma, XdcParams, HANDSHAKE_PROTOCOL,
};
pub use initial::InitialPacket;
pub use packet::{Packet, PacketChecksum, PacketKind};
pub use parts::{parts, ChannelPart, PartRef, Parts};

/// [`InitialPacket::version`] of the main stream: 2 (`INTERCONNECT_PROTOCOL_VERSION`).
pub const PROTOCOL_VERSION: u64 = 2;
/// [`InitialPacket::version`] of an XDC-session continuation: 3.
pub const XDC_CONTINUATION_VERSION: u64 = 3;
/// [`InitialPacket::version`] of an XDC stream socket: 4.
pub const XDC_STREAM_VERSION: u64 = 4;

/// CRC-32C of `bytes` as YDB's `Crc32c` computes it (check value:
/// `crc32c(b"123456789") == 0xE3069283`). Hardware-accelerated where the CPU allows.
///
/// # Examples
///
/// ```
/// use agentbox::interconnect::wire::{crc32c, crc32c_extend};
///
/// assert_eq!(crc32c(b"123456789"), 0xE306_9283);
/// assert_eq!(crc32c_extend(crc32c(b"1234"), b"56789"), crc32c(b"123456789"));
/// ```
pub fn crc32c(bytes: &[u8]) -> u32 {
    ::crc32c::crc32c(bytes)
}

/// Continues a finished CRC-32C with more bytes, as YDB's `Crc32cExtend`:
/// `crc32c_extend(crc32c(a), b) == crc32c(a ‖ b)` and `crc32c_extend(0, b) == crc32c(b)`.
pub fn crc32c_extend(crc: u32, bytes: &[u8]) -> u32 {
    ::crc32c::crc32c_append(crc, bytes)
}

// Little-endian reads at offsets the caller has checked against the length.

fn le_u16(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

fn le_u32(bytes: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(b)
}

fn le_u64(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(b)
}
