//! Pages for newcomers: how agentbox maps onto what you know (documentation only; the
//! modules hold no items).
//!
//! - [`from_sobjectizer`]: agents, mboxes, states (where the default state sits, and why
//!   a subscription made in it is not seen in your own states), dispatchers, names.
//! - [`from_ydb`]: actors, ids, events and handles, pools, `STFUNC` and
//!   [`stfunc!`](crate::stfunc), the interconnect's settings.
//! - [`from_actix`]: addresses and mboxes, handlers and replies, async.
//! - [`architecture`]: the layers as the code has them, one line per module, the hooks
//!   between them, and where a new piece goes.

#[doc = include_str!("from_sobjectizer.md")]
pub mod from_sobjectizer {}

#[doc = include_str!("from_ydb.md")]
#[cfg(feature = "interconnect")]
pub mod from_ydb {}

#[doc = include_str!("from_actix.md")]
pub mod from_actix {}

#[doc = include_str!("architecture.md")]
pub mod architecture {}

// README's code blocks run as doctests (its interconnect program included).
#[cfg(all(doctest, feature = "interconnect"))]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
