//! Mboxes: where messages are sent. They store nothing; they hand each message to the
//! subscribers that should get it, and the subscribers' dispatchers queue it.
//!
//! | kind | who may subscribe | mutable messages | filters |
//! |---|---|---|---|
//! | MPMC ([`Environment::create_mbox`], [`Environment::named_mbox`]) | any agent | no | yes |
//! | direct (each agent's own, [`Context::direct_mbox`]) | its owner only | yes | yes |
//! | unique subscribers ([`Environment::create_unique_subscribers_mbox`]) | any agent, one per type | yes | no |
//! | custom ([`Mbox::custom`] over an [`MboxImpl`]) | as it decides | as its kind says | as it decides |
//!
//! [`Environment::create_mbox`]: crate::Environment::create_mbox
//! [`Environment::named_mbox`]: crate::Environment::named_mbox
//! [`Environment::create_unique_subscribers_mbox`]: crate::Environment::create_unique_subscribers_mbox
//! [`Context::direct_mbox`]: crate::Context::direct_mbox

mod binding;
mod custom;
mod error;
mod filter;
pub(crate) mod id;
pub(crate) mod info;
pub(crate) mod mpmc;
pub(crate) mod named;
mod raw;
pub(crate) mod seam;
mod sink;
pub(crate) mod unique;

use std::fmt;
use std::sync::Arc;

pub use binding::{MultiSinkBinding, SingleSinkBinding};
pub use custom::MboxImpl;
pub use error::{SendError, SubscribeError};
pub use filter::DeliveryFilter;
pub use id::{MboxId, MboxKind};
pub use named::NamedMboxError;
pub use raw::RawMbox;
pub(crate) use sink::SinkRepr;
pub use sink::{DeliveryMode, MessageSink, Sink};

use crate::environment::handle::{EnvLayer, EnvSide, Environment};
use crate::message::{Message, RedirectionDepth, MAX_REDIRECTION_DEPTH};
use seam::{AgentArc, AgentSide, Agents};

/// A handle to a message box: cheap to clone, compared and hashed by id.
///
/// # Examples
///
/// ```
/// use agentbox::prelude::*;
/// Environment::launch(|env| {
///     let a = env.create_mbox();
///     let b = a.clone();
///     assert_eq!(a, b);
///     assert_ne!(a, env.create_mbox());
///     assert_eq!(a.kind(), MboxKind::MultiConsumer);
///     // Nobody listens: the message is simply not delivered.
///     send(&a, "hello").unwrap();
/// }).unwrap();
/// ```
#[derive(Clone)]
pub struct Mbox(pub(crate) Repr);

#[derive(Clone)]
pub(crate) enum Repr {
    Mpmc(Arc<mpmc::MpmcMbox>),
    Direct(AgentArc),
    Unique(Arc<unique::UniqueMbox>),
    Custom(Arc<dyn MboxImpl>),
}

impl Mbox {
    /// Wraps a custom mbox implementation into a handle.
    pub fn custom(imp: Arc<dyn MboxImpl>) -> Mbox {
        Mbox(Repr::Custom(imp))
    }

    /// The mbox's id.
    pub fn id(&self) -> MboxId {
        match &self.0 {
            Repr::Mpmc(m) => m.id,
            Repr::Direct(a) => Agents::mbox_id(a),
            Repr::Unique(m) => m.id,
            Repr::Custom(c) => c.id(),
        }
    }

    /// Multi- or single-consumer.
    pub fn kind(&self) -> MboxKind {
        match &self.0 {
            Repr::Mpmc(_) => MboxKind::MultiConsumer,
            Repr::Direct(_) | Repr::Unique(_) => MboxKind::SingleConsumer,
            Repr::Custom(c) => c.kind(),
        }
    }

    /// A name for diagnostics: the given name of a named mbox, otherwise one made from the id.
    pub fn name(&self) -> String {
        match &self.0 {
            Repr::Mpmc(m) => m.name(),
            Repr::Direct(a) => format!("direct:{}", Agents::agent_id(a).0),
            Repr::Unique(m) => format!("unique:{}", m.id.0),
            Repr::Custom(c) => c.name(),
        }
    }

