//! Routing of a send and YDB's non-delivery rules (see [`ActorSystem`](super::ActorSystem)).

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::dead_letters::{DeadLetter, DeadLetterReason, DeliveryCounters};
use super::delivery::{Delivery, ScheduleHandle};
use super::event::Event;
use super::flags::EventFlags;
use super::handle::EventHandle;
use super::id::ActorId;
use super::inner::SystemInner;
use super::pools::Pool;
use super::system_events::Undelivered;
use crate::mbox::Mbox;
use crate::message::Message;

/// Where a send to an id goes ([`ActorSystem::route`](super::ActorSystem::route)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    /// A live local actor (the service's actor for a service id).
    Local(ActorId),
    /// Another node: the interconnect's path. `proxy` is the local service
    /// [`ActorId::interconnect_proxy`] of that node if one is registered; without it the
    /// event is not delivered, reason `Disconnected`.
    Remote {
        /// The recipient's node.
        node_id: u32,
        /// The actor serving the node's interconnect proxy service, if any.
        proxy: Option<ActorId>,
    },
    /// Nothing: not delivered, reason `ActorUnknown`.
    Unknown,
}

/// One sender's cached route (see [`SystemInner::send_event_cached`]).
#[derive(Default)]
pub(crate) struct RouteCache {
    route: Option<CachedRoute>,
    /// The last recipient that missed the cache.
    last_miss: ActorId,
}

struct CachedRoute {
    id: ActorId,
    mbox: Mbox,
    alive: Arc<AtomicBool>,
    pool: u32,
}

impl SystemInner {
    fn is_remote(&self, id: ActorId) -> bool {
        let node = id.node_id();
        node != 0 && node != self.node_id
    }

    /// Where `id` leads now.
    pub(crate) fn route(&self, id: ActorId) -> Route {
        if self.is_remote(id) {
            return Route::Remote {
                node_id: id.node_id(),
                proxy: self
                    .services
                    .lookup(ActorId::interconnect_proxy(id.node_id())),
            };
        }
        let target = if id.is_service() {
            match self.services.lookup(id) {
                Some(t) if self.is_remote(t) => return self.route(t),
                Some(t) => t,
                None => return Route::Unknown,
            }
        } else {
            id
        };
        match self.pools.get(target.pool_id() as usize) {
            Some(p)
                if p.table
                    .with(target.hint(), target.local_id(), |_| ())
                    .is_some() =>
            {
                Route::Local(target)
            }
            _ => Route::Unknown,
        }
    }

    /// Routes one handle (routing steps 1–3).
    #[inline]
    pub(crate) fn send(&self, h: EventHandle) {
        let r = h.recipient();
        if self.is_remote(r) {
            return self.send_remote(h, r.node_id());
        }
        self.send_here(h);
    }

    /// [`send`](Self::send) of a handle whose recipient is not on another node.
    #[inline(always)]
    fn send_here(&self, mut h: EventHandle) {
        let r = h.recipient();
        let target = if r.is_service() {
            match self.services.lookup(r) {
                Some(t) => {
                    h.set_rewrite(t);
                    if self.is_remote(t) {
                        return self.send_remote(h, t.node_id());
                    }
                    t
                }
                None => return self.not_delivered(h, DeadLetterReason::ActorUnknown),
            }
        } else {
            r
        };
        self.deliver_local(h, target);
    }

    /// Sends `event` (routing steps 1–3) from outside an actor. An event for another node
    /// goes to the remote router as the value, encoded there from a reference: it is boxed
    /// into its handle only when it is not delivered (or without a router).
    #[inline(always)]
    pub(crate) fn send_event<E: Event>(
        &self,
        recipient: ActorId,
        sender: ActorId,
        event: E,
        flags: EventFlags,
        cookie: u64,
    ) {
        if self.is_remote(recipient) {
            return self.send_remote_event(recipient, sender, event, flags, cookie);
        }
        let make = move || {
            EventHandle::new(recipient, sender, event)
                .with_flags(flags)
                .with_cookie(cookie)
        };
        if recipient.is_service() {
            return self.send_here(make());
        }
        // A plain local id: the handle is made after the lookup, into its message.
        self.deliver_local_with(recipient, make);
    }

