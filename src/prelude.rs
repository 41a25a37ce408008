//! The names almost every agentbox program uses: `use agentbox::prelude::*;`.

pub use crate::{
    send, send_mutable, Agent, Context, Coop, CoopHandle, DefineError, DeregReason, Environment,
    ExceptionReaction, Mbox, MboxKind, Mutable, Priority, State,
};
pub use crate::{send_delayed, send_periodic, TimerHandle};
