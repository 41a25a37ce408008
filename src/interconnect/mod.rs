//! YDB's interconnect: actors on different nodes talking over TCP, framed as YDB frames
//! them (feature `interconnect`).
//!
//! A send to an [`ActorId`](crate::ActorId) whose node is another node leaves through the
//! interconnect: one session per pair of nodes, over one TCP connection at a time, that
//! survives broken connections without losing or repeating an event. The framing is YDB's
//! protocol version 2, byte for byte, so that the bytes can be checked against YDB's own.
//!
//! - [`Interconnect`]: a node's end, started on an [`ActorSystem`](crate::actors::ActorSystem)
//!   with an [`InterconnectSetup`] (the [`NameService`] table, who may join, the remote
//!   event types, timers); its docs state the delivery rules.
//! - [`RemoteEvent`]: an event type that may cross nodes, with its [`EventCodec`]
//!   ([`Serde`] by default, [`Protobuf`] for events a YDB node reads). Each node registers
//!   the types it sends or receives ([`InterconnectSetup::event`]), or submits them once
//!   with [`register_remote_event!`](crate::register_remote_event) and registers every
//!   linked one ([`InterconnectSetup::linked_events`]). An event whose type has no codec on
//!   the receiving node reaches its handler as bytes: the first of each type is logged
//!   through the environment's error logger (for the first 256 types a node meets; a peer
//!   sending ever new types cannot grow the log for the life of the process), and all are
//!   counted ([`SessionStats::events_without_codec`]).
//! - [`NodeConnected`], [`NodeDisconnected`], [`Subscribe`], [`Unsubscribe`]: the session
//!   notifications.
//! - [`SessionStats`], [`Refusal`], and the errors [`InterconnectError`],
//!   [`HandshakeError`], [`SessionError`].
//! - [`wire`]: the codec of every frame (initial packet, handshake blocks and protobufs,
//!   packet header, channel parts, event descriptor), pure functions over bytes.
//!
//! The protocol (threads, sending, receiving, handshake, resume, confirms, channels) is
//! described step by step in [`protocol`] (the module's `README.md`, shown here) and
//! beside the code.
//!
//! # Examples
//!
//! ```
//! use agentbox::interconnect::wire::{InitialPacket, WireError};
//! use agentbox::ActorId;
//!
//! let bytes = InitialPacket::new_session(ActorId::new(3, 1, 0)).encode();
//! let (packet, used) = InitialPacket::decode(&bytes)?;
//! assert_eq!((packet.self_virtual_id.node_id(), used), (3, 52));
//! # Ok::<(), WireError>(())
//! ```
//!
//! A whole two-node exchange is on [`Interconnect`].

mod admission;
mod base;
mod challenge;
mod codec;
mod encryption;
mod error;
mod events;
mod handshake;
mod linked;
mod listener;
mod names;
mod node;
/// How a session works, step by step: threads, sending, receiving, handshake, resume and
/// how a session ends (a page of documentation only; it holds no items).
#[doc = include_str!("README.md")]
pub mod protocol {}
mod session;
mod setup;
mod shared;
mod stats;
mod stream;
#[cfg(feature = "tls")]
mod tls;
pub mod wire;

pub use codec::{CodecError, Empty, EventCodec, Protobuf, RemoteEvent, Serde, UndeliveredCodec};
#[cfg(feature = "tls")]
pub use encryption::EncryptionMode;
pub use error::{HandshakeError, InterconnectError, SessionError};
pub use events::{NodeConnected, NodeDisconnected, Subscribe, Unsubscribe};
pub use linked::{linked_events, LinkedEvent};
pub use names::{NameService, NodeAddress};
// `register_remote_event!`'s expansion names the collector through this path, so that the
// crates using the macro need no dependency of their own.
#[doc(hidden)]
pub use inventory as __inventory;
pub use node::Interconnect;
pub use setup::InterconnectSetup;
pub use stats::{Refusal, SessionStats};
#[cfg(feature = "tls")]
pub use tls::{TlsError, TlsSetup};
