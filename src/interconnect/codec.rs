//! How events cross nodes: [`RemoteEvent`] names an event type's [`EventCodec`]; the
//! built-in codecs are [`Serde`] (the default choice) and [`Protobuf`] (for events a YDB
//! node must read).

use std::any::Any;
use std::fmt;

use ahash::AHashMap;
use thiserror::Error;

use crate::actors::{
    serialized_as, Body, DecodeFn, Event, EventType, Gone, Poison, Received, Undelivered,
    UndeliveredDecodeError,
};

/// Why an event could not be encoded or decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The serde codec failed.
    #[error("serde codec: {0}")]
    Serde(String),
    /// The protobuf codec failed.
    #[error("protobuf codec: {0}")]
    Protobuf(String),
    /// A fixed-size form got the wrong number of bytes, or bad values.
    #[error("bad bytes for event {event_type:#x}: {reason}")]
    BadBytes {
        /// The event type.
        event_type: EventType,
        /// What was wrong.
        reason: String,
    },
}

/// Encodes and decodes one event type `E` to and from its bytes on the wire (the event body
/// that travels before the event descriptor).
///
/// Implement it on a unit struct to give an event a form of your own; the built-in ones are
/// [`Serde`] and [`Protobuf`].
pub trait EventCodec<E>: 'static {
    /// Appends the body of `event` to `out`.
    ///
    /// # Errors
    ///
    /// [`CodecError`] if the event cannot be written; it is then not delivered.
    fn encode(event: &E, out: &mut Vec<u8>) -> Result<(), CodecError>;

    /// Reads an event back from its whole body.
    ///
    /// # Errors
    ///
    /// [`CodecError`] on bytes that are not a valid `E` (they come from the network: never
    /// trust them).
    fn decode(bytes: &[u8]) -> Result<E, CodecError>;
}

/// An event that may travel to another node, and the codec its body travels in.
///
/// Local sends never serialize: the codec runs only when an event leaves its node, and on
/// the receiving node only when a handler first asks for the event
/// ([`EventHandle::get`](crate::actors::EventHandle::get) or
/// [`take`](crate::actors::EventHandle::take)). Register each remote event type with
/// [`InterconnectSetup::event`](super::InterconnectSetup::event) on every node that sends or
/// receives it.
///
/// # Examples
///
/// ```
/// use agentbox::actors::{event_space_begin, Event, ES_USERSPACE};
/// use agentbox::interconnect::{RemoteEvent, Serde};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// struct Greeting { text: String }
/// impl Event for Greeting { const EVENT_TYPE: u32 = event_space_begin(ES_USERSPACE) + 1; }
/// impl RemoteEvent for Greeting { type Codec = Serde; }
/// ```
pub trait RemoteEvent: Event + Sized {
    /// How the body is written: [`Serde`], [`Protobuf`] or a codec of your own.
    type Codec: EventCodec<Self>;
}

/// The default codec: any `serde` type, in postcard's compact form (varints, no field
/// names). Only agentbox nodes read it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Serde;

impl<E> EventCodec<E> for Serde
where
    E: serde::Serialize + serde::de::DeserializeOwned,
{
    fn encode(event: &E, out: &mut Vec<u8>) -> Result<(), CodecError> {
        postcard::serialize_with_flavor(event, Append(out))
            .map_err(|e| CodecError::Serde(e.to_string()))
    }

    fn decode(bytes: &[u8]) -> Result<E, CodecError> {
        postcard::from_bytes(bytes).map_err(|e| CodecError::Serde(e.to_string()))
    }
}

/// postcard's output appended to a vector in place (its `to_extend` takes the vector by
/// value and gives it back: profile, `ic_small_events`, ~30 instructions per event of moves
/// on the sending thread).
struct Append<'a>(&'a mut Vec<u8>);

impl postcard::ser_flavors::Flavor for Append<'_> {
    type Output = ();

    fn try_push(&mut self, byte: u8) -> postcard::Result<()> {
        self.0.push(byte);
        Ok(())
    }

    fn try_extend(&mut self, bytes: &[u8]) -> postcard::Result<()> {
        self.0.extend_from_slice(bytes);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<()> {
        Ok(())
    }
}

/// The codec of YDB's own events (`TEventPB`): the body is the protobuf message, so that a
/// YDB node can read it. Any `prost::Message`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Protobuf;

impl<E> EventCodec<E> for Protobuf
where
    E: prost::Message + Default,
{
    fn encode(event: &E, out: &mut Vec<u8>) -> Result<(), CodecError> {
        event
            .encode(out)
            .map_err(|e| CodecError::Protobuf(e.to_string()))
    }

    fn decode(bytes: &[u8]) -> Result<E, CodecError> {
        E::decode(bytes).map_err(|e| CodecError::Protobuf(e.to_string()))
    }
}

