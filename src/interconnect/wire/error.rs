//! [`WireError`]: why bytes could not be decoded (or a value could not be encoded).

use thiserror::Error;

/// Why a frame could not be decoded, or a value could not be encoded.
///
/// Every decoder of [`wire`](super) returns this on malformed, truncated or oversized
/// input; none of them panics, whatever the bytes. YDB's reaction to each case is noted on
/// the variant: the session layer maps them to "retry" (transient) or "give up"
/// (permanent).
///
/// # Examples
///
/// ```
/// use agentbox::interconnect::wire::{InitialPacket, WireError};
///
/// let err = InitialPacket::decode(&[0; 10]).unwrap_err();
/// assert_eq!(err, WireError::Truncated { need: 52, have: 10 });
/// assert!(err.is_truncated()); // read more bytes, then decode again
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum WireError {
    /// The input ends before the frame does: `need` bytes make the whole frame (as far as
    /// its header tells), `have` were given.
    ///
    /// Not an error of the peer: a reader that gets it reads at least `need - have` more
    /// bytes and decodes again.
    #[error("truncated frame: {need} bytes needed, {have} available")]
    Truncated {
        /// The length of the whole frame, header included, as far as it is known.
        need: usize,
        /// The number of bytes given.
        have: usize,
    },

    /// The checksum carried by the frame does not match the bytes it covers.
    ///
    /// YDB treats it as transient: the connection is dropped and a new one resumes the
    /// session.
    #[error("checksum mismatch: the frame says {expected:#010x}, the bytes give {actual:#010x}")]
    BadChecksum {
        /// The checksum written in the frame.
        expected: u32,
        /// The checksum computed over the bytes received.
        actual: u32,
    },

    /// A size is over its limit: an ExBlock over 1 MiB on decode, or a payload that does not
    /// fit its length field on encode.
    ///
    /// YDB treats an oversized ExBlock as a permanent failure.
    #[error("size {size} is over the limit of {max}")]
    TooLarge {
        /// The size found (decode) or asked for (encode).
        size: usize,
        /// The largest size allowed there.
        max: usize,
    },

    /// An initial packet with a version other than 2, 3 or 4.
    #[error("unknown initial packet version {version} (expected 2, 3 or 4)")]
    BadVersion {
        /// The version found.
        version: u64,
    },

    /// A channel part flagged as an event descriptor (`0x8000`) whose size is not 80.
    ///
    /// YDB destroys the session (FormatError).
    #[error("event descriptor part of {size} bytes (must be 80)")]
    BadDescriptorSize {
        /// The size found in the part header.
        size: u16,
    },

    /// A channel number over 12 bits, or part flags outside bits 12..16, given to an encoder.
    #[error("channel part head out of range: channel {channel:#x}, flags {flags:#x}")]
    BadPartHead {
        /// The channel asked for (at most `0x0FFF`).
        channel: u16,
        /// The flags asked for (bits 12..16 only).
        flags: u16,
    },

    /// The bytes are not a valid protobuf message of the expected type (bad varint, wrong
    /// wire type for a known field, a string that is not UTF-8, truncated field, ...).
    ///
    /// YDB treats it as a permanent handshake failure.
    #[error("malformed protobuf: {0}")]
    Protobuf(#[from] prost::DecodeError),

    /// A proto2 `required` field is absent. YDB's C++ parser refuses such a message, and so
    /// does this one.
    #[error("required field {message}.{field} is absent")]
    MissingField {
        /// The protobuf message, by its YDB name (`THandshakeRequest`, ...).
        message: &'static str,
        /// The field, by its YDB name (`ProgramPID`, ...).
        field: &'static str,
    },
}

impl WireError {
    /// Whether this is [`WireError::Truncated`]: more bytes may make the frame whole.
    pub fn is_truncated(&self) -> bool {
        matches!(self, WireError::Truncated { .. })
    }
}

/// `Err(Truncated)` unless `bytes` holds at least `need` bytes.
pub(crate) fn need(bytes: &[u8], need: usize) -> Result<(), WireError> {
    if bytes.len() < need {
        Err(WireError::Truncated {
            need,
            have: bytes.len(),
        })
    } else {
        Ok(())
    }
}
