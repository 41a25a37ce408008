//! `Mbox` handles for mboxes on other nodes: sends become events to an endpoint's id.

use std::any::TypeId;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use thiserror::Error;

use crate::actors::{
    ActorSystem, Body, Event, EventFlags, EventHandle, EventType, SystemInner, Undelivered,
    UndeliveredReason, EV_NODE_CONNECTED, EV_NODE_DISCONNECTED,
};
use crate::actors::{DeadLetterReason, Delivery};
use crate::mbox::{
    DeliveryFilter, DeliveryMode, Mbox, MboxId, MboxImpl, MboxKind, SendError, Sink, SubscribeError,
};
use crate::message::{Message, MessageType, RedirectionDepth};
use crate::request::{ReplyHandle, Request, RequestError};
use crate::{ActorId, Environment};

/// Sends one message type as an event.
type Send_ = fn(&Target, Message) -> Result<(), SendError>;

/// A builder of an [`Mbox`] whose sends go, as YDB events, to an id: an
/// [`Endpoint`](super::Endpoint) on another node (or this one), or any actor. The agent's
/// code does not change between a local and a remote mbox: it calls [`send`](crate::send),
/// [`send_mutable`](crate::send_mutable) or
/// [`request_reply`](crate::request::request_reply) on the handle.
///
/// # Rules
///
/// 1. **Types.** Each message type is named with the form it goes in:
///    [`event::<E>`](Self::event) (an immutable `E`), [`event_mutable::<E>`](Self::event_mutable)
///    (a [`Mutable<E>`](crate::Mutable), moved to the one receiver) or
///    [`request::<Req, Rep>`](Self::request) (a [`Request<Req, Rep>`](crate::request::Request)).
///    Every one needs a codec registered with the interconnect on both nodes; a type
///    without one is refused when the handle is built ([`RemoteMboxError::NoCodec`]), and a
///    type not named is refused at the send with [`SendError::NotSerializable`]: nothing
///    is dropped in silence.
/// 2. **Where the work is done.** A send encodes the message on the sender's thread and
///    queues it in the interconnect session to the target's node; it never blocks on the
///    network. Non-delivery follows YDB's rules for the flags given
///    ([`flags`](Self::flags)): with `TRACK_DELIVERY`, an `Undelivered` goes to the sender
///    id ([`from`](Self::from)).
/// 3. **Requests.** A request gets an id of its own on this node for the answer, and is
///    sent with `TRACK_DELIVERY` and `SUBSCRIBE_ON_SESSION`: the caller gets the answer, or
///    at once (not at the timeout) [`RequestError::Undelivered`] when nothing on the other
///    node has the target id, [`RequestError::Dropped`] when it dropped the request
///    unanswered, or [`RequestError::NodeDisconnected`] when the session to the node ends
///    first. The id (and its subscription to the session) lives until one of those comes
///    or the caller's deadline passes, whichever is first; a target on this node works the
///    same way (no session then, so nothing to subscribe to).
/// 4. **At most once; nothing after the deadline.** A request is sent once and never
///    again (not after a cut, not to a restarted node), so it is handled at most once.
///    [`RequestError::Timeout`] and [`RequestError::NodeDisconnected`] do not say that it
///    was not handled: it may have been, or may still be (it may be on its way, or queued
///    on the other node). Whatever comes after the caller's deadline (an answer, a
///    `Dropped` or `Undelivered` notice, the session's end) never reaches the caller: an
///    answer then is a dead letter on this node, and the caller's result is `Timeout`.
///    A request that must not be repeated on a timeout needs an id of the caller's own,
///    checked by the handler.
/// 5. **Order.** Sends from one thread through one handle keep their order (one channel:
///    the flags' channel).
/// 6. Nobody subscribes to a remote mbox here: subscribe on its node.
#[derive(Debug)]
#[must_use = "build() makes the mbox"]
pub struct RemoteMbox {
    system: ActorSystem,
    target: ActorId,
    sender: ActorId,
    flags: EventFlags,
    sends: Vec<(TypeId, &'static str, Send_, Vec<EventType>)>,
}

impl RemoteMbox {
    /// A remote mbox for `target` (an endpoint's id, or a service id with the node set), in
    /// `system`, sending nothing yet.
    pub fn new(system: &ActorSystem, target: ActorId) -> RemoteMbox {
        RemoteMbox {
            system: system.clone(),
            target,
            sender: ActorId::default(),
            flags: EventFlags::empty(),
            sends: Vec::new(),
        }
    }