    /// The environment this mbox belongs to; `None` once it is gone.
    pub fn environment(&self) -> Option<Environment> {
        match &self.0 {
            Repr::Mpmc(m) => m.env.upgrade(),
            Repr::Direct(a) => Agents::environment(a).upgrade(),
            Repr::Unique(m) => m.env.upgrade(),
            Repr::Custom(c) => c.environment(),
        }
    }

    /// Sends an immutable message: every subscriber that gets it shares one instance.
    ///
    /// # Errors
    ///
    /// See [`SendError`]; for built-in mboxes only a redirected message can fail.
    #[inline]
    pub fn send<M: Send + Sync + 'static>(&self, msg: M) -> Result<(), SendError> {
        self.deliver(Message::new(msg), 0)
    }

    /// Sends a [`Mutable`](crate::Mutable) message, which exactly one receiver takes by move.
    ///
    /// # Errors
    ///
    /// [`SendError::MutableToMultiConsumer`] if this is a multi-consumer mbox.
    pub fn send_mutable<M: Send + 'static>(&self, msg: M) -> Result<(), SendError> {
        self.deliver(Message::new_mutable(msg), 0)
    }

    /// Delivers an already wrapped message that has been redirected `depth` times.
    ///
    /// Custom mboxes that forward call this with `depth + 1`.
    ///
    /// # Errors
    ///
    /// [`SendError::RedirectionDepthExceeded`] when `depth >= MAX_REDIRECTION_DEPTH`,
    /// [`SendError::MutableToMultiConsumer`] for a mutable message to a multi-consumer
    /// mbox, or whatever a custom mbox refuses.
    #[inline]
    pub fn deliver(&self, msg: Message, depth: RedirectionDepth) -> Result<(), SendError> {
        self.deliver_with(msg, depth, DeliveryMode::Ordinary)
    }

    /// [`deliver`](Self::deliver) in a given [`DeliveryMode`]: custom mboxes and sinks
    /// that forward pass on the mode they were given.
    ///
    /// # Errors
    ///
    /// As [`deliver`](Self::deliver).
    ///
    /// A send to a direct mbox is inlined where it is made (its own frame cost every
    /// message ~15 instructions of register saves, callgrind, ping-pong); the other kinds
    /// are a call away.
    #[inline(always)]
    pub fn deliver_with(
        &self,
        msg: Message,
        depth: RedirectionDepth,
        mode: DeliveryMode,
    ) -> Result<(), SendError> {
        match &self.0 {
            Repr::Direct(a) if depth < MAX_REDIRECTION_DEPTH => {
                Agents::deliver(a, msg, depth);
                Ok(())
            }
            _ => self.deliver_other(msg, depth, mode),
        }
    }

    /// [`deliver_with`](Self::deliver_with) for every mbox kind but direct, and for a
    /// message redirected too often.
    #[inline(never)]
    fn deliver_other(
        &self,
        msg: Message,
        depth: RedirectionDepth,
        mode: DeliveryMode,
    ) -> Result<(), SendError> {
        if depth >= MAX_REDIRECTION_DEPTH {
            return Err(SendError::RedirectionDepthExceeded {
                type_name: msg.message_type().name(),
                depth,
            });
        }
        match &self.0 {
            Repr::Direct(a) => {
                Agents::deliver(a, msg, depth);
                Ok(())
            }
            Repr::Mpmc(m) => m.deliver(msg, depth, mode),
            Repr::Unique(m) => {
                m.deliver(msg, depth, mode);
                Ok(())
            }
            Repr::Custom(c) => c.deliver(msg, depth, mode),
        }
    }

    /// Publishes `msg`, a notice about a message whose drop was counted under its own
    /// reason: on a multi-consumer mbox, nobody listening is not counted again as a
    /// `no_subscribers` drop. Other kinds deliver as [`send`](Self::send) does.
    pub(crate) fn publish_notice<M: Send + Sync + 'static>(&self, msg: M) {
        let msg = Message::new(msg);
        let _ = match &self.0 {
            Repr::Mpmc(m) => m.deliver_counting(msg, 0, DeliveryMode::Ordinary, false),
            _ => self.deliver(msg, 0),
        };
    }

    /// Whether `ty` has receivers here and every one is an agent whose demands could run
    /// only after the current thread returns from the demand it is running (through
    /// bindings to other mboxes too). `false` when there is none, or when one is not an
    /// agent (a chain, a custom sink or mbox: unknown).
    pub(crate) fn only_blocked_receivers(
        &self,
        ty: std::any::TypeId,
        depth: RedirectionDepth,
    ) -> bool {
        if depth >= MAX_REDIRECTION_DEPTH {
            return false;
        }
        let blocked = |s: &Sink| match &s.0 {
            sink::SinkRepr::Agent(a) => Agents::ref_blocked_by_current_thread(a),
            sink::SinkRepr::Mbox(m) => m.only_blocked_receivers(ty, depth + 1),
            sink::SinkRepr::Custom(_) => false,
        };
        match &self.0 {
            // Only if it takes the type (unsubscribed: the request is dropped at once).
            Repr::Direct(a) => {
                Agents::subscribes_directly(a, ty) && Agents::surely_blocked_by_current_thread(a)
            }
            Repr::Mpmc(m) => m.all_receivers_blocked(ty, blocked),
            Repr::Unique(m) => m.receiver(ty).is_some_and(|s| blocked(&s)),
            Repr::Custom(_) => false,
        }
    }

    /// The drop counters of this mbox's environment (for a custom mbox, of the
    /// environment it names), to count a message it refused or nobody took.
    pub(crate) fn drop_counters(&self) -> Option<std::sync::Arc<crate::drops::DropCounters>> {
        match &self.0 {
            Repr::Mpmc(m) => Some(m.drops.clone()),
            Repr::Direct(a) => Some(Agents::drops(a).clone()),
            Repr::Unique(m) => Some(m.drops.clone()),
            Repr::Custom(c) => c.environment().map(|e| EnvLayer::drops(&e.0).clone()),
        }
    }

    /// Whether this is a custom mbox ([`Mbox::custom`]).
    #[inline]
    pub(crate) fn is_custom(&self) -> bool {
        matches!(self.0, Repr::Custom(_))
    }

    /// Whether this is the direct mbox of an agent whose coop is going or gone (it
    /// handles no more messages).
    pub(crate) fn is_closed_agent(&self) -> bool {
        match &self.0 {
            Repr::Direct(a) => Agents::takes_no_messages(a),
            _ => false,
        }
    }

    /// The raw subscription operations, for custom mbox authors (see [`RawMbox`]).
    pub fn raw(&self) -> RawMbox<'_> {
        RawMbox(self)
    }
}

impl PartialEq for Mbox {
    fn eq(&self, other: &Self) -> bool {
        self.id() == other.id()
    }
}
impl Eq for Mbox {}
impl std::hash::Hash for Mbox {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.id().hash(state)
    }
}
impl fmt::Debug for Mbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Mbox({})", self.name())
    }
}

/// Sends an immutable message to `mbox`: shorthand for [`Mbox::send`].
///
/// # Errors
///
/// See [`Mbox::send`].
#[inline]
pub fn send<M: Send + Sync + 'static>(mbox: &Mbox, msg: M) -> Result<(), SendError> {
    mbox.send(msg)
}

/// Sends a mutable message to `mbox`: shorthand for [`Mbox::send_mutable`].
///
/// # Errors
///
/// See [`Mbox::send_mutable`].
pub fn send_mutable<M: Send + 'static>(mbox: &Mbox, msg: M) -> Result<(), SendError> {
    mbox.send_mutable(msg)
}
