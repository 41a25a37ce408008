//! Message limits: per agent and message type, how many demands may wait in its queue, and
//! what happens to the ones over the limit.
//!
//! 1. Limits are declared in [`Agent::define`](crate::Agent::define), before the agent's
//!    first subscription (or filter); after that they are fixed and a declaration is
//!    [`LimitError::TooLate`].
//! 2. A limit counts one type across every mbox. Its counter goes up when a demand is
//!    queued for the agent and down when that demand starts executing (also when it starts
//!    and is then dropped: the agent is deregistering, no handler in the state).
//! 3. A message that would take the counter over the limit is not queued; instead it is
//!    dropped, aborts the process (after a log line), is redirected to another mbox, or is
//!    transformed into another message for another mbox.
//! 4. Redirect and transform never block (a full bounded mchain drops instead of waiting),
//!    increment the redirection depth, and a message at depth 32 is dropped.
//! 5. An agent that declared any limit cannot subscribe to a type that has none, unless it
//!    declared a default limit: then that type gets its own counter with the default's
//!    size and action.
//! 6. Two limits for one type, or two default limits, are [`LimitError::Duplicate`].
//!
//! # Examples
//!
//! ```
//! use agentbox::prelude::*;
//!
//! struct Job(u32);
//! struct Done;
//! struct Worker { handled: u32 }
//!
//! impl Agent for Worker {
//!     fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
//!         ctx.limit_then_drop::<Job>(2)?;
//!         ctx.limit_then_drop::<Done>(1)?;
//!         ctx.subscribe_self().event(|a: &mut Self, _, _: &Job| a.handled += 1)?;
//!         ctx.subscribe_self().event(|a: &mut Self, ctx, _: &Done| {
//!             assert_eq!(a.handled, 2);
//!             ctx.deregister_coop(DeregReason::Normal);
//!         })?;
//!         Ok(())
//!     }
//!     fn on_start(&mut self, ctx: &mut Context<Self>) {
//!         // All six are sent before the first is handled: two fit, four are dropped.
//!         for i in 0..6 {
//!             send(&ctx.direct_mbox(), Job(i)).unwrap();
//!         }
//!         send(&ctx.direct_mbox(), Done).unwrap();
//!     }
//! }
//!
//! Environment::launch(|env| {
//!     env.introduce_coop(|coop| { coop.add_agent(Worker { handled: 0 }); }).unwrap();
//! }).unwrap();
//! ```

use std::any::TypeId;
use std::sync::Arc;

use parking_lot::RwLock;
use thiserror::Error;

use crate::mbox::Mbox;
use crate::message::{Message, MessageType};
use crate::sync::{AtomicUsize, Ordering};
use crate::trace::LimitAction;

/// Why a limit could not be declared.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LimitError {
    /// The type already has a limit (or a default limit was declared twice).
    #[error("message type {type_name} already has a limit")]
    Duplicate {
        /// The type, or `"<default>"`.
        type_name: &'static str,
    },
    /// Limits must be declared in `define`, before the first subscription.
    #[error("message limits must be declared in define, before the agent's first subscription")]
    TooLate,
}

/// A message a transform limit makes: the new message and where it goes.
pub struct Transformed {
    pub(crate) to: Mbox,
    pub(crate) msg: Message,
}

impl std::fmt::Debug for Transformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transformed")
            .field("to", &self.to)
            .field("msg", &self.msg.message_type())
            .finish()
    }
}

impl Transformed {
    /// Sends immutable `msg` to `to`.
    pub fn new<M: Send + Sync + 'static>(to: &Mbox, msg: M) -> Self {
        Transformed {
            to: to.clone(),
            msg: Message::new(msg),
        }
    }

    /// Sends mutable `msg` to `to` (which must be a single-consumer mbox).
    pub fn new_mutable<M: Send + 'static>(to: &Mbox, msg: M) -> Self {
        Transformed {
            to: to.clone(),
            msg: Message::new_mutable(msg),
        }
    }
}

pub(crate) type TransformFn = Arc<dyn Fn(&Message) -> Option<Transformed> + Send + Sync>;

#[derive(Clone)]
pub(crate) enum Overflow {
    Drop,
    Abort,
    Redirect(Mbox),
    Transform(TransformFn),
}

impl Overflow {
    pub(crate) fn action(&self) -> LimitAction {
        match self {
            Overflow::Drop => LimitAction::Drop,
            Overflow::Abort => LimitAction::Abort,
            Overflow::Redirect(_) => LimitAction::Redirect,
            Overflow::Transform(_) => LimitAction::Transform,
        }
    }
}

#[derive(Clone)]
pub(crate) struct Spec {
    pub(crate) max: usize,
    pub(crate) overflow: Overflow,
}

/// One type's counter.
pub(crate) struct Limit {
    pub(crate) spec: Spec,
    count: Counter,
}

impl Limit {
    fn new(spec: Spec) -> Arc<Limit> {
        Arc::new(Limit {
            count: Counter::new(spec.max),
            spec,
        })
    }

    #[inline]
    fn take(&self) -> bool {
        self.count.take()
    }

    #[inline]
    fn put_back(&self) {
        self.count.put_back();
    }
}

/// How many demands of one type are queued, against the limit.
///
/// Races: `take` is one atomic add (a compare-exchange loop cost more in the ping-pong
/// profile); a sender that overshoots takes its unit back. So a racing sender may see the
/// limit full a moment early (while another's overshoot is counted), never late: the
/// number of admitted demands not yet put back never exceeds the limit. Checked by the loom
/// model `limits::loom_tests` and by `tests/message_limits.rs`.
pub(crate) struct Counter {
    max: usize,
    count: AtomicUsize,
}

