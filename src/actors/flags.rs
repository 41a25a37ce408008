//! [`EventFlags`]: YDB's per-event delivery flags with the 12-bit channel packed in.

use std::fmt;
use std::ops::{BitOr, BitOrAssign};

use thiserror::Error;

/// The flags word of an event handle: delivery flags in bits 0..20, the channel in bits
/// 20..32 (YDB's `flags | channel << 20`).
///
/// | bits | meaning | constant |
/// |---|---|---|
/// | 0 | on non-delivery, send `Undelivered` back to the sender | [`TRACK_DELIVERY`](Self::TRACK_DELIVERY) |
/// | 1 | on non-delivery, forward to the handle's forward target (local only) | [`FORWARD_ON_NONDELIVERY`](Self::FORWARD_ON_NONDELIVERY) |
/// | 2 | subscribe the sender to the session that carries the event | [`SUBSCRIBE_ON_SESSION`](Self::SUBSCRIBE_ON_SESSION) |
/// | 3 | use an interconnect sub-channel | [`USE_SUB_CHANNEL`](Self::USE_SUB_CHANNEL) |
/// | 4 | `Undelivered` may be sent when delivery is unsure (sent, never confirmed) | [`GENERATE_UNSURE_UNDELIVERED`](Self::GENERATE_UNSURE_UNDELIVERED) |
/// | 5 | extended wire format (set by the interconnect only) | [`EXTENDED_FORMAT`](Self::EXTENDED_FORMAT) |
/// | 6..20 | unassigned; kept as they are | |
/// | 20..32 | channel, 0..=4095 | [`channel`](Self::channel) |
///
/// Any `u32` is a valid flags word ([`from_bits`](Self::from_bits)): a word from the wire is
/// kept bit for bit. [`with_channel`](Self::with_channel) keeps only the channel's low 12
/// bits, so a channel above 4095 never touches the flag bits;
/// [`try_with_channel`](Self::try_with_channel) refuses it instead. Nothing here panics.
///
/// `|` ORs whole words, as YDB's plain `ui32` does: the channels are ORed too, so set the
/// channel last, with `with_channel`.
///
/// # Examples
///
/// ```
/// use agentbox::actors::EventFlags;
///
/// let flags = (EventFlags::TRACK_DELIVERY | EventFlags::SUBSCRIBE_ON_SESSION).with_channel(3);
/// assert_eq!(flags.bits(), 0x0030_0005);
/// assert_eq!(flags.channel(), 3);
/// assert!(flags.contains(EventFlags::TRACK_DELIVERY));
///
/// // What non-delivery does: drop the tracking flags, keep the channel.
/// let back = flags.without(EventFlags::TRACK_DELIVERY | EventFlags::SUBSCRIBE_ON_SESSION);
/// assert_eq!((back.bits(), back.channel()), (0x0030_0000, 3));
///
/// // An oversized channel is masked (or refused), never spilled into the flags.
/// assert_eq!(EventFlags::empty().with_channel(4096 + 7).channel(), 7);
/// assert!(EventFlags::empty().try_with_channel(4096).is_err());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EventFlags(u32);

/// A channel number above [`EventFlags::MAX_CHANNEL`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("channel {0} does not fit in 12 bits (max 4095)")]
pub struct ChannelOutOfRange(pub u16);

impl EventFlags {
    /// On non-delivery, the sender gets `Undelivered` (YDB's `FlagTrackDelivery`).
    pub const TRACK_DELIVERY: EventFlags = EventFlags(0x01);
    /// On non-delivery, the event goes to the handle's forward target instead
    /// (`FlagForwardOnNondelivery`; local only).
    pub const FORWARD_ON_NONDELIVERY: EventFlags = EventFlags(0x02);
    /// Subscribe the sender to the interconnect session carrying the event
    /// (`FlagSubscribeOnSession`).
    pub const SUBSCRIBE_ON_SESSION: EventFlags = EventFlags(0x04);
    /// Send through an interconnect sub-channel (`FlagUseSubChannel`).
    pub const USE_SUB_CHANNEL: EventFlags = EventFlags(0x08);
    /// Report `Undelivered` with `unsure` when an event was sent but never confirmed
    /// (`FlagGenerateUnsureUndelivered`).
    pub const GENERATE_UNSURE_UNDELIVERED: EventFlags = EventFlags(0x10);
    /// Extended wire format (`FlagExtendedFormat`); set by the interconnect, wire only.
    pub const EXTENDED_FORMAT: EventFlags = EventFlags(0x20);

