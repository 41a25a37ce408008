//! Subscriptions: which handler runs for a message from an mbox in a state.
//!
//! The index lives in the agent's [`Context`] and changes immediately when a handler
//! subscribes or unsubscribes; the handler closures live beside it in a slab and are moved
//! in (or freed) when the running handler returns — a handler cannot be replaced while it
//! runs. Between two handlers nothing else looks at the index (handlers of one agent never
//! run concurrently), so the deferral is invisible.

use std::any::TypeId;

use std::sync::Arc;

use smallvec::SmallVec;
use sync_wrapper::SyncWrapper;

use super::{Agent, AgentRef, Context, State, ThreadSafeContext};
use crate::mbox::{DeliveryFilter, Mbox, MboxKind, Sink, SubscribeError};
use crate::message::{Message, MessageType};
use crate::small_map::SmallMap;

/// An event handler; returns whether the message was of its type (and it ran): the
/// executor's handler cache relies on that answer (see `Subscriptions::last`).
pub(crate) type EventFn<A> = Box<dyn FnMut(&mut A, &mut Context<A>, &Message) -> bool + Send>;
pub(crate) type HookFn<A> = Box<dyn FnMut(&mut A, &mut Context<A>) + Send>;
pub(crate) type SafeFn<A> = Arc<dyn Fn(&A, &ThreadSafeContext<'_>, &Message) + Send + Sync>;

pub(crate) enum Handler<A: Agent> {
    Event(EventFn<A>),
    Hook(HookFn<A>),
    /// A thread-safe handler: may run in parallel with other thread-safe handlers of the
    /// same agent on `adv_thread_pool`.
    Safe(SafeFn<A>),
}

/// What a subscription does with a message.
#[derive(Clone)]
pub(crate) enum Action {
    /// Call the handler in this slot.
    Handler(usize),
    /// Call the thread-safe handler in this slot.
    SafeHandler(usize),
    /// Switch to the state, then look the same message up again there.
    TransferTo(State),
    /// Drop the message here, without looking in parent states.
    Suppress,
    /// Switch to the state; the message is consumed.
    JustSwitchTo(State),
}

/// Handlers added since the executor last moved them into its slab.
pub(crate) type NewHandlers<A> = SmallVec<[(usize, Handler<A>); 1]>;

/// Key of the handler index: (mbox id, message type, state id).
type Key = (u64, TypeId, u64);

/// A subscribed mbox, keyed by (mbox id, `TypeId`): the key holds the type's id, so the
/// entry keeps only the rest of its `MessageType` (24 bytes less in every agent).
struct MboxUse {
    mbox: Mbox,
    name: &'static str,
    mutable: bool,
    count: u32,
}

impl MboxUse {
    fn message_type(&self, id: TypeId) -> MessageType {
        MessageType::from_parts(id, self.name, self.mutable)
    }
}

pub(crate) struct Subscriptions<A: Agent> {
    // One entry inline: most agents subscribe to one type from one mbox, and then hold no
    // allocation for it.
    index: SmallMap<Key, Action, 1>,
    /// The slot of the plain handler the last lookup for a message from the agent's own
    /// direct mbox found, or `u32::MAX`; emptied by every change of the index and every
    /// state switch. A conversation repeats one type: the executor first offers the message
    /// to this handler, which runs only if the message is of its type (`EventFn` says
    /// whether it did) — the handler's own check of the type, which it makes anyway, in
    /// place of the index's scan (~50 instructions per message, callgrind, ping-pong). For
    /// a message from the own mbox, in an unchanged state and index, a handler of its type
    /// is exactly what the lookup would find. 4 bytes beside the flags below.
    last: u32,
    /// Number of index entries (or hooks) that use each slot.
    slot_uses: SmallVec<[u32; 2]>,
    /// Behind `SyncWrapper` (only ever reached through `&mut`): with it an agent's executor
    /// is `Sync` exactly when the agent is.
    pub(crate) new_handlers: SyncWrapper<NewHandlers<A>>,
    /// Other mboxes, dead letters, filters and slot recycling, allocated on first use (most
    /// agents subscribe only to their own mbox, and never unsubscribe).
    rare: Option<Box<SubsRare<A>>>,
    pub(crate) finished: bool,
    /// Set with `finished` by `deactivate_agent`: the error says why.
    deactivated: bool,
    /// The agent's message limits are fixed (at its first subscription or after `define`);
    /// kept here, beside the other flags, where it costs no bytes of its own.
    pub(crate) limits_fixed: bool,
    /// Handlers wait in `new_handlers`, or slots in `rare.freed` (read for every message:
    /// one flag beside the others, not a look into either list, which cost 4 instructions
    /// more per message, callgrind).
    pending: bool,
}

struct SubsRare<A: Agent> {
    /// The mboxes subscribed to other than the agent's own, with their use counts. The own
    /// direct mbox is not recorded: its uses are the index entries (and dead letters) with
    /// its id, so an agent that subscribes only to its own mbox, the common case, keeps
    /// nothing here (88 bytes less in every agent than an inline entry in the agent).
    mboxes: SmallMap<(u64, TypeId), MboxUse>,
    dead_letters: SmallMap<(u64, TypeId), usize>,
    filters: SmallMap<(u64, TypeId), (Mbox, MessageType)>,
    free_slots: Vec<usize>,
    freed: Vec<usize>,
    /// Thread-safe handlers (only `adv_thread_pool` runs them in parallel), by slot,
    /// callable through `&self`.
    pub(crate) safe: Vec<Option<SafeFn<A>>>,
}

impl<A: Agent> Default for SubsRare<A> {
    fn default() -> Self {
        SubsRare {
            mboxes: SmallMap::default(),
            dead_letters: SmallMap::default(),
            filters: SmallMap::default(),
            free_slots: Vec::new(),
            freed: Vec::new(),
            safe: Vec::new(),
        }
    }
}

impl<A: Agent> Default for Subscriptions<A> {
    fn default() -> Self {
        Subscriptions {
            index: SmallMap::default(),
            last: u32::MAX,
            slot_uses: SmallVec::new(),
            new_handlers: SyncWrapper::new(SmallVec::new()),
            rare: None,
            finished: false,
            deactivated: false,
            limits_fixed: false,
            pending: false,
        }
    }
}

impl<A: Agent> Subscriptions<A> {
    /// The thread-safe handler in `slot`, if any.
    pub(crate) fn safe_handler(&self, slot: usize) -> Option<&SafeFn<A>> {
        self.rare.as_ref()?.safe.get(slot)?.as_ref()
    }

    /// Sets (or empties) the thread-safe handler in `slot`.
    pub(crate) fn set_safe_handler(&mut self, slot: usize, f: Option<SafeFn<A>>) {
        if f.is_none() && self.rare.as_ref().is_none_or(|r| slot >= r.safe.len()) {
            return;
        }
        let safe = &mut self.rare_mut().safe;
        if slot >= safe.len() {
            safe.resize_with(slot + 1, || None);
        }
        safe[slot] = f;
    }

    fn rare_mut(&mut self) -> &mut SubsRare<A> {
        self.rare.get_or_insert_default()
    }

    /// Slots emptied since the last call, for the executor to clear in its slab. Taken
    /// after the new handlers (`new_handlers`): nothing is pending after the two.
    pub(crate) fn take_freed(&mut self) -> Vec<usize> {
        debug_assert!(self.new_handlers.get_mut().is_empty());
        self.pending = false;
        self.rare
            .as_mut()
            .map(|r| std::mem::take(&mut r.freed))
            .unwrap_or_default()
    }

    /// The action for a message in `state` or the nearest parent that has one.
    #[inline]
    pub(crate) fn find(&self, mbox: u64, ty: TypeId, state: &State) -> Option<&Action> {
        let mut s = state;
        loop {
            if let Some(a) = self.index.get(&(mbox, ty, s.id())) {
                return Some(a);
            }
            s = s.parent()?;
        }
    }

    /// The handler slot of the last lookup for the own direct mbox (see `last`).
    #[inline(always)]
    pub(crate) fn last_handler(&self) -> Option<usize> {
        (self.last != u32::MAX).then_some(self.last as usize)
    }

    /// The slot of the plain handler for a message in `state` or the nearest parent that
    /// has an action for it; `None` if that action is something else (or there is none).
    /// With `own` (the message is from the agent's own direct mbox), a slot found is
    /// remembered (see `last`).
    #[inline]
    pub(crate) fn find_handler(
        &mut self,
        mbox: u64,
        ty: TypeId,
        state: &State,
        own: bool,
    ) -> Option<usize> {
        match self.find(mbox, ty, state) {
            Some(&Action::Handler(slot)) => {
                if own {
                    self.last = u32::try_from(slot).unwrap_or(u32::MAX);
                }
                Some(slot)
            }
            _ => None,
        }
    }

    /// Forgets the last handler: the agent switches state.
    #[inline]
    pub(crate) fn state_changed(&mut self) {
        self.last = u32::MAX;
    }

    /// Forgets the last handler: the index changes.
    #[inline]
    fn index_changed(&mut self) {
        self.last = u32::MAX;
    }

    pub(crate) fn dead_letter(&self, mbox: u64, ty: TypeId) -> Option<usize> {
        self.rare.as_ref()?.dead_letters.get(&(mbox, ty)).copied()
    }

    pub(crate) fn has(&self, mbox: u64, ty: TypeId, state: &State) -> bool {
        self.index.contains_key(&(mbox, ty, state.id()))
    }

    pub(crate) fn alloc(&mut self, uses: u32, h: Handler<A>) -> usize {
        let recycled = self.rare.as_mut().and_then(|r| r.free_slots.pop());
        let slot = recycled.unwrap_or_else(|| {
            self.slot_uses.push(0);
            self.slot_uses.len() - 1
        });
        self.slot_uses[slot] = uses;
        self.new_handlers.get_mut().push((slot, h));
        self.pending = true;
        slot
    }

    pub(crate) fn release(&mut self, slot: usize) {
        self.slot_uses[slot] -= 1;
        if self.slot_uses[slot] == 0 {
            self.rare_mut().freed.push(slot);
            self.pending = true;
        }
    }

    /// Returns freed slots to the allocator; the caller has emptied them in the slab.
    pub(crate) fn recycle(&mut self, slots: impl IntoIterator<Item = usize>) {
        let mut slots = slots.into_iter().peekable();
        if slots.peek().is_some() {
            self.rare_mut().free_slots.extend(slots);
        }
    }

    #[inline]
    pub(crate) fn has_pending(&mut self) -> bool {
        self.pending
    }

    /// The subscriptions (in any state) and dead-letter handlers of `ty` from mbox `mbox`.
    fn uses(&self, mbox: u64, ty: TypeId) -> usize {
        let subscribed = self
            .index
            .iter()
            .filter(|((m, t, _), _)| *m == mbox && *t == ty)
            .count();
        let dead_letter = self
            .rare
            .as_ref()
            .is_some_and(|r| r.dead_letters.contains_key(&(mbox, ty)));
        subscribed + usize::from(dead_letter)
    }

    /// Counts one more use of (`mbox`, `ty`), subscribing at the mbox on the first. Called
    /// before the use is entered in the index (or dead letters).
    fn use_mbox(
        &mut self,
        me: &AgentRef,
        mbox: &Mbox,
        ty: MessageType,
    ) -> Result<(), SubscribeError> {
        let key = (mbox.id().0, ty.type_id());
        if is_own_direct(me, mbox) {
            if self.uses(key.0, key.1) == 0 {
                mbox.raw().subscribe(ty, &Sink::from(me.clone()))?;
            }
            return Ok(());
        }
        if let Some(u) = self.rare.as_mut().and_then(|r| r.mboxes.get_mut(&key)) {
            u.count += 1;
            return Ok(());
        }
        mbox.raw().subscribe(ty, &Sink::from(me.clone()))?;
        self.rare_mut().mboxes.insert(
            key,
            MboxUse {
                mbox: mbox.clone(),
                name: ty.name(),
                mutable: ty.is_mutable(),
                count: 1,
            },
        );
        Ok(())
    }

    /// Counts one use of (`mbox`, `ty`) less, unsubscribing at the mbox after the last.
    /// Called after the use left the index (or dead letters).
    fn unuse_mbox(&mut self, me: &AgentRef, mbox: u64, ty: TypeId) {
        let key = (mbox, ty);
        let recorded = self.rare.as_mut().and_then(|r| r.mboxes.get_mut(&key));
        if mbox == me.0.mbox_id().0 && recorded.is_none() {
            // The agent's own direct mbox (any other mbox with its id was recorded).
            if self.uses(mbox, ty) == 0 {
                me.0.direct_set_subscribed(ty, false);
            }
            return;
        }
        if let Some(u) = recorded {
            u.count -= 1;
            if u.count == 0 {
                let rare = self.rare.as_mut().expect("recorded above");
                let u = rare.mboxes.remove(&key).expect("present above");
                u.mbox
                    .raw()
                    .unsubscribe(u.message_type(ty), &Sink::from(me.clone()));
            }
        }
    }

    pub(crate) fn add(
        &mut self,
        me: &AgentRef,
        mbox: &Mbox,
        ty: MessageType,
        states: &[State],
        action: NewAction<A>,
    ) -> Result<(), SubscribeError> {
        if self.finished {
            return Err(self.closed_error());
        }
        if ty.is_mutable() && mbox.kind() == MboxKind::MultiConsumer {
            return Err(SubscribeError::MutableFromMultiConsumer {
                type_name: ty.name(),
                mbox: mbox.name(),
            });
        }
        let mid = mbox.id().0;
        for (i, s) in states.iter().enumerate() {
            if self.index.contains_key(&(mid, ty.type_id(), s.id())) || states[..i].contains(s) {
                return Err(SubscribeError::Duplicate {
                    type_name: ty.name(),
                    mbox: mbox.name(),
                    state: s.name().to_owned(),
                });
            }
        }
        self.use_mbox(me, mbox, ty)?;
        // One mbox-level subscription per (mbox, type) is enough, whatever the states.
        if let Some(u) = self
            .rare
            .as_mut()
            .and_then(|r| r.mboxes.get_mut(&(mid, ty.type_id())))
        {
            u.count += (states.len() as u32).saturating_sub(1);
        }
        let uses = states.len() as u32;
        let action = match action {
            NewAction::Handler(h) => Action::Handler(self.alloc(uses, Handler::Event(h))),
            NewAction::Safe(f) => Action::SafeHandler(self.alloc(uses, Handler::Safe(f))),
            NewAction::Action(a) => a,
        };
        self.index_changed();
        for s in states {
            self.index
                .insert((mid, ty.type_id(), s.id()), action.clone());
        }
        Ok(())
    }

    pub(crate) fn add_dead_letter(
        &mut self,
        me: &AgentRef,
        mbox: &Mbox,
        ty: MessageType,
        h: EventFn<A>,
    ) -> Result<(), SubscribeError> {
        if self.finished {
            return Err(self.closed_error());
        }
        let key = (mbox.id().0, ty.type_id());
        if self
            .rare
            .as_ref()
            .is_some_and(|r| r.dead_letters.contains_key(&key))
        {
            return Err(SubscribeError::Duplicate {
                type_name: ty.name(),
                mbox: mbox.name(),
                state: "<dead letter>".to_owned(),
            });
        }
        if ty.is_mutable() && mbox.kind() == MboxKind::MultiConsumer {
            return Err(SubscribeError::MutableFromMultiConsumer {
                type_name: ty.name(),
                mbox: mbox.name(),
            });
        }
        self.use_mbox(me, mbox, ty)?;
        let slot = self.alloc(1, Handler::Event(h));
        self.rare_mut().dead_letters.insert(key, slot);
        Ok(())
    }

    /// Removes one subscription; true if there was one.
    pub(crate) fn remove(&mut self, me: &AgentRef, mbox: u64, ty: TypeId, state: &State) -> bool {
        match self.index.remove(&(mbox, ty, state.id())) {
            Some(action) => {
                self.index_changed();
                if let Action::Handler(slot) | Action::SafeHandler(slot) = action {
                    self.release(slot);
                }
                self.unuse_mbox(me, mbox, ty);
                true
            }
            None => false,
        }
    }

    /// Removes the subscriptions of one (mbox, type) in every state; returns how many.
    pub(crate) fn remove_all_states(&mut self, me: &AgentRef, mbox: u64, ty: TypeId) -> usize {
        let keys: Vec<Key> = self
            .index
            .keys()
            .into_iter()
            .filter(|k| k.0 == mbox && k.1 == ty)
            .collect();
        self.index_changed();
        for k in &keys {
            if let Some(Action::Handler(slot) | Action::SafeHandler(slot)) = self.index.remove(k) {
                self.release(slot);
            }
            self.unuse_mbox(me, mbox, ty);
        }
        keys.len()
    }

    pub(crate) fn remove_dead_letter(&mut self, me: &AgentRef, mbox: u64, ty: TypeId) -> bool {
        let removed = self
            .rare
            .as_mut()
            .and_then(|r| r.dead_letters.remove(&(mbox, ty)));
        match removed {
            Some(slot) => {
                self.release(slot);
                self.unuse_mbox(me, mbox, ty);
                true
            }
            None => false,
        }
    }

    pub(crate) fn set_filter(
        &mut self,
        me: &AgentRef,
        mbox: &Mbox,
        ty: MessageType,
        filter: DeliveryFilter,
    ) -> Result<(), SubscribeError> {
        if self.finished {
            return Err(self.closed_error());
        }
        mbox.raw()
            .set_delivery_filter(ty, filter, &Sink::from(me.clone()))?;
        self.rare_mut()
            .filters
            .insert((mbox.id().0, ty.type_id()), (mbox.clone(), ty));
        Ok(())
    }

    pub(crate) fn drop_filter(&mut self, me: &AgentRef, mbox: &Mbox, ty: MessageType) {
        let removed = self
            .rare
            .as_mut()
            .and_then(|r| r.filters.remove(&(mbox.id().0, ty.type_id())));
        if removed.is_some() {
            mbox.raw().drop_delivery_filter(ty, &Sink::from(me.clone()));
        }
    }

    /// Why a subscription is refused once the agent finished or was deactivated.
    fn closed_error(&self) -> SubscribeError {
        if self.deactivated {
            SubscribeError::AgentDeactivated
        } else {
            SubscribeError::AgentFinished
        }
    }

    /// Drops everything and refuses new subscriptions (`deactivate_agent`).
    pub(crate) fn deactivate(&mut self, me: &AgentRef) {
        self.drop_all(me);
        self.deactivated = true;
    }

    /// Drops every subscription and filter at the mboxes (end of the agent's life).
    pub(crate) fn drop_all(&mut self, me: &AgentRef) {
        self.finished = true;
        if let Some(rare) = self.rare.as_mut() {
            let used = std::mem::take(&mut rare.mboxes);
            for (&(_, ty), u) in used.iter() {
                u.mbox
                    .raw()
                    .unsubscribe(u.message_type(ty), &Sink::from(me.clone()));
            }
            for (mbox, ty) in std::mem::take(&mut rare.filters).into_values() {
                mbox.raw().drop_delivery_filter(ty, &Sink::from(me.clone()));
            }
            rare.dead_letters = SmallMap::default();
        }
        self.index = SmallMap::default();
        self.index_changed();
    }
}

/// Whether `mbox` is `me`'s own direct mbox (not a custom mbox that shares its id).
fn is_own_direct(me: &AgentRef, mbox: &Mbox) -> bool {
    matches!(&mbox.0, crate::mbox::Repr::Direct(a) if crate::agent::AgentArc::ptr_eq(a, &me.0))
}

/// The action a new subscription carries: a fresh handler or a fixed action.
pub(crate) enum NewAction<A: Agent> {
    Handler(EventFn<A>),
    Safe(SafeFn<A>),
    Action(Action),
}

#[cfg(test)]
#[path = "subscription_tests.rs"]
mod tests;