    /// [`send_event`](Self::send_event) from an actor, through its route cache: a plain
    /// id sent to twice in a row is cached with its mailbox and liveness flag, so that the
    /// next sends to it skip the table (one load instead of the read lock). The flag is
    /// cleared before the id leaves the table, so a cached route stops at once too. The
    /// cached (local) route is tried first, so that the local path pays nothing for the
    /// remote check.
    #[inline(always)]
    pub(crate) fn send_event_cached<E: Event>(
        &self,
        cache: &RefCell<RouteCache>,
        recipient: ActorId,
        sender: ActorId,
        event: E,
        flags: EventFlags,
        cookie: u64,
    ) {
        let handle = |event| {
            EventHandle::new(recipient, sender, event)
                .with_flags(flags)
                .with_cookie(cookie)
        };
        {
            let c = cache.borrow();
            if let Some(route) = &c.route {
                if route.id == recipient && route.alive.load(Ordering::Acquire) {
                    let make = || handle(event);
                    return self.enqueue_with(self.pool(route.pool), &route.mbox, make);
                }
            }
        }
        if self.is_remote(recipient) {
            return self.send_remote_event(recipient, sender, event, flags, cookie);
        }
        self.send_and_learn(cache, handle(event));
    }

    /// [`send_event`](Self::send_event) to another node.
    #[inline(never)]
    fn send_remote_event<E: Event>(
        &self,
        recipient: ActorId,
        sender: ActorId,
        event: E,
        flags: EventFlags,
        cookie: u64,
    ) {
        let node_id = recipient.node_id();
        let mut h = EventHandle::header(E::EVENT_TYPE, recipient, sender)
            .with_flags(flags)
            .with_cookie(cookie);
        if let Some(router) = self.remote.get() {
            if let Err(reason) = router.send_value(&h, &event, node_id) {
                h.set_event(event);
                self.not_delivered(h, reason);
            }
            return;
        }
        h.set_event(event);
        self.send_remote(h, node_id);
    }

    /// The interconnect's path: the remote router if one is installed, else the node's
    /// proxy service, else `Disconnected`.
    fn send_remote(&self, mut h: EventHandle, node_id: u32) {
        if let Some(router) = self.remote.get() {
            return match router.send(h, node_id) {
                Ok(()) => {}
                Err(h) => self.not_delivered(h, DeadLetterReason::Disconnected),
            };
        }
        match self.services.lookup(ActorId::interconnect_proxy(node_id)) {
            Some(proxy) if !self.is_remote(proxy) => {
                h.set_rewrite(proxy);
                self.deliver_local(h, proxy);
            }
            _ => self.not_delivered(h, DeadLetterReason::Disconnected),
        }
    }

    #[inline]
    fn deliver_local(&self, h: EventHandle, target: ActorId) {
        self.deliver_local_with(target, || h);
    }

    /// [`deliver_local`](Self::deliver_local) of the handle `make` returns: made once its
    /// message's block is taken (see [`enqueue_with`](Self::enqueue_with)), or for the
    /// non-delivery rules.
    #[inline(always)]
    fn deliver_local_with(&self, target: ActorId, make: impl FnOnce() -> EventHandle) {
        let Some(pool) = self.pools.get(target.pool_id() as usize) else {
            return self.not_delivered(make(), DeadLetterReason::ActorUnknown);
        };
        match pool.table.get(target.hint(), target.local_id()) {
            Some(mbox) if !mbox.is_custom() => self.enqueue_with(pool, &mbox, make),
            // A bridge endpoint: it runs user code (filters, sinks), which must not run
            // under the table's lock (it may register actors).
            Some(mbox) => {
                let endpoint = mbox.clone();
                drop(mbox);
                self.enqueue_with(pool, &endpoint, make);
            }
            None => self.not_delivered(make(), DeadLetterReason::ActorUnknown),
        }
    }

