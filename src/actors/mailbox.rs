//! The mailbox: the core agent that hosts one actor (or several, registered with the same
//! mailbox) and feeds it its events.
//!
//! # One event
//!
//! 1. The routing wraps the handle in a [`Delivery`] and sends it as a mutable message to
//!    the mailbox's direct mbox: the core queues it on the pool's dispatcher.
//! 2. The mailbox's handler takes the handle, finds the hosted actor by the recipient's
//!    local id, and calls its current state function (or `bootstrap`, first).
//! 3. After the call: actors it registered with the same mailbox are adopted and
//!    bootstrapped at once; an actor that passed away is dropped; a mailbox left empty
//!    parks itself for the next actor of its type (`idle.rs`), or deregisters its coop
//!    when its pool keeps enough idle mailboxes or the system stops.
//!
//! # A parked mailbox's next actor
//!
//! `register` takes a parked mailbox of the actor's type, fills the actor's table entry
//! with it, leaves the actor in the mailbox's dock and sends it a [`HostSignal`]: the
//! mailbox makes the actor its first one and bootstraps it. Events that
//! were still queued for the mailbox's earlier actors, or that reach it later through a
//! route cached before they passed away, carry those actors' local ids, which are never
//! reused: they match no hosted actor and are not delivered (step 2).
//!
//! # Non-delivery of queued events
//!
//! A `Delivery` whose handle was never taken reports itself when it is dropped: the
//! mailbox's coop was deregistered with it queued (the actor passed away or the system
//! stopped), it arrived after the agent finished, or its timer's environment is gone. The
//! handle then gets the non-delivery treatment of the routing. A handle for an actor the
//! mailbox no longer hosts gets it in step 2. So no event is lost silently.
//!
//! Races: the actor's id leaves the table in `pass_away` (step 3 happens later); a sender
//! that resolved the id just before still queues the event, which then takes one of the
//! two paths above.

use std::any::TypeId;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::dead_letters::DeadLetterReason;
use super::delivery::{Delivery, Extra};
use super::event::EV_POISON;
use super::handle::EventHandle;
use super::id::ActorId;
use super::idle::{Dock, Parked};
use super::inner::SystemInner;
use crate::agent::{Agent, Context, DefineError};
use crate::coop::DeregReason;
use crate::exception::ExceptionReaction;
use crate::mbox::Mbox;

/// An actor with its context, type-erased for the mailbox.
pub(crate) trait Hosted: Send {
    fn id(&self) -> ActorId;
    fn bootstrap(&mut self, parent: ActorId);
    /// Runs the current state function; gives back an event it did not handle.
    fn handle(&mut self, ev: EventHandle) -> Option<EventHandle>;
    fn passed_away(&self) -> bool;
    /// Passes away if not yet (unhandled Poison).
    fn pass_away_quietly(&mut self);
    fn take_children(&mut self) -> Vec<Box<dyn Hosted>>;
    fn set_mailbox(&mut self, mbox: &crate::Mbox);
    fn parent(&self) -> ActorId;
    /// [`handle`](Self::handle) of the handle in `slot` (always `Some`), taken out only
    /// as the state function's argument (the first actor's path, see `MailboxAgent`).
    fn handle_in(&mut self, slot: &mut Option<EventHandle>) -> Option<EventHandle>;
    /// Whether it registered actors with its mailbox that are not adopted yet.
    fn has_children(&self) -> bool;
    /// The reaction to a panic in its code (`Actor::exception_reaction`).
    fn exception_reaction(&self) -> ExceptionReaction;
}