/// YDB's empty-bodied system events ([`Poison`], [`Gone`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Empty;

impl<E: Event + Default> EventCodec<E> for Empty {
    fn encode(_: &E, _: &mut Vec<u8>) -> Result<(), CodecError> {
        Ok(())
    }

    fn decode(bytes: &[u8]) -> Result<E, CodecError> {
        if bytes.is_empty() {
            Ok(E::default())
        } else {
            Err(CodecError::BadBytes {
                event_type: E::EVENT_TYPE,
                reason: format!("{} bytes, expected none", bytes.len()),
            })
        }
    }
}

impl RemoteEvent for Poison {
    type Codec = Empty;
}

impl RemoteEvent for Gone {
    type Codec = Empty;
}

/// [`Undelivered`]'s 8-byte form (YDB's `TEvUndelivered`).
#[derive(Debug, Clone, Copy, Default)]
pub struct UndeliveredCodec;

impl EventCodec<Undelivered> for UndeliveredCodec {
    fn encode(event: &Undelivered, out: &mut Vec<u8>) -> Result<(), CodecError> {
        out.extend_from_slice(&event.to_bytes());
        Ok(())
    }

    fn decode(bytes: &[u8]) -> Result<Undelivered, CodecError> {
        Undelivered::from_bytes(bytes).map_err(|e: UndeliveredDecodeError| CodecError::BadBytes {
            event_type: Undelivered::EVENT_TYPE,
            reason: e.to_string(),
        })
    }
}

impl RemoteEvent for Undelivered {
    type Codec = UndeliveredCodec;
}

pub(crate) type EncodeFn = fn(&(dyn Any + Send), &mut Vec<u8>) -> Result<(), CodecError>;

/// Slots of [`Codecs::recent`], by the event type's low bits.
const RECENT: usize = 32;

/// The codecs of one node's remote event types, by event type.
#[derive(Clone)]
pub(crate) struct Codecs {
    by_type: AHashMap<EventType, (EncodeFn, DecodeFn)>,
    /// The codecs again, direct-mapped by the event type's low bits (the last type added
    /// wins a slot; a type not in its slot is looked up in `by_type`). Profile
    /// (`bench --only ic_small_events`, callgrind): the map's hash and probe were ~30
    /// instructions per event sent; a slot is read and compared in a few.
    recent: [Option<(EventType, EncodeFn, DecodeFn)>; RECENT],
}

impl Codecs {
    /// The system events that cross the wire: `Undelivered`, `Poison`, `Gone`.
    pub(crate) fn with_system_events() -> Codecs {
        let mut c = Codecs {
            by_type: AHashMap::new(),
            recent: [None; RECENT],
        };
        c.add::<Undelivered>();
        c.add::<Poison>();
        c.add::<Gone>();
        c
    }

    pub(crate) fn add<E: RemoteEvent>(&mut self) {
        let (encode, decode): (EncodeFn, DecodeFn) = (encode_any::<E>, decode_any::<E>);
        self.by_type.insert(E::EVENT_TYPE, (encode, decode));
        self.recent[E::EVENT_TYPE as usize % RECENT] = Some((E::EVENT_TYPE, encode, decode));
    }

    /// The encoder and decoder of `event_type`, if it is registered.
    #[inline]
    pub(crate) fn get(&self, event_type: EventType) -> Option<(EncodeFn, DecodeFn)> {
        match self.recent[event_type as usize % RECENT] {
            Some((t, encode, decode)) if t == event_type => Some((encode, decode)),
            _ => self.by_type.get(&event_type).copied(),
        }
    }

    /// The decode hook of `event_type`, if it is registered.
    pub(crate) fn decoder(&self, event_type: EventType) -> Option<DecodeFn> {
        self.get(event_type).map(|(_, d)| d)
    }
}

impl fmt::Debug for Codecs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Codecs")
            .field("event_types", &self.by_type.len())
            .finish()
    }
}

fn encode_any<E: RemoteEvent>(
    event: &(dyn Any + Send),
    out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    match event.downcast_ref::<E>() {
        Some(e) => E::Codec::encode(e, out),
        None => Err(CodecError::BadBytes {
            event_type: E::EVENT_TYPE,
            reason: "the local value is not of the registered type".to_owned(),
        }),
    }
}

fn decode_any<E: RemoteEvent>(bytes: Body) -> Received {
    serialized_as::<E>(bytes, decode_any::<E>, decode_typed::<E>)
}

