//! # agentbox-extra
//!
//! so_5_extra-style mboxes and helpers for [`agentbox`], built only on its public API
//! (the [`agentbox::MboxImpl`] trait).
//!
//! | module | what it is |
//! |---|---|
//! | [`round_robin`] | each message to one subscriber, in turn |
//! | [`retained`] | keeps the last message of each type for late subscribers |
//! | [`anti_jitter`] | drops messages that come too soon after the previous one |
//! | [`collecting`] | sends every `n` messages as one bundle |
//! | [`composite`] | routes each type to its own mbox |
//! | [`first_last_subscriber`] | tells when a type gets its first / loses its last subscriber |
//! | [`inflight_limit`] | at most `n` messages of a type on their way |
//! | [`broadcast`] | every message to each of a fixed list of mboxes |
//! | [`proxy`] | a base that delegates everything to an inner mbox, for writing your own |
//! | [`envelopes`] | revocable and time-limited messages |
//! | [`shutdowner`] | lets agents finish their own way when the environment stops |
//! | [`async_op`] | one-time async operations: completion (and timeout) handlers subscribed and unsubscribed together |

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod anti_jitter;
pub mod async_op;
pub mod broadcast;
pub mod collecting;
pub mod composite;
pub mod envelopes;
pub mod first_last_subscriber;
pub mod inflight_limit;
pub mod proxy;
pub mod retained;
pub mod round_robin;
mod send_only;
pub mod shutdowner;