    /// The interconnect's hook (a hook on purpose, `pub(crate)`): sends `handles` in
    /// order, as [`send`](Self::send) one by one would, except that a run of consecutive
    /// handles for the same plain local actor goes to its mailbox as one message
    /// ([`Delivery::batch`]): one queue push and at most one wake-up of its worker for the
    /// run instead of one each. Order per recipient is kept. `handles` is left empty.
    #[cfg_attr(not(feature = "interconnect"), allow(dead_code))]
    pub(crate) fn send_batch(&self, handles: &mut Vec<EventHandle>) {
        // Each run's length is counted first, so that its vector is allocated once at its
        // size (pushed one by one it grew 1, 4, 8, ...: a reallocation and copy each time).
        let lens: smallvec::SmallVec<[usize; 16]> = {
            let mut lens = smallvec::SmallVec::new();
            let mut i = 0;
            while i < handles.len() {
                let r = handles[i].recipient();
                let n = if r.is_service() || self.is_remote(r) {
                    1
                } else {
                    1 + handles[i + 1..]
                        .iter()
                        .take_while(|n| n.recipient() == r)
                        .count()
                };
                lens.push(n);
                i += n;
            }
            lens
        };
        let mut all = handles.drain(..);
        for n in lens {
            if n == 1 {
                if let Some(h) = all.next() {
                    self.send(h);
                }
                continue;
            }
            let mut run = Vec::with_capacity(n);
            run.extend(all.by_ref().take(n));
            let r = run[0].recipient();
            self.deliver_run(r, run);
        }
    }

    /// Delivers `run` (two handles or more, all for `target`, a plain local id) as one
    /// message to its mailbox; one by one to a bridge endpoint.
    fn deliver_run(&self, target: ActorId, run: Vec<EventHandle>) {
        let Some(pool) = self.pools.get(target.pool_id() as usize) else {
            for h in run {
                self.not_delivered(h, DeadLetterReason::ActorUnknown);
            }
            return;
        };
        let mut run = Some(run);
        let found = pool.table.with(target.hint(), target.local_id(), |mbox| {
            if mbox.is_custom() {
                return Some(mbox.clone());
            }
            if let Some(run) = run.take() {
                if pool.activity {
                    pool.enqueued.fetch_add(run.len() as u64, Ordering::Relaxed);
                }
                let mut handles = run.into_iter();
                if let Some(first) = handles.next() {
                    let d = Delivery::batch(first, handles, self.link, pool.activity);
                    // A direct mbox never refuses (a refused batch reports itself on drop).
                    let _ = mbox.deliver(Message::new_mutable(d), 0);
                }
            }
            None
        });
        let Some(run) = run else { return };
        match found {
            Some(Some(endpoint)) => {
                for h in run {
                    self.enqueue(pool, &endpoint, h);
                }
            }
            _ => {
                for h in run {
                    self.not_delivered(h, DeadLetterReason::ActorUnknown);
                }
            }
        }
    }

    /// Queues `h` to `mbox`, a mailbox of `pool`.
    #[inline(always)]
    fn enqueue(&self, pool: &Pool, mbox: &Mbox, h: EventHandle) {
        self.enqueue_with(pool, mbox, || h);
    }

    /// [`enqueue`](Self::enqueue) of the handle `make` returns, made once the message's
    /// block is taken, so that it is written straight into it: built first, the handle
    /// was written on the stack and copied into the node (callgrind).
    #[inline(always)]
    fn enqueue_with(&self, pool: &Pool, mbox: &Mbox, make: impl FnOnce() -> EventHandle) {
        if pool.activity {
            pool.enqueued.fetch_add(1, Ordering::Relaxed);
        }
        let msg =
            Message::new_mutable_with(|| Delivery::new(make(), self.link, None, pool.activity));
        // A direct mbox never refuses (a refused event reports itself on drop).
        let _ = mbox.deliver(msg, 0);
    }

    #[inline(never)]
    fn send_and_learn(&self, cache: &RefCell<RouteCache>, h: EventHandle) {
        let r = h.recipient();
        let repeated = {
            let mut c = cache.borrow_mut();
            std::mem::replace(&mut c.last_miss, r) == r
        };
        if !repeated || r.is_service() || self.is_remote(r) {
            return self.send(h);
        }
        let Some(pool) = self.pools.get(r.pool_id() as usize) else {
            return self.send(h);
        };
        match pool.table.resolve(r.hint(), r.local_id()) {
            Some((mbox, alive)) => {
                self.enqueue(pool, &mbox, h);
                cache.borrow_mut().route = Some(CachedRoute {
                    id: r,
                    mbox,
                    alive,
                    pool: r.pool_id(),
                });
            }
            None => self.send(h),
        }
    }