fn decode_typed<E: RemoteEvent>(bytes: &[u8]) -> Option<E> {
    E::Codec::decode(bytes).ok()
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use super::*;
    use crate::actors::{event_space_begin, ActorId, EventHandle, UndeliveredReason, ES_USERSPACE};

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Note {
        n: u32,
        text: String,
    }
    impl Event for Note {
        const EVENT_TYPE: EventType = event_space_begin(ES_USERSPACE) + 77;
    }
    impl RemoteEvent for Note {
        type Codec = Serde;
    }

    fn received(codecs: &Codecs, event_type: EventType, bytes: Vec<u8>) -> EventHandle {
        let (a, b) = (ActorId::new(2, 1, 0), ActorId::new(1, 1, 0));
        EventHandle::serialized_with(event_type, a, b, bytes.into(), codecs.decoder(event_type))
    }

    fn encoded<E: RemoteEvent>(codecs: &Codecs, e: E) -> Vec<u8> {
        let (encode, _) = codecs.get(E::EVENT_TYPE).expect("registered");
        let mut out = Vec::new();
        encode(&e, &mut out).expect("encodes");
        out
    }

    #[test]
    fn a_received_event_is_decoded_on_first_ask_and_can_be_borrowed_changed_and_taken() {
        let mut codecs = Codecs::with_system_events();
        codecs.add::<Note>();
        let note = Note {
            n: 7,
            text: "seven".into(),
        };
        let mut h = received(&codecs, Note::EVENT_TYPE, encoded(&codecs, note.clone()));
        assert!(h.is_serialized());
        assert_eq!(h.get::<Note>(), Some(&note));
        h.get_mut::<Note>().expect("decoded").n = 8;
        assert_eq!(h.get::<Note>().map(|n| n.n), Some(8));
        assert_eq!(h.take::<Note>().map(|n| n.n), Some(8));
        assert!(h.get::<Note>().is_none());
    }

    #[test]
    fn bytes_that_do_not_decode_give_none_and_stay_readable() {
        let mut codecs = Codecs::with_system_events();
        codecs.add::<Note>();
        let h = received(&codecs, Note::EVENT_TYPE, vec![0xFF; 3]);
        assert!(h.get::<Note>().is_none());
        assert_eq!(h.serialized_bytes(), Some(&[0xFF; 3][..]));
        // Not registered: the bytes, and no decoding.
        let h = received(&Codecs::with_system_events(), Note::EVENT_TYPE, vec![1, 2]);
        assert!(h.get::<Note>().is_none());
    }

    #[test]
    fn system_events_have_ydb_s_bodies() {
        let codecs = Codecs::with_system_events();
        let u = Undelivered {
            source_type: 0x1000_0001,
            reason: UndeliveredReason::Disconnected,
            unsure: true,
        };
        // Eight bytes, `unsure` not on the wire.
        let bytes = encoded(&codecs, u);
        assert_eq!(bytes, [1, 0, 0, 0x10, 2, 0, 0, 0]);
        let h = received(&codecs, Undelivered::EVENT_TYPE, bytes);
        assert_eq!(
            h.get::<Undelivered>().copied(),
            Some(Undelivered { unsure: false, ..u })
        );
        assert!(encoded(&codecs, Poison).is_empty());
        assert!(received(&codecs, Poison::EVENT_TYPE, vec![]).is::<Poison>());
        assert!(!received(&codecs, Poison::EVENT_TYPE, vec![0]).is::<Poison>());
    }

    /// The same fields as `Note`, with a type in `Note`'s slot of the direct-mapped table.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Twin {
        n: u32,
        text: String,
    }
    impl Event for Twin {
        const EVENT_TYPE: EventType = Note::EVENT_TYPE + RECENT as EventType;
    }
    impl RemoteEvent for Twin {
        type Codec = Serde;
    }

    #[test]
    fn types_that_share_a_slot_each_get_their_own_codec() {
        let mut codecs = Codecs::with_system_events();
        codecs.add::<Note>();
        codecs.add::<Twin>();
        let twin = Twin {
            n: 1,
            text: "one".into(),
        };
        let note = Note {
            n: 2,
            text: "two".into(),
        };
        // Each type decodes as itself, whichever holds the slot.
        let h = received(&codecs, Twin::EVENT_TYPE, encoded(&codecs, twin.clone()));
        assert_eq!(h.get::<Twin>(), Some(&twin));
        let h = received(&codecs, Note::EVENT_TYPE, encoded(&codecs, note.clone()));
        assert_eq!(h.get::<Note>(), Some(&note));
        assert!(h.get::<Twin>().is_none());
        // A type never added has no codec, even where its slot is taken.
        assert!(codecs
            .get(Note::EVENT_TYPE + 2 * RECENT as EventType)
            .is_none());
    }
}
