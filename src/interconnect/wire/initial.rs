//! [`InitialPacket`]: the 52 bytes each side sends first on a new connection.

use super::error::{need, WireError};
use super::{crc32c, le_u64, PROTOCOL_VERSION, XDC_CONTINUATION_VERSION, XDC_STREAM_VERSION};
use crate::ActorId;

/// The first frame on every connection, from both sides (YDB's `TInitialPacket`).
///
/// 52 bytes, packed, little-endian:
///
/// | offset | size | field | notes |
/// |---|---|---|---|
/// | 0 | 16 | [`self_virtual_id`](Self::self_virtual_id) | raw `ActorId`: `x1` LE, then `x2` LE |
/// | 16 | 16 | [`peer_virtual_id`](Self::peer_virtual_id) | all zero for a new session |
/// | 32 | 8 | [`next_packet`](Self::next_packet) | u64: the last data serial received **and processed** (a confirm value, not that + 1); 0 for a new session |
/// | 40 | 8 | [`version`](Self::version) | u64: 2 main stream, 3 XDC continuation, 4 XDC stream |
/// | 48 | 4 | checksum | CRC32C of bytes 0..48, computed by [`encode`](Self::encode), verified by [`decode`](Self::decode) |
///
/// The connecting side sends one first; the accepting side answers with its own: all zero
/// with version 2 for a new session (or a refused resume), or its own and the connector's
/// virtual ids and its `next_packet` to resume. See YDB_WIRE.md §2.2.
///
/// # Examples
///
/// ```
/// use agentbox::interconnect::wire::InitialPacket;
/// use agentbox::ActorId;
///
/// let hello = InitialPacket::new_session(ActorId::new(1, 0xABCD, 0));
/// let bytes = hello.encode();
/// assert_eq!(bytes.len(), InitialPacket::LEN);
/// assert_eq!(InitialPacket::decode(&bytes)?, (hello, 52));
/// # Ok::<(), agentbox::interconnect::wire::WireError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct InitialPacket {
    /// The sender's session virtual id (`[own node:fresh local id:0]`), or a service id on
    /// an XDC stream or a cookie-check connection, or empty in a refusing reply.
    pub self_virtual_id: ActorId,
    /// The peer's session virtual id as the sender knows it; empty for a new session.
    pub peer_virtual_id: ActorId,
    /// The last data-packet serial this side has received and processed (YDB's
    /// `NextPacket`, a confirm value despite its name); 0 for a new session.
    pub next_packet: u64,
    /// [`PROTOCOL_VERSION`] (2), [`XDC_CONTINUATION_VERSION`] (3) or
    /// [`XDC_STREAM_VERSION`] (4).
    pub version: u64,
}

impl InitialPacket {
    /// The encoded length: 52 bytes.
    pub const LEN: usize = 52;

    /// The connector's packet for a new session: its virtual id, an empty peer id,
    /// `next_packet` 0, version 2.
    pub const fn new_session(self_virtual_id: ActorId) -> InitialPacket {
        InitialPacket {
            self_virtual_id,
            peer_virtual_id: ActorId::EMPTY,
            next_packet: 0,
            version: PROTOCOL_VERSION,
        }
    }

    /// A packet that resumes a session (either side): both virtual ids and the last data
    /// serial received and processed, version 2.
    pub const fn resume(
        self_virtual_id: ActorId,
        peer_virtual_id: ActorId,
        last_received: u64,
    ) -> InitialPacket {
        InitialPacket {
            self_virtual_id,
            peer_virtual_id,
            next_packet: last_received,
            version: PROTOCOL_VERSION,
        }
    }

    /// The accepting side's reply that starts a new session or refuses a resume: all-zero
    /// ids, `next_packet` 0, version 2.
    pub const fn empty_reply() -> InitialPacket {
        InitialPacket::new_session(ActorId::EMPTY)
    }

    /// The 52 bytes, checksum included.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::LEN);
        out.extend_from_slice(&self.self_virtual_id.to_le_bytes());
        out.extend_from_slice(&self.peer_virtual_id.to_le_bytes());
        out.extend_from_slice(&self.next_packet.to_le_bytes());
        out.extend_from_slice(&self.version.to_le_bytes());
        let checksum = crc32c(&out);
        out.extend_from_slice(&checksum.to_le_bytes());
        out
    }

    /// Reads a packet from the start of `bytes`; returns it and the bytes consumed (52).
    ///
    /// Bytes after the first 52 are left alone.
    ///
    /// # Errors
    ///
    /// - [`WireError::Truncated`] with fewer than 52 bytes;
    /// - [`WireError::BadChecksum`] if bytes 48..52 are not the CRC32C of bytes 0..48 (YDB
    ///   retries the connection);
    /// - [`WireError::BadVersion`] if the version is not 2, 3 or 4. The connecting side must
    ///   further require exactly 2 in the reply.
    pub fn decode(bytes: &[u8]) -> Result<(InitialPacket, usize), WireError> {
        need(bytes, Self::LEN)?;
        let expected = u32::from_le_bytes([bytes[48], bytes[49], bytes[50], bytes[51]]);
        let actual = crc32c(&bytes[..48]);
        if expected != actual {
            return Err(WireError::BadChecksum { expected, actual });
        }
        let version = le_u64(bytes, 40);
        if !(PROTOCOL_VERSION..=XDC_STREAM_VERSION).contains(&version) {
            return Err(WireError::BadVersion { version });
        }
        let packet = InitialPacket {
            self_virtual_id: ActorId::from_raw(le_u64(bytes, 0), le_u64(bytes, 8)),
            peer_virtual_id: ActorId::from_raw(le_u64(bytes, 16), le_u64(bytes, 24)),
            next_packet: le_u64(bytes, 32),
            version,
        };
        Ok((packet, Self::LEN))
    }
}

// The versions are consecutive, which `decode`'s range check relies on.
const _: () = assert!(
    XDC_CONTINUATION_VERSION == PROTOCOL_VERSION + 1 && XDC_STREAM_VERSION == PROTOCOL_VERSION + 2
);
