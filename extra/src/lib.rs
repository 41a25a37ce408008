//! # agentbox-extra
//!
//! so_5_extra-style mboxes and helpers for [`agentbox`], built only on its public API
//! (the [`agentbox::MboxImpl`] trait). More mboxes arrive with later issues.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