    /// YDB's non-delivery rules (see `ActorSystem`'s docs).
    pub(crate) fn not_delivered(&self, h: EventHandle, reason: DeadLetterReason) {
        self.not_delivered_as(h, reason, false);
    }

    /// [`not_delivered`](Self::not_delivered) of an event that may have been delivered
    /// after all (sent to a peer node that never confirmed it): with `unsure`, only an
    /// event that also asked for `GENERATE_UNSURE_UNDELIVERED` is forwarded or gets an
    /// `Undelivered` (which then says `unsure: true`); any other is a dead letter only.
    pub(crate) fn not_delivered_as(&self, h: EventHandle, reason: DeadLetterReason, unsure: bool) {
        let flags = h.flags();
        if unsure && !flags.contains(EventFlags::GENERATE_UNSURE_UNDELIVERED) {
            // It may have been delivered: no forward, no notice (YDB's rule).
            return self.dead_letter(&h, reason);
        }
        if flags.contains(EventFlags::FORWARD_ON_NONDELIVERY) {
            DeliveryCounters::bump(&self.counters.forwarded);
            return self.send(h.into_forwarded());
        }
        self.dead_letter(&h, reason);
        let track = flags.contains(EventFlags::TRACK_DELIVERY)
            && (!unsure || flags.contains(EventFlags::GENERATE_UNSURE_UNDELIVERED));
        if track {
            let cleared = flags.without(
                EventFlags::TRACK_DELIVERY
                    | EventFlags::SUBSCRIBE_ON_SESSION
                    | EventFlags::GENERATE_UNSURE_UNDELIVERED,
            );
            let back = EventHandle::new(
                h.sender(),
                h.recipient(),
                Undelivered {
                    source_type: h.event_type(),
                    reason: reason.undelivered_reason(),
                    unsure,
                },
            )
            .with_flags(cleared)
            .with_cookie(h.cookie());
            drop(h);
            DeliveryCounters::bump(&self.counters.undelivered);
            self.send(back);
        }
    }

    /// Publishes a dead letter and counts it.
    ///
    /// An event for another node that could not be reached (`Disconnected`) is counted as
    /// the environment's `unreachable` drop, whether or not anyone listens to dead letters;
    /// its dead letter is then not counted again as a `no_subscribers` drop (it was, and
    /// an outage's thousands of lost events read as messages nobody subscribed to).
    pub(crate) fn dead_letter(&self, h: &EventHandle, reason: DeadLetterReason) {
        DeliveryCounters::bump(&self.counters.dead_letters);
        let letter = DeadLetter {
            recipient: h.recipient(),
            sender: h.sender(),
            event_type: h.event_type(),
            cookie: h.cookie(),
            reason,
        };
        if reason == DeadLetterReason::Disconnected {
            self.env
                .0
                .drops
                .count(crate::drops::DropReason::Unreachable);
            self.dead_letters.publish_notice(letter);
        } else {
            let _ = self.dead_letters.send(letter);
        }
    }

    /// Schedules `h` to `mailbox` after `delay` on the environment's timer.
    pub(crate) fn schedule(
        &self,
        mailbox: &Mbox,
        delay: Duration,
        h: EventHandle,
    ) -> ScheduleHandle {
        let cancelled = Arc::new(AtomicBool::new(false));
        let d = Delivery::new(h, self.link, Some(cancelled.clone()), false);
        // On failure the delivery was dropped inside: it reported itself (Shutdown).
        let timer = crate::send_delayed_mutable(mailbox, delay, d)
            .ok()
            .map(|t| {
                let keep = t.clone();
                t.detach();
                keep
            });
        ScheduleHandle::new(timer, cancelled)
    }
}

#[cfg(test)]
#[path = "routing_tests.rs"]
mod tests;
