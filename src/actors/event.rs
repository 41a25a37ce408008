//! Event types: YDB's `u32` numbers in 64 Ki-wide event spaces, and the [`Event`] trait.
//!
//! | space | constant | first type |
//! |---|---|---|
//! | 1 | [`ES_SYSTEM`] | `0x0001_0000` |
//! | 2 | [`ES_INTERCONNECT`] | `0x0002_0000` |
//! | 8 | [`ES_INTERCONNECT_TCP`] | `0x0008_0000` |
//! | 4096 | [`ES_USERSPACE`] (user spaces start here) | `0x1000_0000` |
//! | 32752 | [`ES_PRIVATE`] | `0x7FF0_0000` |

/// An event's type: a plain `u32`, as on YDB's wire (the first field of an event
/// descriptor).
///
/// A type alias rather than a newtype: the number is what the wire and
/// [`Event::EVENT_TYPE`] carry, handles compare and match on it, and a wrapper would only
/// add conversions. Build one with [`event_space_begin`]` + n`.
pub type EventType = u32;

/// An event space: the high 16 bits of an [`EventType`].
pub type EventSpace = u16;

/// YDB's system space (`TEvents::ES_SYSTEM`): bootstrap, wakeup, poison, undelivered...
pub const ES_SYSTEM: EventSpace = 1;
/// YDB's interconnect space (`ES_INTERCONNECT`): node connected / disconnected...
pub const ES_INTERCONNECT: EventSpace = 2;
/// YDB's interconnect-TCP space (`ES_INTERCONNECT_TCP`).
pub const ES_INTERCONNECT_TCP: EventSpace = 8;
/// The first user space (`ES_USERSPACE`): applications number their spaces from here.
pub const ES_USERSPACE: EventSpace = 4096;
/// YDB's private space (`ES_PRIVATE`): events that never leave their process.
pub const ES_PRIVATE: EventSpace = 32752;

/// The first event type of `space`: `space << 16` (each space holds 65 536 types).
///
/// The space is a `u16`, so the shift never loses bits.
///
/// # Examples
///
/// ```
/// use agentbox::actors::{event_space_begin, ES_USERSPACE, EV_BOOTSTRAP, ES_SYSTEM};
///
/// assert_eq!(event_space_begin(ES_USERSPACE), 0x1000_0000);
/// assert_eq!(event_space_begin(ES_SYSTEM) + 1, EV_BOOTSTRAP);
/// ```
pub const fn event_space_begin(space: EventSpace) -> EventType {
    (space as u32) << 16
}

/// The space an event type belongs to: its high 16 bits.
pub const fn event_space(event_type: EventType) -> EventSpace {
    (event_type >> 16) as u16
}

/// [`Bootstrap`](super::Bootstrap): an actor's first event (`TEvents::TSystem::Bootstrap`).
pub const EV_BOOTSTRAP: EventType = event_space_begin(ES_SYSTEM) + 1;
/// [`Wakeup`](super::Wakeup): a timer fired (`TSystem::Wakeup`).
pub const EV_WAKEUP: EventType = event_space_begin(ES_SYSTEM) + 2;
/// Subscribe (`TSystem::Subscribe`).
pub const EV_SUBSCRIBE: EventType = event_space_begin(ES_SYSTEM) + 3;
/// Unsubscribe (`TSystem::Unsubscribe`).
pub const EV_UNSUBSCRIBE: EventType = event_space_begin(ES_SYSTEM) + 4;
/// [`Undelivered`](super::Undelivered): an event could not be delivered
/// (`TSystem::Undelivered`).
pub const EV_UNDELIVERED: EventType = event_space_begin(ES_SYSTEM) + 6;
/// [`Poison`](super::Poison): asks an actor to pass away (`TSystem::Poison`).
pub const EV_POISON: EventType = event_space_begin(ES_SYSTEM) + 7;
/// [`Gone`](super::Gone): an actor is gone (`TSystem::Gone`).
pub const EV_GONE: EventType = event_space_begin(ES_SYSTEM) + 13;
/// The interconnect's "node connected" (`TEvInterconnect::EvNodeConnected`).
pub const EV_NODE_CONNECTED: EventType = event_space_begin(ES_INTERCONNECT) + 5;
/// The interconnect's "node disconnected" (`TEvInterconnect::EvNodeDisconnected`).
pub const EV_NODE_DISCONNECTED: EventType = event_space_begin(ES_INTERCONNECT) + 6;

/// A value that actors send to each other, with its stable YDB event type.
///
/// The type is a constant of the Rust type, so a receiver (or a peer node) can tell events
/// apart by number. Two event types of one system must have different numbers; user events
/// take theirs from a user space ([`ES_USERSPACE`] and up).
///
/// # Examples
///
/// ```
/// use agentbox::actors::{event_space_begin, Event, ES_USERSPACE};
///
/// const MY_SPACE: u32 = event_space_begin(ES_USERSPACE + 1);
///
/// struct Ping(u64);
/// impl Event for Ping {
///     const EVENT_TYPE: u32 = MY_SPACE + 1;
/// }
///
/// assert_eq!(Ping::EVENT_TYPE, 0x1001_0001);
/// ```
pub trait Event: Send + 'static {
    /// This event's type number.
    const EVENT_TYPE: EventType;
}
