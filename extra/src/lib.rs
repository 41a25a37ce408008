//! # agentbox-extra
//!
//! so_5_extra-style mboxes and helpers for [`agentbox`], built only on its public API
//! (the [`agentbox::MboxImpl`] trait).
//!
//! - [`proxy`]: a base that delegates everything to an inner mbox, for writing your own.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod proxy;
