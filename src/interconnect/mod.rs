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
//!   ([`Serde`] by default, [`Protobuf`] for events a YDB node reads).
//! - [`NodeConnected`], [`NodeDisconnected`], [`Subscribe`], [`Unsubscribe`]: the session
//!   notifications.
//! - [`SessionStats`], [`Refusal`], and the errors [`InterconnectError`],
//!   [`HandshakeError`], [`SessionError`].
//! - [`wire`]: the codec of every frame (initial packet, handshake blocks and protobufs,
//!   packet header, channel parts, event descriptor), pure functions over bytes.
//!
//! The protocol (handshake, resume, confirms, channels) is described step by step in the
//! module's `README.md` and beside the code.
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
mod challenge;
mod codec;
mod encryption;
mod error;
mod events;
mod handshake;
mod names;
mod node;
mod session;
mod setup;
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
pub use names::{NameService, NodeAddress};
pub use node::Interconnect;
pub use setup::InterconnectSetup;
pub use stats::{Refusal, SessionStats};
#[cfg(feature = "tls")]
pub use tls::{TlsError, TlsSetup};