/// The actor type a mailbox is made for, hosted inline as its first ([`Cell`](Self::Cell)):
/// its events need no dynamic call, and the mailbox names no actor trait (`actor.rs`
/// implements this for every actor).
pub(crate) trait Guest: 'static {
    /// The actor with its context.
    type Cell: Hosted + 'static;
    /// An actor registered with a parked mailbox, before the mailbox made it a cell.
    type Pending: Send + 'static;
    /// The cell of `pending`, made by its mailbox (on the pool's thread: the system's and
    /// the mailbox's reference counts are then taken and dropped on one thread).
    fn adopt(pending: Self::Pending, sys: Arc<SystemInner>, mbox: &Mbox) -> Self::Cell;
    /// The id of `pending`.
    fn pending_id(pending: &Self::Pending) -> ActorId;
}

/// The signal that gives a parked mailbox its next actor (see `idle.rs`): a signal
/// (a type of size zero) is sent without an allocation, where a [`Delivery`] took a
/// message node, allocated by the registering thread and freed by the pool's: with
/// glibc's allocator the two threads then contend for one arena's lock on every actor
/// (perf, `ydb_register`: ~30 % of the wall time in futex waits and wakes).
pub(crate) struct HostSignal;

/// The agent that is a mailbox.
pub(crate) struct MailboxAgent<A: Guest> {
    sys: Arc<SystemInner>,
    pool: u32,
    /// The actor the mailbox was made for, inline: its events need no dynamic call.
    /// `None` once it passed away.
    first: Option<A::Cell>,
    /// Actors registered with the same mailbox (rare).
    others: Vec<Box<dyn Hosted>>,
    reaction: ExceptionReaction,
    /// Its direct mbox and where `register` leaves its next actor while it is parked
    /// (made in `define`): what its pool's idle list holds.
    dock: Option<Arc<Dock<A::Pending>>>,
    /// Whether it parked itself and no actor came since.
    parked: bool,
}

impl<A: Guest> MailboxAgent<A> {
    pub(crate) fn new(sys: Arc<SystemInner>, pool: u32, first: A::Cell) -> Self {
        MailboxAgent {
            reaction: first.exception_reaction(),
            sys,
            pool,
            first: Some(first),
            others: Vec::new(),
            dock: None,
            parked: false,
        }
    }

    /// Steps 2 and 3 of one event.
    #[inline(always)]
    fn deliver(&mut self, ctx: &mut Context<Self>, ev: EventHandle, counted: bool) {
        self.deliver_in(ctx, &mut Some(ev), counted);
    }

    /// [`deliver`](Self::deliver) of the handle in `slot` (`Some`; left `None`), which
    /// the first actor's state function gets straight from there (see
    /// [`Hosted::handle_in`]).
    #[inline(always)]
    fn deliver_in(
        &mut self,
        ctx: &mut Context<Self>,
        slot: &mut Option<EventHandle>,
        counted: bool,
    ) {
        let Some(ev) = slot.as_ref() else { return };
        let pool = self.sys.pool(self.pool);
        if counted {
            pool.dequeued.fetch_add(1, Ordering::Relaxed);
        }
        let local = ev.recipient_rewrite().local_id();
        if let Some(first) = &mut self.first {
            if first.id().local_id() == local {
                pool.count_handled();
                let start = pool.activity.then(Instant::now);
                if let Some(ev) = first.handle_in(slot) {
                    self.unhandled_by_first(ev);
                }
                if let Some(first) = &self.first {
                    if first.passed_away() || first.has_children() {
                        self.after_first(ctx);
                    }
                }
                if let Some(t) = start {
                    self.sys.pool(self.pool).add_work(t);
                }
                return;
            }
        }
        if let Some(ev) = slot.take() {
            self.deliver_to_other(ctx, ev);
        }
    }

