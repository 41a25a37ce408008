//! Registering every remote event type linked into the binary at once:
//! [`register_remote_event!`](crate::register_remote_event) submits a type,
//! [`InterconnectSetup::linked_events`](super::InterconnectSetup::linked_events) registers
//! all submitted ones.
//!
//! The submissions are collected at link time by the `inventory` crate (the kind of
//! registration `typetag` does, without its serde-specific trait objects): a library that
//! defines remote events submits them once, and every binary that links it registers them
//! with one call, so a node cannot forget a type that another node sends.

use std::fmt;

use super::codec::{Codecs, RemoteEvent};
use crate::actors::{Event, EventType};

/// One remote event type submitted with
/// [`register_remote_event!`](crate::register_remote_event).
///
/// Made by the macro; read back with [`linked_events`].
pub struct LinkedEvent {
    event_type: EventType,
    type_name: fn() -> &'static str,
    add: fn(&mut Codecs),
}

impl LinkedEvent {
    /// The submission of `E` (the macro's expansion calls this).
    #[doc(hidden)]
    pub const fn of<E: RemoteEvent>() -> LinkedEvent {
        LinkedEvent {
            event_type: <E as Event>::EVENT_TYPE,
            type_name: std::any::type_name::<E>,
            add: Codecs::add::<E>,
        }
    }

    /// The event type number.
    pub fn event_type(&self) -> EventType {
        self.event_type
    }

    /// The Rust type's name (as [`std::any::type_name`] gives it).
    pub fn type_name(&self) -> &'static str {
        (self.type_name)()
    }

    pub(crate) fn add_to(&self, codecs: &mut Codecs) {
        (self.add)(codecs)
    }
}

impl fmt::Debug for LinkedEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LinkedEvent")
            .field("event_type", &format_args!("{:#x}", self.event_type))
            .field("type_name", &self.type_name())
            .finish()
    }
}

inventory::collect!(LinkedEvent);

/// Every remote event type submitted with
/// [`register_remote_event!`](crate::register_remote_event) in the crates linked into
/// this binary, in no particular order.
///
/// # Examples
///
/// ```
/// use agentbox::actors::{event_space_begin, Event, ES_USERSPACE};
/// use agentbox::interconnect::{linked_events, RemoteEvent, Serde};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// struct Greeting(String);
/// impl Event for Greeting { const EVENT_TYPE: u32 = event_space_begin(ES_USERSPACE) + 9; }
/// impl RemoteEvent for Greeting { type Codec = Serde; }
/// agentbox::register_remote_event!(Greeting);
///
/// assert!(linked_events().any(|l| l.event_type() == Greeting::EVENT_TYPE));
/// ```
pub fn linked_events() -> impl Iterator<Item = &'static LinkedEvent> {
    inventory::iter::<LinkedEvent>.into_iter()
}

/// Submits remote event types for
/// [`InterconnectSetup::linked_events`](crate::interconnect::InterconnectSetup::linked_events),
/// which registers every submitted type of the binary at once (feature `interconnect`).
///
/// Write it once per type, at module level, beside the type's
/// [`RemoteEvent`](crate::interconnect::RemoteEvent) impl, in any crate of the program;
/// the crate using it needs no dependency other than agentbox. Two submitted types with
/// the same event type number: one of them wins, which one is unspecified (give each type
/// its own number, as YDB does).
///
/// # Examples
///
/// ```
/// use agentbox::actors::{event_space_begin, Event, ES_USERSPACE};
/// use agentbox::interconnect::{RemoteEvent, Serde};
/// use serde::{Deserialize, Serialize};
///
/// const EVENTS: u32 = event_space_begin(ES_USERSPACE);
/// #[derive(Serialize, Deserialize)]
/// struct Put { key: String, value: u64 }
/// impl Event for Put { const EVENT_TYPE: u32 = EVENTS + 1; }
/// impl RemoteEvent for Put { type Codec = Serde; }
/// #[derive(Serialize, Deserialize)]
/// struct PutDone;
/// impl Event for PutDone { const EVENT_TYPE: u32 = EVENTS + 2; }
/// impl RemoteEvent for PutDone { type Codec = Serde; }
///
/// agentbox::register_remote_event!(Put, PutDone);
/// // Each node then: InterconnectSetup::new(names).linked_events()
/// ```
#[macro_export]
macro_rules! register_remote_event {
    ($($event:ty),+ $(,)?) => {
        $(
            $crate::interconnect::__inventory::submit! {
                $crate::interconnect::LinkedEvent::of::<$event>()
            }
        )+
    };
}
