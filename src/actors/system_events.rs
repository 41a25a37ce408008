//! YDB's system events: [`Bootstrap`], [`Wakeup`], [`Poison`], [`Undelivered`], [`Gone`].

use thiserror::Error;

use super::event::{Event, EventType, EV_BOOTSTRAP, EV_GONE, EV_POISON, EV_UNDELIVERED, EV_WAKEUP};

/// An actor's first event, before any other (`TEvents::TEvBootstrap`, type `0x10001`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Bootstrap;

impl Event for Bootstrap {
    const EVENT_TYPE: EventType = EV_BOOTSTRAP;
}

/// A timer fired (`TEvents::TEvWakeup`, type `0x10002`); the tag tells timers apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Wakeup {
    /// Chosen by whoever scheduled the wakeup; 0 by default.
    pub tag: u64,
}

impl Event for Wakeup {
    const EVENT_TYPE: EventType = EV_WAKEUP;
}

/// Asks the recipient to pass away (`TEvents::TEvPoison`, type `0x10007`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Poison;

impl Event for Poison {
    const EVENT_TYPE: EventType = EV_POISON;
}

/// The actor is gone (`TEvents::TEvGone`, type `0x1000D`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Gone;

impl Event for Gone {
    const EVENT_TYPE: EventType = EV_GONE;
}

/// An event sent with [`TRACK_DELIVERY`](super::EventFlags::TRACK_DELIVERY) could not be
/// delivered (`TEvents::TEvUndelivered`, type `0x10006`).
///
/// It comes back to the original sender *from the original recipient's id*, with the
/// original cookie.
///
/// # Wire form
///
/// 8 bytes: `source_type` as u32 LE, then `reason` as u32 LE ([`to_bytes`](Self::to_bytes),
/// [`from_bytes`](Self::from_bytes)). `unsure` is local only and not in the bytes: the
/// interconnect sets it on the node that generates the event, and bytes always decode with
/// `unsure == false` (YDB refuses to serialize an unsure one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Undelivered {
    /// The type of the event that was not delivered.
    pub source_type: EventType,
    /// Why it was not delivered.
    pub reason: UndeliveredReason,
    /// The event may have been delivered after all: it was sent to a peer node that never
    /// confirmed it before the session broke.
    pub unsure: bool,
}

impl Event for Undelivered {
    const EVENT_TYPE: EventType = EV_UNDELIVERED;
}

/// Why an event was [`Undelivered`] (YDB's `TEvUndelivered::EReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum UndeliveredReason {
    /// No better reason known (`ReasonUnknown`).
    Unknown = 0,
    /// No actor or service has the recipient id (`ReasonActorUnknown`).
    ActorUnknown = 1,
    /// The recipient's node could not be reached (`Disconnected`).
    Disconnected = 2,
}

/// A number that is not an [`UndeliveredReason`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("unknown undelivered reason {0}")]
pub struct UnknownUndeliveredReason(pub u32);

/// Why bytes are not an [`Undelivered`] event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum UndeliveredDecodeError {
    /// The bytes are not exactly 8 long.
    #[error("an Undelivered event is 8 bytes, got {0}")]
    BadLength(usize),
    /// The reason field is not a known reason.
    #[error(transparent)]
    UnknownReason(#[from] UnknownUndeliveredReason),
}

impl UndeliveredReason {
    /// The reason's number on the wire.
    pub const fn as_u32(self) -> u32 {
        self as u32
    }
}

impl TryFrom<u32> for UndeliveredReason {
    type Error = UnknownUndeliveredReason;

    fn try_from(value: u32) -> Result<Self, UnknownUndeliveredReason> {
        match value {
            0 => Ok(UndeliveredReason::Unknown),
            1 => Ok(UndeliveredReason::ActorUnknown),
            2 => Ok(UndeliveredReason::Disconnected),
            other => Err(UnknownUndeliveredReason(other)),
        }
    }
}

impl Undelivered {
    /// The length of the wire form.
    pub const WIRE_LEN: usize = 8;

    /// The wire form: `source_type` u32 LE, then `reason` u32 LE (`unsure` is not
    /// included).
    pub const fn to_bytes(&self) -> [u8; 8] {
        let t = self.source_type.to_le_bytes();
        let r = self.reason.as_u32().to_le_bytes();
        [t[0], t[1], t[2], t[3], r[0], r[1], r[2], r[3]]
    }

    /// Decodes the wire form; the result has `unsure == false`.
    ///
    /// # Errors
    ///
    /// [`UndeliveredDecodeError::BadLength`] unless `bytes` is exactly 8 long,
    /// [`UndeliveredDecodeError::UnknownReason`] if the reason is not 0, 1 or 2.
    pub fn from_bytes(bytes: &[u8]) -> Result<Undelivered, UndeliveredDecodeError> {
        let [t0, t1, t2, t3, r0, r1, r2, r3] = *bytes else {
            return Err(UndeliveredDecodeError::BadLength(bytes.len()));
        };
        Ok(Undelivered {
            source_type: u32::from_le_bytes([t0, t1, t2, t3]),
            reason: UndeliveredReason::try_from(u32::from_le_bytes([r0, r1, r2, r3]))?,
            unsure: false,
        })
    }
}
