//! [`ChannelPart`]: the pieces of events inside a data packet's payload.

use std::fmt;

use super::descriptor::EventDescriptor;
use super::error::{need, WireError};
use super::le_u16;

/// One part of a data packet's payload: a 4-byte head and `size` bytes (YDB's
/// `TChannelPart` and the bytes after it).
///
/// | offset | size | field | notes |
/// |---|---|---|---|
/// | 0 | 2 | channel and flags | u16 LE: bits 0..12 [`channel`](Self::channel) (mask `0x0FFF`); bits 12..16 [`flags`](Self::flags): `0x8000` [`DESCRIPTOR`](Self::DESCRIPTOR), `0x4000` [`XDC`](Self::XDC) |
/// | 2 | 2 | size | u16 LE: the number of [`bytes`](Self::bytes) that follow |
/// | 4 | size | bytes | event body bytes, the 80-byte descriptor, or XDC commands |
///
/// An event on channel C travels as zero or more inline parts `{C, n}` whose bytes,
/// concatenated, are its body, then one part `{C | 0x8000, 80}` holding its
/// [`EventDescriptor`]. Parts of different channels interleave freely, even within one
/// packet, and an event may span packets: order is kept per channel only. Bits 12 and 13
/// have no meaning; YDB ignores them, and they are kept here as they came.
///
/// # Examples
///
/// ```
/// use agentbox::interconnect::wire::{parts, ChannelPart, EventDescriptor};
///
/// let body = ChannelPart::inline(5, b"hello".to_vec());
/// let end = ChannelPart::descriptor(5, &EventDescriptor::default());
/// assert_eq!(&body.encode()[..4], &[0x05, 0x00, 0x05, 0x00]);
/// assert_eq!(&end.encode()[..4], &[0x05, 0x80, 80, 0x00]);
///
/// let mut payload = body.encode();
/// payload.extend(end.encode());
/// let decoded: Vec<ChannelPart> =
///     parts(&payload).map(|p| p.map(|p| p.to_part())).collect::<Result<_, _>>()?;
/// assert_eq!(decoded, [body, end]);
/// # Ok::<(), agentbox::interconnect::wire::WireError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ChannelPart {
    /// The channel, 0..=0x0FFF.
    pub channel: u16,
    /// The flag bits of the head (bits 12..16 only): [`DESCRIPTOR`](Self::DESCRIPTOR),
    /// [`XDC`](Self::XDC), or 0 for inline event bytes.
    pub flags: u16,
    /// The bytes after the head.
    pub bytes: Vec<u8>,
}

impl ChannelPart {
    /// The head length: 4 bytes.
    pub const HEADER_LEN: usize = 4;
    /// The channel bits of the head (YDB's `ChannelMask`).
    pub const CHANNEL_MASK: u16 = 0x0FFF;
    /// The flag bits of the head.
    pub const FLAGS_MASK: u16 = 0xF000;
    /// This part is the event descriptor that ends an event (YDB's `LastPartFlag`).
    pub const DESCRIPTOR: u16 = 0x8000;
    /// This part holds external-data-channel commands (YDB's `XdcFlag`); only seen when XDC
    /// was negotiated.
    pub const XDC: u16 = 0x4000;
    /// The largest `bytes`, `u16::MAX`.
    pub const MAX_SIZE: usize = u16::MAX as usize;

    /// Inline event body bytes on `channel`.
    pub fn inline(channel: u16, bytes: Vec<u8>) -> ChannelPart {
        ChannelPart {
            channel,
            flags: 0,
            bytes,
        }
    }

    /// The part that ends an event on `channel`: its 80-byte descriptor.
    pub fn descriptor(channel: u16, descriptor: &EventDescriptor) -> ChannelPart {
        ChannelPart {
            channel,
            flags: Self::DESCRIPTOR,
            bytes: descriptor.encode(),
        }
    }

    /// Whether this part is an event descriptor (flag `0x8000`).
    pub fn is_descriptor(&self) -> bool {
        self.flags & Self::DESCRIPTOR != 0
    }

    /// Whether this part holds XDC commands (flag `0x4000`).
    pub fn is_xdc(&self) -> bool {
        self.flags & Self::XDC != 0
    }

    /// The borrowed form of this part.
    pub fn as_part_ref(&self) -> PartRef<'_> {
        PartRef {
            channel: self.channel,
            flags: self.flags,
            bytes: &self.bytes,
        }
    }

    /// The 4-byte head and the bytes.
    ///
    /// # Panics
    ///
    /// If [`try_encode`](Self::try_encode) fails: a channel over `0x0FFF`, flags outside
    /// bits 12..16, or more than `u16::MAX` bytes.
    pub fn encode(&self) -> Vec<u8> {
        match self.try_encode() {
            Ok(bytes) => bytes,
            Err(e) => panic!("ChannelPart::encode: {e}"),
        }
    }

    /// [`encode`](Self::encode) that reports a bad part instead of panicking.
    ///
    /// # Errors
    ///
    /// - [`WireError::BadPartHead`] if the channel is over `0x0FFF` or the flags have bits
    ///   outside `0xF000`;
    /// - [`WireError::TooLarge`] if there are more than `u16::MAX` bytes.
    pub fn try_encode(&self) -> Result<Vec<u8>, WireError> {
        let mut out = Vec::with_capacity(Self::HEADER_LEN + self.bytes.len());
        self.as_part_ref().encode_into(&mut out)?;
        Ok(out)
    }

    /// Reads one part from the start of `bytes`; returns it and the bytes consumed (4 +
    /// size). See [`PartRef::decode`] for the errors, and [`parts`] to read a whole payload.
    ///
    /// # Errors
    ///
    /// As [`PartRef::decode`].
    pub fn decode(bytes: &[u8]) -> Result<(ChannelPart, usize), WireError> {
        let (part, used) = PartRef::decode(bytes)?;
        Ok((part.to_part(), used))
    }
}