    /// [`deliver`](Self::deliver) of a scheduled event (not cancelled: its handle was
    /// still there) or of a batch.
    #[inline(never)]
    fn deliver_extra(
        &mut self,
        ctx: &mut Context<Self>,
        ev: EventHandle,
        counted: bool,
        extra: Extra,
    ) {
        match extra {
            Extra::Cancelled(c) if c.load(Ordering::Acquire) => {}
            Extra::Cancelled(_) => self.deliver(ctx, ev, counted),
            Extra::Rest(mut rest) => {
                self.deliver(ctx, ev, counted);
                for ev in rest.handles.by_ref() {
                    self.deliver(ctx, ev, counted);
                }
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn unhandled_by_first(&mut self, ev: EventHandle) {
        match &mut self.first {
            Some(first) if ev.event_type() == EV_POISON => first.pass_away_quietly(),
            _ => self.sys.dead_letter(&ev, DeadLetterReason::Unhandled),
        }
    }

    /// Step 3 for the first actor.
    #[inline(never)]
    fn after_first(&mut self, ctx: &mut Context<Self>) {
        let Some(first) = &mut self.first else { return };
        let children = first.take_children();
        if first.passed_away() {
            self.first = None;
        }
        self.adopt(children);
        self.release_if_empty(ctx);
    }

    /// Step 2 and 3 for an actor registered with the same mailbox.
    #[inline(never)]
    fn deliver_to_other(&mut self, ctx: &mut Context<Self>, ev: EventHandle) {
        let local = ev.recipient_rewrite().local_id();
        let Some(i) = self.others.iter().position(|a| a.id().local_id() == local) else {
            let reason = self.sys.loss_reason();
            self.sys.not_delivered(ev, reason);
            return;
        };
        let pool = self.sys.pool(self.pool);
        pool.count_handled();
        let start = pool.activity.then(Instant::now);
        if let Some(ev) = self.others[i].handle(ev) {
            if ev.event_type() == EV_POISON {
                self.others[i].pass_away_quietly();
            } else {
                self.sys.dead_letter(&ev, DeadLetterReason::Unhandled);
            }
        }
        let children = self.others[i].take_children();
        if self.others[i].passed_away() {
            self.others.swap_remove(i);
        }
        self.adopt(children);
        self.release_if_empty(ctx);
        if let Some(t) = start {
            self.sys.pool(self.pool).add_work(t);
        }
    }

    /// A mailbox left empty parks itself for the next actor of its type, or
    /// deregisters (its pool keeps enough, or the system stops).
    #[inline]
    fn release_if_empty(&mut self, ctx: &mut Context<Self>) {
        if self.first.is_none() && self.others.is_empty() {
            self.release(ctx);
        }
    }

    #[inline(never)]
    fn release(&mut self, ctx: &mut Context<Self>) {
        let parked = match &self.dock {
            Some(dock) => {
                let dock: Parked = dock.clone();
                self.sys.pool(self.pool).idle.park(TypeId::of::<A>(), &dock)
            }
            None => false,
        };
        if parked {
            self.parked = true;
            self.sys.env.idle_coops_changed(1);
        } else {
            ctx.deregister_coop(DeregReason::Normal);
        }
    }

    /// [`HostSignal`]: this parked mailbox's next actor waits in its dock.
    fn adopt_next(&mut self, ctx: &mut Context<Self>) {
        let Some(dock) = &self.dock else { return };
        let Some(pending) = dock.take() else { return };
        let cell = A::adopt(pending, self.sys.clone(), dock.mbox());
        self.parked = false;
        debug_assert!(self.first.is_none() && self.others.is_empty());
        self.reaction = cell.exception_reaction();
        self.first = Some(cell);
        self.bootstrap_first();
        self.release_if_empty(ctx);
    }

    /// Adopts actors registered with this mailbox and bootstraps each at once (their own
    /// children recursively: depth = nesting of registrations in bootstraps). Usually
    /// there are none: checked inline (the call and the empty vector's loop were ~30
    /// instructions per registered actor, callgrind `ydb_register`).
    #[inline]
    fn adopt(&mut self, children: Vec<Box<dyn Hosted>>) {
        if !children.is_empty() {
            self.adopt_all(children);
        }
    }

    #[inline(never)]
    fn adopt_all(&mut self, children: Vec<Box<dyn Hosted>>) {
        for mut child in children {
            let pool = self.sys.pool(self.pool);
            pool.count_handled();
            let start = pool.activity.then(Instant::now);
            let parent = child.parent();
            child.bootstrap(parent);
            if let Some(t) = start {
                self.sys.pool(self.pool).add_work(t);
            }
            let grandchildren = child.take_children();
            if !child.passed_away() {
                self.others.push(child);
            }
            self.adopt(grandchildren);
        }
    }

    fn bootstrap_first(&mut self) {
        let Some(first) = &mut self.first else { return };
        let pool = self.sys.pool(self.pool);
        pool.count_handled();
        let start = pool.activity.then(Instant::now);
        let parent = first.parent();
        first.bootstrap(parent);
        if let Some(t) = start {
            pool.add_work(t);
        }
        let children = first.take_children();
        if first.passed_away() {
            self.first = None;
        }
        self.adopt(children);
    }
}

impl<A: Guest> Agent for MailboxAgent<A> {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let mbox = ctx.direct_mbox();
        if let Some(first) = &mut self.first {
            first.set_mailbox(&mbox);
        }
        self.dock = Some(Arc::new(Dock::new(mbox)));
        if !self.sys.stats_registered() {
            if let Ok(me) = ctx.me() {
                self.sys.register_stats(&me);
            }
        }
        ctx.subscribe_self()
            .event_mutable(|a: &mut Self, ctx, mut d: Delivery| {
                if d.handle.is_none() {
                    return ctx.deregister_coop(DeregReason::Shutdown);
                }
                let counted = d.link.counted;
                match d.extra.take() {
                    // The handle stays in `d` until the state function's call takes it.
                    None => a.deliver_in(ctx, &mut d.handle, counted),
                    Some(extra) => {
                        if let Some(ev) = d.handle.take() {
                            a.deliver_extra(ctx, ev, counted, *extra);
                        }
                    }
                }
                // Nothing left to drop (the handle was taken, no extra, a static link):
                // its drop glue, out of line, was ~40 instructions per event (callgrind).
                // Should a state function unwind, `d` is dropped instead: empty too.
                debug_assert!(d.handle.is_none());
                std::mem::forget(d);
            })?;
        ctx.subscribe_self()
            .event(|a: &mut Self, ctx, _: &HostSignal| a.adopt_next(ctx))?;
        Ok(())
    }

    fn on_start(&mut self, ctx: &mut Context<Self>) {
        self.bootstrap_first();
        self.release_if_empty(ctx);
    }

    fn on_finish(&mut self, _ctx: &mut Context<Self>) {
        // Parked (the environment stops): off the list, so that nobody gives it an actor;
        // one given just before never runs and leaves the table (`Dock::close`).
        if self.parked {
            let idle = &self.sys.pool(self.pool).idle;
            if self.sys.env.is_shutting_down() {
                // All of them go: the lists are emptied once, not searched by each.
                drop(idle.close());
            } else if let Some(dock) = &self.dock {
                let dock: Parked = dock.clone();
                if idle.remove(TypeId::of::<A>(), &dock) {
                    self.sys.env.idle_coops_changed(-1);
                }
            }
        }
        if let Some(never_ran) = self.dock.as_ref().and_then(|d| d.close()) {
            self.sys.forget(A::pending_id(&never_ran));
        }
        // Children registered by a handler that then panicked were never adopted: their
        // ids leave the table too.
        let mut gone: Vec<Box<dyn Hosted>> = std::mem::take(&mut self.others);
        if let Some(first) = self.first.take() {
            gone.push(Box::new(first));
        }
        while let Some(mut a) = gone.pop() {
            gone.extend(a.take_children());
            self.sys.forget(a.id());
        }
    }

    fn exception_reaction(&self) -> ExceptionReaction {
        self.reaction
    }
}
