//! [`ExBlock`]: the frame that carries a handshake protobuf.

use super::error::{need, WireError};
use super::{crc32c, le_u32};

/// A handshake payload frame (YDB's `TExHeader` and the bytes after it).
///
/// | offset | size | field | notes |
/// |---|---|---|---|
/// | 0 | 4 | checksum | u32 LE: CRC32C of bytes 4..8 + size (the size field, then the data); the checksum itself is not covered |
/// | 4 | 4 | size | u32 LE: the number of data bytes, at most [`MAX_SIZE`](Self::MAX_SIZE) (1 MiB) |
/// | 8 | size | [`payload`](Self::payload) | a serialized protobuf: [`HandshakeRequest`](super::HandshakeRequest), [`HandshakeReply`](super::HandshakeReply), ... |
///
/// A checksum mismatch is transient for YDB (retry), an oversized block permanent.
///
/// # Examples
///
/// ```
/// use agentbox::interconnect::wire::{ExBlock, HandshakeReply};
///
/// let reply = HandshakeReply {
///     error_explanation: Some("go away".into()),
///     ..Default::default()
/// };
/// let block = ExBlock::new(reply.encode());
/// let bytes = block.encode();
/// assert_eq!(bytes.len(), ExBlock::HEADER_LEN + block.payload.len());
///
/// let (decoded, used) = ExBlock::decode(&bytes)?;
/// assert_eq!(used, bytes.len());
/// assert_eq!(HandshakeReply::decode(&decoded.payload)?.0, reply);
/// # Ok::<(), agentbox::interconnect::wire::WireError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ExBlock {
    /// The protobuf bytes.
    pub payload: Vec<u8>,
}

impl ExBlock {
    /// The header length: checksum and size, 8 bytes.
    pub const HEADER_LEN: usize = 8;
    /// The largest payload, 1 MiB (1 048 576 bytes), on either side.
    pub const MAX_SIZE: usize = 1 << 20;

    /// A block holding `payload`.
    pub fn new(payload: Vec<u8>) -> ExBlock {
        ExBlock { payload }
    }

    /// The header and the payload.
    ///
    /// # Panics
    ///
    /// If the payload is over [`MAX_SIZE`](Self::MAX_SIZE), as YDB's sender asserts; see
    /// [`try_encode`](Self::try_encode).
    pub fn encode(&self) -> Vec<u8> {
        match self.try_encode() {
            Ok(bytes) => bytes,
            Err(e) => panic!("ExBlock::encode: {e}"),
        }
    }

    /// [`encode`](Self::encode) that reports an oversized payload instead of panicking.
    ///
    /// # Errors
    ///
    /// [`WireError::TooLarge`] if the payload is over [`MAX_SIZE`](Self::MAX_SIZE).
    pub fn try_encode(&self) -> Result<Vec<u8>, WireError> {
        let size = self.payload.len();
        if size > Self::MAX_SIZE {
            return Err(WireError::TooLarge {
                size,
                max: Self::MAX_SIZE,
            });
        }
        let mut out = Vec::with_capacity(Self::HEADER_LEN + size);
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&(size as u32).to_le_bytes());
        out.extend_from_slice(&self.payload);
        let checksum = crc32c(&out[4..]);
        out[..4].copy_from_slice(&checksum.to_le_bytes());
        Ok(out)
    }

    /// Reads a block from the start of `bytes`; returns it and the bytes consumed (8 +
    /// size).
    ///
    /// # Errors
    ///
    /// In YDB's order of checks:
    /// - [`WireError::Truncated`] with fewer than 8 bytes;
    /// - [`WireError::TooLarge`] if the size field is over 1 MiB (checked before the data
    ///   is awaited, so a reader never buffers more than 1 MiB);
    /// - [`WireError::Truncated`] if the data is not all there;
    /// - [`WireError::BadChecksum`] if the checksum does not match.
    pub fn decode(bytes: &[u8]) -> Result<(ExBlock, usize), WireError> {
        need(bytes, Self::HEADER_LEN)?;
        let size = le_u32(bytes, 4) as usize;
        if size > Self::MAX_SIZE {
            return Err(WireError::TooLarge {
                size,
                max: Self::MAX_SIZE,
            });
        }
        let total = Self::HEADER_LEN + size;
        need(bytes, total)?;
        let expected = le_u32(bytes, 0);
        let actual = crc32c(&bytes[4..total]);
        if expected != actual {
            return Err(WireError::BadChecksum { expected, actual });
        }
        let block = ExBlock {
            payload: bytes[Self::HEADER_LEN..total].to_vec(),
        };
        Ok((block, total))
    }
}