/// A [`ChannelPart`] borrowed from a payload: what [`parts`] yields, with no copy.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PartRef<'a> {
    /// The channel, 0..=0x0FFF.
    pub channel: u16,
    /// The flag bits (bits 12..16 only).
    pub flags: u16,
    /// The bytes after the head.
    pub bytes: &'a [u8],
}

impl fmt::Debug for PartRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PartRef")
            .field("channel", &self.channel)
            .field("flags", &format_args!("{:#06x}", self.flags))
            .field("len", &self.bytes.len())
            .finish()
    }
}

impl<'a> PartRef<'a> {
    /// Whether this part is an event descriptor (flag `0x8000`).
    pub fn is_descriptor(&self) -> bool {
        self.flags & ChannelPart::DESCRIPTOR != 0
    }

    /// Whether this part holds XDC commands (flag `0x4000`).
    pub fn is_xdc(&self) -> bool {
        self.flags & ChannelPart::XDC != 0
    }

    /// The owned copy.
    pub fn to_part(&self) -> ChannelPart {
        ChannelPart {
            channel: self.channel,
            flags: self.flags,
            bytes: self.bytes.to_vec(),
        }
    }

    /// Appends the head and the bytes to `out`.
    ///
    /// # Errors
    ///
    /// As [`ChannelPart::try_encode`]; nothing is appended then.
    pub fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), WireError> {
        if self.channel & !ChannelPart::CHANNEL_MASK != 0
            || self.flags & !ChannelPart::FLAGS_MASK != 0
        {
            return Err(WireError::BadPartHead {
                channel: self.channel,
                flags: self.flags,
            });
        }
        let size = self.bytes.len();
        if size > ChannelPart::MAX_SIZE {
            return Err(WireError::TooLarge {
                size,
                max: ChannelPart::MAX_SIZE,
            });
        }
        out.extend_from_slice(&(self.channel | self.flags).to_le_bytes());
        out.extend_from_slice(&(size as u16).to_le_bytes());
        out.extend_from_slice(self.bytes);
        Ok(())
    }

    /// Reads one part from the start of `bytes`, borrowing its bytes; returns it and the
    /// bytes consumed (4 + size).
    ///
    /// # Errors
    ///
    /// - [`WireError::Truncated`] if the head or the bytes it announces are cut short (YDB
    ///   destroys the session when this happens at the end of a packet's payload);
    /// - [`WireError::BadDescriptorSize`] if the part is flagged as a descriptor and its
    ///   size is not 80.
    pub fn decode(bytes: &'a [u8]) -> Result<(PartRef<'a>, usize), WireError> {
        need(bytes, ChannelPart::HEADER_LEN)?;
        let head = le_u16(bytes, 0);
        let size = le_u16(bytes, 2);
        let flags = head & ChannelPart::FLAGS_MASK;
        if flags & ChannelPart::DESCRIPTOR != 0 && usize::from(size) != EventDescriptor::LEN {
            return Err(WireError::BadDescriptorSize { size });
        }
        let total = ChannelPart::HEADER_LEN + usize::from(size);
        need(bytes, total)?;
        let part = PartRef {
            channel: head & ChannelPart::CHANNEL_MASK,
            flags,
            bytes: &bytes[ChannelPart::HEADER_LEN..total],
        };
        Ok((part, total))
    }
}

/// The parts of a data packet's payload, in order, borrowed from it.
///
/// Yields each part, or one error and then nothing: a payload must be made of whole
/// parts, so a part cut short at its end is an error here (YDB's FormatError), not a
/// reason to wait for more bytes.
///
/// # Examples
///
/// ```
/// use agentbox::interconnect::wire::{parts, WireError};
///
/// let payload = [1, 0, 2, 0, b'h', b'i', 1, 0, 9, 0];
/// let mut it = parts(&payload);
/// assert_eq!(it.next().unwrap()?.bytes, b"hi");
/// assert_eq!(it.next(), Some(Err(WireError::Truncated { need: 13, have: 4 })));
/// assert_eq!(it.next(), None);
/// # Ok::<(), WireError>(())
/// ```
pub fn parts(payload: &[u8]) -> Parts<'_> {
    Parts { rest: payload }
}

/// The iterator of [`parts`].
#[derive(Debug, Clone)]
pub struct Parts<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Parts<'a> {
    type Item = Result<PartRef<'a>, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        match PartRef::decode(self.rest) {
            Ok((part, used)) => {
                self.rest = &self.rest[used..];
                Some(Ok(part))
            }
            Err(e) => {
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

impl std::iter::FusedIterator for Parts<'_> {}