    /// The sender id the events carry (default: the empty id). Give an
    /// [`Exposed`](super::Exposed) endpoint's id to get answers and `Undelivered` there.
    pub fn from(mut self, sender: ActorId) -> Self {
        self.sender = sender;
        self
    }

    /// The flags of every event (default: none; a channel with
    /// [`EventFlags::with_channel`]). Requests add `TRACK_DELIVERY` and
    /// `SUBSCRIBE_ON_SESSION` to them.
    pub fn flags(mut self, flags: EventFlags) -> Self {
        self.flags = flags;
        self
    }

    /// `E` messages go as `E` events.
    pub fn event<E: Event + Sync>(mut self) -> Self {
        self.sends.push((
            TypeId::of::<E>(),
            std::any::type_name::<E>(),
            send_shared::<E>,
            vec![E::EVENT_TYPE],
        ));
        self
    }

    /// [`Mutable<E>`](crate::Mutable) messages go as `E` events, by move (the target should
    /// be a single-consumer mbox, whose endpoint takes them with
    /// [`event_mutable`](super::Endpoint::event_mutable)).
    pub fn event_mutable<E: Event>(mut self) -> Self {
        self.sends.push((
            MessageType::of_mutable::<E>().type_id(),
            std::any::type_name::<E>(),
            send_moved::<E>,
            vec![E::EVENT_TYPE],
        ));
        self
    }

    /// [`Request<Req, Rep>`](crate::request::Request) messages (from
    /// [`request_reply`](crate::request::request_reply)) go as `Req` events; the answer
    /// comes back as a `Rep` event (see the rules).
    pub fn request<Req: Event + Sync, Rep: Event>(mut self) -> Self {
        self.sends.push((
            TypeId::of::<Request<Req, Rep>>(),
            std::any::type_name::<Req>(),
            send_request::<Req, Rep>,
            vec![Req::EVENT_TYPE, Rep::EVENT_TYPE],
        ));
        self
    }

    /// Makes the mbox.
    ///
    /// # Errors
    ///
    /// [`RemoteMboxError::NoCodec`] when a named type (or a request's answer type) has no
    /// codec registered with the interconnect (or the system has no interconnect);
    /// [`RemoteMboxError::EmptyTarget`] for the empty id.
    pub fn build(mut self) -> Result<Mbox, RemoteMboxError> {
        if self.target == ActorId::default() {
            return Err(RemoteMboxError::EmptyTarget);
        }
        let sys = &self.system.0;
        for (_, name, _, types) in &self.sends {
            for &event_type in types {
                if !sys.remote.get().is_some_and(|r| r.can_encode(event_type)) {
                    return Err(RemoteMboxError::NoCodec {
                        type_name: name,
                        event_type,
                    });
                }
            }
        }
        self.sends.sort_by_key(|s| s.0);
        self.sends.dedup_by_key(|s| s.0);
        Ok(Mbox::custom(Arc::new(Target {
            id: MboxId::next(),
            sys: Arc::downgrade(sys),
            env: self.system.environment().downgrade(),
            target: self.target,
            sender: self.sender,
            flags: self.flags,
            sends: self.sends.iter().map(|s| (s.0, s.2)).collect(),
        })))
    }
}

/// Why a [`RemoteMbox`] could not be built.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RemoteMboxError {
    /// A type cannot cross: no codec for its event type (or no interconnect).
    #[error(
        "{type_name} (event type {event_type:#x}) has no codec registered with the interconnect"
    )]
    NoCodec {
        /// The Rust type.
        type_name: &'static str,
        /// Its YDB event type.
        event_type: EventType,
    },
    /// The target is the empty id.
    #[error("a remote mbox needs a target id")]
    EmptyTarget,
}

/// The custom mbox behind a remote mbox handle.
pub(crate) struct Target {
    id: MboxId,
    sys: Weak<SystemInner>,
    env: crate::WeakEnv,
    target: ActorId,
    sender: ActorId,
    flags: EventFlags,
    /// Sorted by message type.
    sends: Vec<(TypeId, Send_)>,
}