impl Counter {
    pub(crate) fn new(max: usize) -> Self {
        Counter {
            max,
            count: AtomicUsize::new(0),
        }
    }

    /// One more demand, if it fits.
    #[inline]
    pub(crate) fn take(&self) -> bool {
        // The counter guards no other memory: relaxed is enough.
        if self.count.fetch_add(1, Ordering::Relaxed) < self.max {
            true
        } else {
            self.count.fetch_sub(1, Ordering::Relaxed);
            false
        }
    }

    /// A demand taken by `take` started executing.
    #[inline]
    pub(crate) fn put_back(&self) {
        self.count.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use loom::sync::atomic::{AtomicUsize, Ordering};
    use loom::sync::Arc;

    use super::Counter;

    #[test]
    fn admitted_and_not_put_back_never_exceeds_the_limit() {
        loom::model(|| {
            let c = Arc::new(Counter::new(1));
            let inside = Arc::new(AtomicUsize::new(0));
            let admitted = Arc::new(AtomicUsize::new(0));
            let threads: Vec<_> = (0..2)
                .map(|_| {
                    let (c, inside, admitted) = (c.clone(), inside.clone(), admitted.clone());
                    loom::thread::spawn(move || {
                        if c.take() {
                            admitted.fetch_add(1, Ordering::SeqCst);
                            assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0);
                            inside.fetch_sub(1, Ordering::SeqCst);
                            c.put_back();
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            assert!(
                admitted.load(Ordering::SeqCst) >= 1,
                "one of two always fits"
            );
            // Everything was put back: the limit is whole again.
            assert!(c.take());
            assert!(!c.take());
        });
    }
}

/// Limits being declared (in the agent's context, until the first subscription).
#[derive(Default)]
pub(crate) struct Declared {
    types: Vec<(MessageType, Spec)>,
    default: Option<Spec>,
}

impl Declared {
    pub(crate) fn add(&mut self, ty: Option<MessageType>, spec: Spec) -> Result<(), LimitError> {
        match ty {
            Some(ty) => {
                if self.types.iter().any(|(t, _)| *t == ty) {
                    return Err(LimitError::Duplicate {
                        type_name: ty.name(),
                    });
                }
                self.types.push((ty, spec));
            }
            None => {
                if self.default.is_some() {
                    return Err(LimitError::Duplicate {
                        type_name: "<default>",
                    });
                }
                self.default = Some(spec);
            }
        }
        Ok(())
    }

    /// The table senders read; `None` when nothing was declared.
    pub(crate) fn build(self) -> Option<LimitTable> {
        if self.types.is_empty() && self.default.is_none() {
            return None;
        }
        Some(LimitTable {
            fixed: self
                .types
                .into_iter()
                .map(|(t, s)| (t.type_id(), Limit::new(s)))
                .collect(),
            default: self.default,
            by_default: RwLock::new(Vec::new()),
        })
    }
}

/// An agent's limits, read by every sender to it.
pub(crate) struct LimitTable {
    fixed: Box<[(TypeId, Arc<Limit>)]>,
    default: Option<Spec>,
    /// Types that got the default limit at subscription.
    by_default: RwLock<Vec<(TypeId, Arc<Limit>)>>,
}

impl LimitTable {
    fn find(&self, ty: TypeId) -> Option<Arc<Limit>> {
        if let Some((_, l)) = self.fixed.iter().find(|(t, _)| *t == ty) {
            return Some(l.clone());
        }
        self.find_default(ty)
    }

    #[cold]
    fn find_default(&self, ty: TypeId) -> Option<Arc<Limit>> {
        self.default.as_ref()?;
        self.by_default
            .read()
            .iter()
            .find(|(t, _)| *t == ty)
            .map(|(_, l)| l.clone())
    }

    /// Rule 5: a subscription to `ty` needs a limit for it.
    pub(crate) fn cover(&self, ty: MessageType) -> bool {
        if self.find(ty.type_id()).is_some() {
            return true;
        }
        let Some(spec) = &self.default else {
            return false;
        };
        let mut list = self.by_default.write();
        if !list.iter().any(|(t, _)| *t == ty.type_id()) {
            list.push((ty.type_id(), Limit::new(spec.clone())));
        }
        true
    }

    /// Rule 2: takes a place for one demand of type `ty`, or returns the full limit.
    #[inline]
    pub(crate) fn admit(&self, ty: TypeId) -> Result<(), Arc<Limit>> {
        match self.fixed.iter().find(|(t, _)| *t == ty) {
            Some((_, l)) => {
                if l.take() {
                    Ok(())
                } else {
                    Err(l.clone())
                }
            }
            None => self.admit_default(ty),
        }
    }

    #[cold]
    fn admit_default(&self, ty: TypeId) -> Result<(), Arc<Limit>> {
        match self.find_default(ty) {
            Some(l) if !l.take() => Err(l),
            _ => Ok(()),
        }
    }

    /// Rule 2: a demand of type `ty` starts executing.
    #[inline]
    pub(crate) fn release(&self, ty: TypeId) {
        match self.fixed.iter().find(|(t, _)| *t == ty) {
            Some((_, l)) => l.put_back(),
            None => {
                if let Some(l) = self.find_default(ty) {
                    l.put_back()
                }
            }
        }
    }
}
