//! [`EventDescriptor`]: the 80 bytes that end every event on the wire.

use super::error::{need, WireError};
use super::{crc32c, le_u32, le_u64};
use crate::ActorId;

/// The descriptor part of an event (YDB's `TEventDescr2`): everything but the body.
///
/// 80 bytes, packed, little-endian:
///
/// | offset | size | field | notes |
/// |---|---|---|---|
/// | 0 | 4 | [`event_type`](Self::event_type) | u32 |
/// | 4 | 4 | [`flags`](Self::flags) | u32: the handle's flags minus ForwardOnNondelivery (`0x02`) and SubscribeOnSession (`0x04`), plus ExtendedFormat (`0x20`) for an extended-format body; channel bits 20..32 kept |
/// | 8 | 16 | [`recipient`](Self::recipient) | raw `ActorId`: `x1` LE, then `x2` LE |
/// | 24 | 16 | [`sender`](Self::sender) | raw `ActorId` |
/// | 40 | 8 | [`cookie`](Self::cookie) | u64 |
/// | 48 | 28 | [`trace_id`](Self::trace_id) | Wilson trace: trace id (2 × u64), span id (u64), u32 of verbosity (4 bits) and time to live (12 bits); all zero = not traced |
/// | 76 | 4 | [`payload_checksum`](Self::payload_checksum) | u32: CRC32C of the body, or 0 = not checked |
///
/// The codec takes the fields as they are: stripping or adding flags is the sender's job.
/// YDB writes a zero `payload_checksum` (its event checksums are compiled out) and checks
/// only a non-zero one, so a sender may write either 0 or [`body_checksum`](Self::body_checksum).
///
/// # Examples
///
/// ```
/// use agentbox::interconnect::wire::EventDescriptor;
/// use agentbox::ActorId;
///
/// let body = b"payload";
/// let descriptor = EventDescriptor {
///     event_type: 0x1000_0001,
///     flags: 0x01 | 3 << 20, // TrackDelivery, channel 3
///     recipient: ActorId::new(2, 77, 1),
///     sender: ActorId::new(1, 55, 4),
///     cookie: 42,
///     payload_checksum: EventDescriptor::body_checksum(body),
///     ..Default::default()
/// };
/// let bytes = descriptor.encode();
/// assert_eq!(bytes.len(), EventDescriptor::LEN);
/// assert_eq!(EventDescriptor::decode(&bytes)?, (descriptor, 80));
/// assert_eq!(descriptor.channel(), 3);
/// descriptor.verify_body(body)?;
/// # Ok::<(), agentbox::interconnect::wire::WireError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EventDescriptor {
    /// The event type.
    pub event_type: u32,
    /// The wire flags, channel in bits 20..32 (see the table above).
    pub flags: u32,
    /// The recipient, resolved on the receiving node (service ids included).
    pub recipient: ActorId,
    /// The sender.
    pub sender: ActorId,
    /// The cookie, opaque; replies and Undelivered echo it.
    pub cookie: u64,
    /// The serialized Wilson trace id; all zero when not traced.
    pub trace_id: [u8; 28],
    /// CRC32C of the event body, or 0 when the sender did not compute it.
    pub payload_checksum: u32,
}

impl EventDescriptor {
    /// The encoded length: 80 bytes.
    pub const LEN: usize = 80;
    /// The wire-only flag of a body in YDB's extended `TEventPB` format; the receiver
    /// strips it before delivery.
    pub const EXTENDED_FORMAT: u32 = 0x20;

    /// The channel: bits 20..32 of the flags.
    pub fn channel(&self) -> u16 {
        (self.flags >> 20) as u16
    }

    /// Whether the event is traced: either word of the trace id (bytes 0..16) is non-zero.
    pub fn is_traced(&self) -> bool {
        self.trace_id[..16].iter().any(|&b| b != 0)
    }

    /// The checksum to put in [`payload_checksum`](Self::payload_checksum): CRC32C of the
    /// body (the concatenated inline parts, in order).
    pub fn body_checksum(body: &[u8]) -> u32 {
        crc32c(body)
    }

    /// Checks `body` against [`payload_checksum`](Self::payload_checksum), as YDB's
    /// receiver does: a zero checksum is not checked.
    ///
    /// # Errors
    ///
    /// [`WireError::BadChecksum`] if the checksum is non-zero and does not match (YDB
    /// drops the connection).
    pub fn verify_body(&self, body: &[u8]) -> Result<(), WireError> {
        if self.payload_checksum == 0 {
            return Ok(());
        }
        let actual = crc32c(body);
        if actual != self.payload_checksum {
            return Err(WireError::BadChecksum {
                expected: self.payload_checksum,
                actual,
            });
        }
        Ok(())
    }

    /// The 80 bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::LEN);
        out.extend_from_slice(&self.event_type.to_le_bytes());
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.extend_from_slice(&self.recipient.to_le_bytes());
        out.extend_from_slice(&self.sender.to_le_bytes());
        out.extend_from_slice(&self.cookie.to_le_bytes());
        out.extend_from_slice(&self.trace_id);
        out.extend_from_slice(&self.payload_checksum.to_le_bytes());
        out
    }

    /// Reads a descriptor from the start of `bytes`; returns it and the bytes consumed
    /// (80). The body checksum is not checked here: see [`verify_body`](Self::verify_body).
    ///
    /// # Errors
    ///
    /// [`WireError::Truncated`] with fewer than 80 bytes.
    pub fn decode(bytes: &[u8]) -> Result<(EventDescriptor, usize), WireError> {
        need(bytes, Self::LEN)?;
        let mut trace_id = [0u8; 28];
        trace_id.copy_from_slice(&bytes[48..76]);
        let descriptor = EventDescriptor {
            event_type: le_u32(bytes, 0),
            flags: le_u32(bytes, 4),
            recipient: ActorId::from_raw(le_u64(bytes, 8), le_u64(bytes, 16)),
            sender: ActorId::from_raw(le_u64(bytes, 24), le_u64(bytes, 32)),
            cookie: le_u64(bytes, 40),
            trace_id,
            payload_checksum: le_u32(bytes, 76),
        };
        Ok((descriptor, Self::LEN))
    }
}