impl Target {
    fn refused(&self, msg: &Message, reason: &'static str) -> SendError {
        SendError::NotSerializable {
            type_name: msg.message_type().name(),
            mbox: self.name(),
            reason,
        }
    }

    fn system(&self) -> Result<Arc<SystemInner>, SendError> {
        self.sys.upgrade().ok_or_else(|| SendError::Refused {
            type_name: "",
            mbox: self.name(),
            reason: "the actor system is gone".to_owned(),
        })
    }

    /// Encodes `event` on this thread: the handle to send.
    fn encoded<E: Event>(
        &self,
        sys: &SystemInner,
        event: &E,
        sender: ActorId,
        msg: &Message,
    ) -> Result<EventHandle, SendError> {
        let (bytes, decode) = sys
            .remote
            .get()
            .and_then(|r| r.encode(E::EVENT_TYPE, event))
            .ok_or_else(|| self.refused(msg, "its codec failed, or there is no interconnect"))?;
        Ok(EventHandle::serialized_with(
            E::EVENT_TYPE,
            self.target,
            sender,
            Body::from_vec(bytes),
            Some(decode),
        ))
    }
}

fn send_shared<E: Event + Sync>(t: &Target, msg: Message) -> Result<(), SendError> {
    let sys = t.system()?;
    let Some(event) = msg.downcast_ref::<E>() else {
        return Err(t.refused(&msg, "its envelope hides it"));
    };
    let h = t.encoded(&sys, event, t.sender, &msg)?.with_flags(t.flags);
    sys.send(h);
    Ok(())
}

fn send_moved<E: Event>(t: &Target, msg: Message) -> Result<(), SendError> {
    let sys = t.system()?;
    let Some(event) = msg.take_mutable::<E>() else {
        return Err(t.refused(&msg, "it was taken already"));
    };
    // The interconnect encodes a local value on this thread.
    sys.send(EventHandle::new(t.target, t.sender, event).with_flags(t.flags));
    Ok(())
}

fn send_request<Req: Event + Sync, Rep: Event>(t: &Target, msg: Message) -> Result<(), SendError> {
    let sys = t.system()?;
    let Some(request) = msg.downcast_ref::<Request<Req, Rep>>() else {
        return Err(t.refused(&msg, "its envelope hides it"));
    };
    let Ok(answer) = request.take_reply_handle() else {
        return Ok(()); // answered (or forwarded) already: nothing to ask
    };
    let node = t.target.node_id();
    let back = Arc::new(ReplyEndpoint::<Rep> {
        id: MboxId::next(),
        sys: t.sys.clone(),
        answer: Mutex::new(Some(answer)),
        me: Mutex::new(None),
        node,
        // A target on this node: no session, nothing to unsubscribe from.
        remote: node != 0 && node != sys.node_id,
        deadline: request.deadline(),
        expiry: Mutex::new(None),
    });
    let reply_id = match sys.register_endpoint(0, Mbox::custom(back.clone())) {
        Ok(id) => id,
        Err(_) => {
            let answer = back.answer.lock().take();
            if let Some(a) = answer {
                a.fail(RequestError::Dropped);
            }
            return Ok(());
        }
    };
    *back.me.lock() = Some(reply_id);
    let flags = t.flags | EventFlags::TRACK_DELIVERY | EventFlags::SUBSCRIBE_ON_SESSION;
    let h = match t.encoded(&sys, request.get(), reply_id, &msg) {
        Ok(h) => h.with_flags(flags).with_cookie(reply_id.local_id()),
        Err(e) => {
            sys.forget(reply_id);
            return Err(e);
        }
    };
    // The request (and its subscription to the session) first, so that the deadline's
    // unsubscription cannot come before it, however short the timeout.
    sys.send(h);
    if let Some(deadline) = back.deadline {
        // At the caller's deadline the id goes, whatever the other side does. The timer
        // holds a weak way to the endpoint (no cycle through the handle kept in it); the
        // answer cancels it.
        let to: Weak<dyn Expire> = Arc::downgrade(&back) as Weak<dyn Expire>;
        let relay = Mbox::custom(Arc::new(ExpiryRelay {
            id: MboxId::next(),
            to,
            env: t.env.clone(),
        }));
        let wait = deadline.saturating_duration_since(std::time::Instant::now());
        if let Ok(timer) = crate::send_delayed(&relay, wait, Expired) {
            *back.expiry.lock() = Some(timer);
        }
    }
    Ok(())
}

