//! A handle on its way to a mailbox ([`Delivery`]: the message the routing sends to a
//! mailbox's direct mbox), and the cancel handle of a scheduled one ([`ScheduleHandle`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::handle::EventHandle;
use super::inner::{SystemLink, DETACHED};
use crate::timer::TimerHandle;

/// A handle on its way to a mailbox. Reports itself as not delivered if dropped with the
/// handle still inside (see the module docs).
///
/// Kept small (112 bytes): it is moved into its message's node and out of it once per
/// event; what only scheduled events and batches carry is behind one pointer.
pub(crate) struct Delivery {
    pub(super) handle: Option<EventHandle>,
    pub(super) link: &'static SystemLink,
    /// A scheduled event's cancel flag, or the rest of a batch.
    pub(super) extra: Option<Box<Extra>>,
}

/// What a [`Delivery`] of a scheduled event or of a batch carries besides its handle.
pub(super) enum Extra {
    /// A scheduled event's flag: a cancelled one is dropped quietly.
    Cancelled(Arc<AtomicBool>),
    /// Handles for the same mailbox that follow `handle`, in order: a batch
    /// ([`SystemInner::send_batch`](super::inner::SystemInner::send_batch), the
    /// interconnect's hook) is one message, one queue push, one wake-up.
    Rest(Rest),
}

// Moved twice per event (into its node, out of it): the size is the cost.
const _: () = assert!(std::mem::size_of::<Delivery>() <= 112);

/// The handles of a batch after its first (see [`Delivery::batch`]). Those still inside
/// when it is dropped (the handler of one of them panicked, or the mailbox is gone) are
/// reported as not delivered, like a dropped [`Delivery`].
pub(crate) struct Rest {
    pub(super) handles: std::vec::IntoIter<EventHandle>,
    link: &'static SystemLink,
    counted: bool,
}

impl Drop for Rest {
    fn drop(&mut self) {
        if self.handles.len() == 0 {
            return;
        }
        if let Some(sys) = self.link.sys.upgrade() {
            for h in self.handles.by_ref() {
                if self.counted {
                    sys.dequeued(h.recipient_rewrite());
                }
                let reason = sys.loss_reason();
                sys.not_delivered(h, reason);
            }
        }
    }
}

impl Delivery {
    #[inline(always)]
    pub(crate) fn new(
        handle: EventHandle,
        links: &'static [SystemLink; 2],
        cancelled: Option<Arc<AtomicBool>>,
        counted: bool,
    ) -> Self {
        Delivery {
            handle: Some(handle),
            link: &links[counted as usize],
            extra: cancelled.map(|c| Box::new(Extra::Cancelled(c))),
        }
    }

    /// A batch for one mailbox: `first`, then `rest` in order (delivered by the mailbox in
    /// one go). Never for a bridge endpoint, which takes one handle per message.
    #[cfg_attr(not(feature = "interconnect"), allow(dead_code))]
    pub(crate) fn batch(
        first: EventHandle,
        rest: std::vec::IntoIter<EventHandle>,
        links: &'static [SystemLink; 2],
        counted: bool,
    ) -> Self {
        let link = &links[counted as usize];
        let extra = (rest.len() > 0).then(|| {
            Box::new(Extra::Rest(Rest {
                handles: rest,
                link,
                counted,
            }))
        });
        Delivery {
            handle: Some(first),
            link,
            extra,
        }
    }

    /// Whether this is a scheduled event that was cancelled.
    #[inline]
    fn cancelled(&self) -> bool {
        match self.extra.as_deref() {
            Some(Extra::Cancelled(c)) => c.load(Ordering::Acquire),
            _ => false,
        }
    }
}

impl Delivery {
    /// The handle a bridge endpoint (`crate::bridge`) was given in `msg`, with whether it
    /// was counted in its pool's queue; `None` for anything else, a stop or a cancelled
    /// scheduled event.
    pub(crate) fn take_for_endpoint(msg: &crate::Message) -> Option<(EventHandle, bool)> {
        msg.take_mutable::<Delivery>()?.take_handle()
    }

    fn take_handle(&mut self) -> Option<(EventHandle, bool)> {
        let h = self.handle.take()?;
        if self.cancelled() {
            return None;
        }
        Some((h, self.link.counted))
    }

    /// A delivery without a handle: asks the mailbox to deregister (the system stops).
    /// One message type for both keeps a mailbox at one subscription.
    pub(crate) fn stop() -> Self {
        Delivery {
            handle: None,
            link: &DETACHED,
            extra: None,
        }
    }
}

impl Drop for Delivery {
    fn drop(&mut self) {
        let Some(h) = self.handle.take() else { return };
        if self.cancelled() {
            return;
        }
        if let Some(sys) = self.link.sys.upgrade() {
            if self.link.counted {
                sys.dequeued(h.recipient_rewrite());
            }
            let reason = sys.loss_reason();
            sys.not_delivered(h, reason);
        }
    }
}

/// A cancellable scheduled event ([`ActorContext::schedule`](super::ActorContext::schedule)).
///
/// Dropping the handle does not cancel (YDB's schedule is fire-and-forget);
/// [`cancel`](Self::cancel) does, and then the event is never handled — not even a copy
/// already queued — and is not a dead letter.
#[derive(Debug)]
pub struct ScheduleHandle {
    timer: Option<TimerHandle>,
    cancelled: Arc<AtomicBool>,
}

impl ScheduleHandle {
    pub(crate) fn new(timer: Option<TimerHandle>, cancelled: Arc<AtomicBool>) -> Self {
        ScheduleHandle { timer, cancelled }
    }

    /// Cancels the event: it will not be handled (a handler already running finishes).
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Release);
        if let Some(t) = &self.timer {
            t.cancel();
        }
    }

    /// Whether the event may still be delivered: not cancelled, and not yet fired.
    pub fn is_active(&self) -> bool {
        !self.cancelled.load(Ordering::Acquire)
            && self.timer.as_ref().is_some_and(|t| t.is_active())
    }
}
