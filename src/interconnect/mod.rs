//! YDB's interconnect: actors on different nodes talking over TCP, framed as YDB frames
//! them (feature `interconnect`).
//!
//! A send to an [`ActorId`](crate::ActorId) whose node is another node leaves through the
//! interconnect: one session per pair of nodes, over one TCP connection at a time, that
//! survives broken connections without losing or repeating an event. The framing is YDB's
//! protocol version 2, byte for byte, so that the bytes can be checked against YDB's own.
//!
//! What is here so far:
//!
//! - [`wire`]: the codec of every frame (initial packet, handshake blocks and protobufs,
//!   packet header, channel parts, event descriptor), pure functions over bytes.
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

pub mod wire;