impl MboxImpl for Target {
    fn id(&self) -> MboxId {
        self.id
    }

    fn kind(&self) -> MboxKind {
        MboxKind::SingleConsumer
    }

    fn subscribe(&self, _: MessageType, _: &Sink) -> Result<(), SubscribeError> {
        Err(SubscribeError::Refused {
            mbox: self.name(),
            reason: "a remote mbox is subscribed to on its own node".into(),
        })
    }

    fn unsubscribe(&self, _: MessageType, _: &Sink) {}

    fn deliver(
        &self,
        msg: Message,
        _depth: RedirectionDepth,
        _mode: DeliveryMode,
    ) -> Result<(), SendError> {
        let ty = msg.type_id();
        match self.sends.binary_search_by_key(&ty, |s| s.0) {
            Ok(i) => (self.sends[i].1)(self, msg),
            Err(_) => Err(self.refused(&msg, "its type is not named for this remote mbox")),
        }
    }

    fn set_delivery_filter(
        &self,
        _: MessageType,
        _: DeliveryFilter,
        _: &Sink,
    ) -> Result<(), SubscribeError> {
        Err(SubscribeError::FiltersUnsupported { mbox: self.name() })
    }

    fn drop_delivery_filter(&self, _: MessageType, _: &Sink) {}

    fn name(&self) -> String {
        format!("remote:{}", self.target)
    }

    fn environment(&self) -> Option<Environment> {
        self.env.upgrade()
    }
}

/// The timer's message to an [`ExpiryRelay`]: the caller's deadline passed.
struct Expired;

/// What the deadline's timer tells.
trait Expire: Send + Sync {
    fn expire(&self);
}

/// The deadline timer's target: a weak way to a [`ReplyEndpoint`]. Registered nowhere,
/// so only the timer reaches it (nothing from the wire can).
struct ExpiryRelay {
    id: MboxId,
    to: Weak<dyn Expire>,
    env: crate::WeakEnv,
}

impl MboxImpl for ExpiryRelay {
    fn id(&self) -> MboxId {
        self.id
    }

    fn kind(&self) -> MboxKind {
        MboxKind::SingleConsumer
    }

    fn subscribe(&self, _: MessageType, _: &Sink) -> Result<(), SubscribeError> {
        Err(SubscribeError::Refused {
            mbox: self.name(),
            reason: "a request's deadline".into(),
        })
    }

    fn unsubscribe(&self, _: MessageType, _: &Sink) {}

    fn deliver(&self, msg: Message, _: RedirectionDepth, _: DeliveryMode) -> Result<(), SendError> {
        // A timer's message travels in its envelope (revealed unless cancelled).
        if msg.handler_payload::<Expired>().is_some() {
            if let Some(to) = self.to.upgrade() {
                to.expire();
            }
        }
        Ok(())
    }

    fn set_delivery_filter(
        &self,
        _: MessageType,
        _: DeliveryFilter,
        _: &Sink,
    ) -> Result<(), SubscribeError> {
        Err(SubscribeError::FiltersUnsupported { mbox: self.name() })
    }

    fn drop_delivery_filter(&self, _: MessageType, _: &Sink) {}

    fn name(&self) -> String {
        "remote-reply-deadline".to_owned()
    }

    fn environment(&self) -> Option<Environment> {
        self.env.upgrade()
    }
}

/// The id a remote request's answer comes to: one event, or the caller's deadline, then
/// it is gone.
struct ReplyEndpoint<Rep> {
    id: MboxId,
    sys: Weak<SystemInner>,
    answer: Mutex<Option<ReplyHandle<Rep>>>,
    me: Mutex<Option<ActorId>>,
    /// The node asked.
    node: u32,
    /// Whether that node is another one (the request subscribed the id to its session).
    remote: bool,
    /// When the caller stops waiting.
    deadline: Option<std::time::Instant>,
    /// The timer of the deadline, cancelled (dropped) by the answer.
    expiry: Mutex<Option<crate::TimerHandle>>,
}

impl<Rep: Event> Expire for ReplyEndpoint<Rep> {
    /// The caller's deadline: it returns `Timeout` (as its own wait does) and the id goes.
    fn expire(&self) {
        if let Some(answer) = self.finish(self.sys.upgrade().as_ref(), false) {
            answer.fail(RequestError::Timeout);
        }
    }
}

