//! A composite mbox: routes each message type to its own destination mbox.
//!
//! 1. A message of a routed type goes to that type's destination, one redirection deeper.
//! 2. A message of any other type follows the [`Unknown`] policy: redirected to a default
//!    mbox, refused with [`SendError::Refused`], or dropped.
//! 3. Agents subscribe to the destinations, not to the composite mbox:
//!    [`SubscribeError::NotSubscribable`](agentbox::SubscribeError::NotSubscribable).
//! 4. It is single-consumer (so it takes [`Mutable`](agentbox::Mutable) messages) only if
//!    every destination, the default included, is.
//!
//! # Examples
//!
//! ```
//! use agentbox::prelude::*;
//! use agentbox::mchain::MChainParams;
//! use agentbox_extra::composite::{self, Unknown};
//!
//! Environment::launch(|env| {
//!     let numbers = env.create_mchain(MChainParams::unbounded());
//!     let words = env.create_mchain(MChainParams::unbounded());
//!     let mbox = composite::builder(env, Unknown::Error)
//!         .route::<u32>(&numbers.as_mbox())
//!         .route::<&str>(&words.as_mbox())
//!         .build();
//!     send(&mbox, 1u32).unwrap();
//!     send(&mbox, "one").unwrap();
//!     assert!(send(&mbox, 1.5f64).is_err());
//!     assert_eq!((numbers.len(), words.len()), (1, 1));
//! }).unwrap();
//! ```

use std::any::TypeId;
use std::collections::HashMap;

use agentbox::{
    DeliveryMode, Environment, Mbox, MboxKind, Message, MessageType, RedirectionDepth, SendError,
};

use crate::send_only::{self, Forward};

/// What a composite mbox does with a message of a type it has no route for.
#[derive(Clone, Debug)]
pub enum Unknown {
    /// Send it to this mbox.
    Redirect(Mbox),
    /// Refuse it with [`SendError::Refused`].
    Error,
    /// Drop it silently.
    Drop,
}

/// Builds a composite mbox.
#[derive(Debug)]
pub struct Builder {
    env: Environment,
    routes: HashMap<TypeId, Mbox>,
    unknown: Unknown,
}

/// Starts a composite mbox of `env` with the policy for unrouted types.
pub fn builder(env: &Environment, unknown: Unknown) -> Builder {
    Builder {
        env: env.clone(),
        routes: HashMap::new(),
        unknown,
    }
}

impl Builder {
    /// Routes immutable messages of type `M` to `to` (replacing an earlier route for `M`).
    pub fn route<M: Sync + 'static>(mut self, to: &Mbox) -> Self {
        self.routes
            .insert(MessageType::of::<M>().type_id(), to.clone());
        self
    }

    /// Routes [`Mutable`](agentbox::Mutable) messages of type `M` to `to`.
    pub fn route_mutable<M: 'static>(mut self, to: &Mbox) -> Self {
        self.routes
            .insert(MessageType::of_mutable::<M>().type_id(), to.clone());
        self
    }

    /// The mbox.
    pub fn build(self) -> Mbox {
        let single = self
            .routes
            .values()
            .chain(match &self.unknown {
                Unknown::Redirect(m) => Some(m),
                _ => None,
            })
            .all(|m| m.kind() == MboxKind::SingleConsumer);
        let routes = Routes {
            routes: self.routes,
            unknown: self.unknown,
            kind: if single {
                MboxKind::SingleConsumer
            } else {
                MboxKind::MultiConsumer
            },
        };
        send_only::create(&self.env, "composite", routes)
    }
}

/// A composite mbox's routing table.
struct Routes {
    routes: HashMap<TypeId, Mbox>,
    unknown: Unknown,
    kind: MboxKind,
}

impl Forward for Routes {
    fn kind(&self) -> MboxKind {
        self.kind
    }

    fn forward(
        &self,
        name: &str,
        msg: Message,
        depth: RedirectionDepth,
        mode: DeliveryMode,
    ) -> Result<(), SendError> {
        match self.routes.get(&msg.type_id()) {
            Some(to) => to.deliver_with(msg, depth + 1, mode),
            None => match &self.unknown {
                Unknown::Redirect(to) => to.deliver_with(msg, depth + 1, mode),
                Unknown::Drop => Ok(()),
                Unknown::Error => Err(SendError::Refused {
                    type_name: msg.message_type().name(),
                    mbox: name.to_owned(),
                    reason: "no route for this message type".into(),
                }),
            },
        }
    }
}