    /// The position of the channel in the word.
    pub const CHANNEL_SHIFT: u32 = 20;
    /// The largest channel (12 bits).
    pub const MAX_CHANNEL: u16 = 0x0FFF;
    /// The flag bits (0..20) of the word.
    pub const FLAG_MASK: u32 = (1 << Self::CHANNEL_SHIFT) - 1;

    /// No flags, channel 0.
    pub const fn empty() -> EventFlags {
        EventFlags(0)
    }

    /// The word as it is, flags and channel (for instance from the wire).
    pub const fn from_bits(bits: u32) -> EventFlags {
        EventFlags(bits)
    }

    /// The whole word, flags and channel.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// The channel, bits 20..32.
    pub const fn channel(self) -> u16 {
        (self.0 >> Self::CHANNEL_SHIFT) as u16
    }

    /// These flags on channel `channel & 0xFFF`: the old channel is replaced, the flag bits
    /// are kept, and bits of `channel` above the 12th are dropped.
    pub const fn with_channel(self, channel: u16) -> EventFlags {
        let channel = (channel & Self::MAX_CHANNEL) as u32;
        EventFlags((self.0 & Self::FLAG_MASK) | (channel << Self::CHANNEL_SHIFT))
    }

    /// These flags on `channel`, which must fit in 12 bits.
    ///
    /// # Errors
    ///
    /// [`ChannelOutOfRange`] if `channel > EventFlags::MAX_CHANNEL`.
    pub const fn try_with_channel(self, channel: u16) -> Result<EventFlags, ChannelOutOfRange> {
        if channel > Self::MAX_CHANNEL {
            return Err(ChannelOutOfRange(channel));
        }
        Ok(self.with_channel(channel))
    }

    /// Whether every flag bit of `other` is set here (`other`'s channel is ignored).
    pub const fn contains(self, other: EventFlags) -> bool {
        let wanted = other.0 & Self::FLAG_MASK;
        self.0 & wanted == wanted
    }

    /// These flags with `other`'s flag bits cleared; the channel is kept.
    pub const fn without(self, other: EventFlags) -> EventFlags {
        EventFlags(self.0 & !(other.0 & Self::FLAG_MASK))
    }

    /// Whether no flag bit is set (the channel is not looked at).
    pub const fn has_no_flags(self) -> bool {
        self.0 & Self::FLAG_MASK == 0
    }
}

impl BitOr for EventFlags {
    type Output = EventFlags;

    /// ORs the whole words, channels included.
    fn bitor(self, rhs: EventFlags) -> EventFlags {
        EventFlags(self.0 | rhs.0)
    }
}

impl BitOrAssign for EventFlags {
    fn bitor_assign(&mut self, rhs: EventFlags) {
        self.0 |= rhs.0;
    }
}

impl fmt::Debug for EventFlags {
    /// `EventFlags(TRACK_DELIVERY | USE_SUB_CHANNEL, channel 3)`; unassigned bits in hex.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [(EventFlags, &str); 6] = [
            (EventFlags::TRACK_DELIVERY, "TRACK_DELIVERY"),
            (EventFlags::FORWARD_ON_NONDELIVERY, "FORWARD_ON_NONDELIVERY"),
            (EventFlags::SUBSCRIBE_ON_SESSION, "SUBSCRIBE_ON_SESSION"),
            (EventFlags::USE_SUB_CHANNEL, "USE_SUB_CHANNEL"),
            (
                EventFlags::GENERATE_UNSURE_UNDELIVERED,
                "GENERATE_UNSURE_UNDELIVERED",
            ),
            (EventFlags::EXTENDED_FORMAT, "EXTENDED_FORMAT"),
        ];
        f.write_str("EventFlags(")?;
        let mut rest = self.0 & Self::FLAG_MASK;
        let mut first = true;
        for (flag, name) in NAMES {
            if rest & flag.0 != 0 {
                f.write_str(if first { "" } else { " | " })?;
                f.write_str(name)?;
                rest &= !flag.0;
                first = false;
            }
        }
        if rest != 0 {
            f.write_str(if first { "" } else { " | " })?;
            write!(f, "{rest:#x}")?;
            first = false;
        }
        if first {
            f.write_str("empty")?;
        }
        write!(f, ", channel {})", self.channel())
    }
}