impl<Rep> ReplyEndpoint<Rep> {
    /// The answer is in (or the deadline passed): the id stops resolving, its session
    /// subscription ends, the deadline's timer is cancelled. The right to answer the
    /// caller, if still here, is returned.
    fn finish(
        &self,
        sys: Option<&Arc<SystemInner>>,
        session_ended: bool,
    ) -> Option<ReplyHandle<Rep>> {
        let answer = self.answer.lock().take();
        // Taken into locals first: a guard in the `if let` would live across the sends.
        let me = self.me.lock().take();
        let timer = self.expiry.lock().take();
        drop(timer);
        if let (Some(sys), Some(me)) = (sys, me) {
            sys.forget(me);
            if self.remote && !session_ended {
                // The request subscribed this id to the session: end that, or the
                // session's subscriber list grows by one per request.
                sys.send(EventHandle::new(
                    ActorId::interconnect_proxy(self.node),
                    me,
                    crate::interconnect::Unsubscribe,
                ));
            }
        }
        answer
    }

    /// Whether the caller's deadline has passed: nothing reaches it any more.
    fn too_late(&self) -> bool {
        self.deadline
            .is_some_and(|d| std::time::Instant::now() >= d)
    }
}

impl<Rep: Event> MboxImpl for ReplyEndpoint<Rep> {
    fn id(&self) -> MboxId {
        self.id
    }

    fn kind(&self) -> MboxKind {
        MboxKind::SingleConsumer
    }

    fn subscribe(&self, _: MessageType, _: &Sink) -> Result<(), SubscribeError> {
        Err(SubscribeError::Refused {
            mbox: self.name(),
            reason: "a request's answer id".into(),
        })
    }

    fn unsubscribe(&self, _: MessageType, _: &Sink) {}

    fn deliver(&self, msg: Message, _: RedirectionDepth, _: DeliveryMode) -> Result<(), SendError> {
        let Some((mut h, counted)) = Delivery::take_for_endpoint(&msg) else {
            return Ok(());
        };
        let sys = self.sys.upgrade();
        if counted {
            if let Some(sys) = &sys {
                sys.dequeued(h.recipient_rewrite());
            }
        }
        if h.event_type() == EV_NODE_CONNECTED {
            return Ok(()); // the session subscription's first notice: keep waiting
        }
        let session_ended = h.event_type() == EV_NODE_DISCONNECTED;
        let Some(answer) = self.finish(sys.as_ref(), session_ended) else {
            if let Some(sys) = &sys {
                sys.dead_letter(&h, DeadLetterReason::PassedAway);
            }
            return Ok(());
        };
        if self.too_late() {
            // The answer (or the session's end) came after the caller's deadline (the
            // timer has not fired yet): the caller never hears of it.
            answer.fail(RequestError::Timeout);
            if let Some(sys) = &sys {
                sys.dead_letter(&h, DeadLetterReason::PassedAway);
            }
            return Ok(());
        }
        if let Some(rep) = h.take::<Rep>() {
            let _ = answer.reply(rep);
        } else if let Some(u) = h.get::<Undelivered>() {
            answer.fail(match u.reason {
                UndeliveredReason::ActorUnknown => RequestError::Undelivered,
                UndeliveredReason::Disconnected => {
                    RequestError::NodeDisconnected { node: self.node }
                }
                // The endpoint's answer to a request dropped unanswered.
                _ => RequestError::Dropped,
            });
        } else if h.event_type() == EV_NODE_DISCONNECTED {
            answer.fail(RequestError::NodeDisconnected { node: self.node });
        } else {
            answer.fail(RequestError::Dropped);
        }
        Ok(())
    }

    fn set_delivery_filter(
        &self,
        _: MessageType,
        _: DeliveryFilter,
        _: &Sink,
    ) -> Result<(), SubscribeError> {
        Err(SubscribeError::FiltersUnsupported { mbox: self.name() })
    }

    fn drop_delivery_filter(&self, _: MessageType, _: &Sink) {}

    fn name(&self) -> String {
        "remote-reply".to_owned()
    }

    fn environment(&self) -> Option<Environment> {
        None
    }
}
