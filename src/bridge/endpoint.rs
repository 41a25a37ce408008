//! An mbox exposed under an `ActorId`: the endpoint that turns events into messages.

use std::sync::{Arc, Weak};

use thiserror::Error;

use super::origin::FromActor;
use crate::actors::{
    ActorSystem, DeadLetterReason, Event, EventFlags, EventHandle, EventType, RegisterActorError,
    ServiceError, Undelivered, UndeliveredReason,
};
use crate::actors::{Delivery, SystemInner};
use crate::mbox::{
    DeliveryMode, Mbox, MboxId, MboxImpl, MboxKind, SendError, Sink, SubscribeError,
};
use crate::message::{Message, MessageType, RedirectionDepth};
use crate::request::{RemoteReply, ReplyError, Request};
use crate::{ActorId, Environment};

/// Turns one event type's handle into the message the exposed mbox gets; the handle back
/// when it does not carry the type (a serialized event that does not decode).
type Convert = fn(EventHandle, &Weak<SystemInner>) -> Result<Message, EventHandle>;

fn as_plain<E: Event + Sync>(
    mut h: EventHandle,
    _: &Weak<SystemInner>,
) -> Result<Message, EventHandle> {
    match h.take::<E>() {
        Some(e) => Ok(Message::new(e)),
        None => Err(h),
    }
}

fn as_mutable<E: Event>(mut h: EventHandle, _: &Weak<SystemInner>) -> Result<Message, EventHandle> {
    match h.take::<E>() {
        Some(e) => Ok(Message::new_mutable(e)),
        None => Err(h),
    }
}

fn from_actor<E: Event + Sync>(
    h: EventHandle,
    _: &Weak<SystemInner>,
) -> Result<Message, EventHandle> {
    FromActor::<E>::take(h).map(Message::new)
}

fn as_request<Req: Event + Sync, Rep: Event>(
    mut h: EventHandle,
    sys: &Weak<SystemInner>,
) -> Result<Message, EventHandle> {
    match h.take::<Req>() {
        Some(req) => Ok(Message::new(Request::<Req, Rep>::remote(
            req,
            Box::new(WireReply {
                sys: sys.clone(),
                to: h.sender(),
                from: h.recipient(),
                cookie: h.cookie(),
                request_type: Req::EVENT_TYPE,
                answered: false,
            }),
        ))),
        None => Err(h),
    }
}

/// The way back of a request from another node: the reply goes to the caller's id as an
/// event with the caller's cookie; dropped unanswered, an `Undelivered` goes instead, so
/// that the caller fails at once.
struct WireReply {
    sys: Weak<SystemInner>,
    to: ActorId,
    from: ActorId,
    cookie: u64,
    request_type: EventType,
    answered: bool,
}

impl<Rep: Event> RemoteReply<Rep> for WireReply {
    fn reply(mut self: Box<Self>, reply: Rep) -> Result<(), ReplyError> {
        self.answered = true;
        let sys = self.sys.upgrade().ok_or(ReplyError::RequesterGone)?;
        sys.send(EventHandle::new(self.to, self.from, reply).with_cookie(self.cookie));
        Ok(())
    }
}

impl Drop for WireReply {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        if let Some(sys) = self.sys.upgrade() {
            let nothing = Undelivered {
                source_type: self.request_type,
                reason: UndeliveredReason::Unknown,
                unsure: false,
            };
            sys.send(EventHandle::new(self.to, self.from, nothing).with_cookie(self.cookie));
        }
    }
}

/// Which events an mbox takes under an `ActorId`, and how they arrive: the builder of an
/// [`Exposed`] endpoint.
///
/// Each event type is named once, with the form it arrives in:
///
/// | method | the mbox gets | for |
/// |---|---|---|
/// | [`event::<E>`](Self::event) | `E` | any mbox |
/// | [`event_from_actor::<E>`](Self::event_from_actor) | [`FromActor<E>`] (sender, cookie, flags) | any mbox |
/// | [`event_mutable::<E>`](Self::event_mutable) | [`Mutable<E>`](crate::Mutable), by move | single-consumer mboxes |
/// | [`request::<Req, Rep>`](Self::request) | [`Request<Req, Rep>`](crate::request::Request), answered back over the wire | any mbox |
///
/// An event of a type not named is not delivered: it is a dead letter with reason
/// [`Unhandled`](DeadLetterReason::Unhandled), as an event an actor's state function gives
/// back. See the [module docs](super) for the rules.
#[derive(Debug)]
#[must_use = "an endpoint exists only once exposed"]
pub struct Endpoint {
    mbox: Mbox,
    converts: Vec<(EventType, &'static str, Convert, bool)>,
    pool: Option<String>,
}

impl Endpoint {
    /// An endpoint for `mbox` (any kind: direct, MPMC, named, custom), taking no event yet.
    pub fn new(mbox: &Mbox) -> Endpoint {
        Endpoint {
            mbox: mbox.clone(),
            converts: Vec::new(),
            pool: None,
        }
    }

    /// Events of type `E` arrive as `E` (immutable: every subscriber shares one).
    pub fn event<E: Event + Sync>(self) -> Self {
        self.with(
            E::EVENT_TYPE,
            std::any::type_name::<E>(),
            as_plain::<E>,
            false,
        )
    }

    /// Events of type `E` arrive as [`FromActor<E>`]: the event with its sender, cookie
    /// and flags, to answer the sender.
    pub fn event_from_actor<E: Event + Sync>(self) -> Self {
        self.with(
            E::EVENT_TYPE,
            std::any::type_name::<E>(),
            from_actor::<E>,
            false,
        )
    }

    /// Events of type `E` arrive as [`Mutable<E>`](crate::Mutable): the one receiver takes
    /// the value by move. Only a single-consumer mbox takes them
    /// ([`ExposeError::MutableToMultiConsumer`] otherwise).
    pub fn event_mutable<E: Event>(self) -> Self {
        self.with(
            E::EVENT_TYPE,
            std::any::type_name::<E>(),
            as_mutable::<E>,
            true,
        )
    }

    /// Events of type `Req` arrive as [`Request<Req, Rep>`](crate::request::Request), to
    /// answer with [`Request::reply`](crate::request::Request::reply) (or a reply handle,
    /// or a forward) as a local request: the answer goes back to the sender as a `Rep`
    /// event with its cookie. A request dropped unanswered sends the sender an
    /// `Undelivered` instead (reason `Unknown`), so that a `RemoteMbox` caller fails at
    /// once with [`RequestError::Dropped`](crate::request::RequestError::Dropped). `Rep` must cross back: give
    /// it a codec on both nodes.
    ///
    /// At most once: each request event arrives once (the interconnect never repeats one)
    /// and its answer is sent once. The caller may have stopped waiting by then (its
    /// deadline passed, or it got `Timeout` or `NodeDisconnected` while the request was on
    /// its way): the answer is then dropped on the caller's node, and the work was done
    /// all the same. A handler whose work must not be done twice when a caller retries
    /// after a timeout needs an id of the caller's own in the request.
    pub fn request<Req: Event + Sync, Rep: Event>(self) -> Self {
        self.with(
            Req::EVENT_TYPE,
            std::any::type_name::<Req>(),
            as_request::<Req, Rep>,
            false,
        )
    }

    fn with(mut self, ty: EventType, name: &'static str, f: Convert, mutable: bool) -> Self {
        self.converts.push((ty, name, f, mutable));
        self
    }

    /// The pool whose id space the endpoint's id is taken from (default: the system's first
    /// pool). The endpoint runs no thread of the pool: events reach the mbox on the sender's
    /// thread and are handled where its subscribers are bound.
    pub fn on_pool(mut self, name: &str) -> Self {
        self.pool = Some(name.to_owned());
        self
    }

    /// Exposes the mbox under a fresh id of `system`.
    ///
    /// # Errors
    ///
    /// [`ExposeError`]: no event named, a type named twice, a mutable event for a
    /// multi-consumer mbox, an unknown pool, or a system that is stopping.
    pub fn expose(self, system: &ActorSystem) -> Result<Exposed, ExposeError> {
        self.expose_inner(system, None)
    }

    /// Exposes the mbox under a fresh id, and makes the local service `service` resolve to
    /// it (replacing what served it: see
    /// [`register_local_service`](ActorSystem::register_local_service)). A service id is
    /// compared on all its bytes, node included (YDB's rule): give it this node's id
    /// (`ActorId::service(node, name)`) for senders on other nodes to reach it by that id;
    /// with node 0 it is reached from this node only.
    ///
    /// # Errors
    ///
    /// As [`expose`](Self::expose), and [`ExposeError::Service`] when `service` is not a
    /// service id.
    pub fn expose_as(self, system: &ActorSystem, service: ActorId) -> Result<Exposed, ExposeError> {
        self.expose_inner(system, Some(service))
    }

    fn expose_inner(
        mut self,
        system: &ActorSystem,
        service: Option<ActorId>,
    ) -> Result<Exposed, ExposeError> {
        if self.converts.is_empty() {
            return Err(ExposeError::NoEvents);
        }
        self.converts.sort_by_key(|c| c.0);
        if let Some(w) = self.converts.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(ExposeError::DuplicateEventType {
                event_type: w[0].0,
                first: w[0].1,
                second: w[1].1,
            });
        }
        if self.mbox.kind() == MboxKind::MultiConsumer {
            if let Some(c) = self.converts.iter().find(|c| c.3) {
                return Err(ExposeError::MutableToMultiConsumer {
                    type_name: c.1,
                    mbox: self.mbox.name(),
                });
            }
        }
        if let Some(service) = service {
            if !service.is_service() {
                return Err(ExposeError::Service(ServiceError::NotAService(service)));
            }
        }
        let sys = &system.0;
        let pool = match &self.pool {
            Some(name) => sys.pool_id(name)?,
            None => 0,
        };
        let target = Arc::new(EndpointMbox {
            id: MboxId::next(),
            sys: Arc::downgrade(sys),
            mbox: self.mbox,
            converts: self.converts.iter().map(|c| (c.0, c.2)).collect(),
        });
        let id = sys.register_endpoint(pool, Mbox::custom(target))?;
        let mut exposed = Exposed {
            id,
            service: None,
            sys: Arc::downgrade(sys),
            detached: false,
        };
        if let Some(service) = service {
            // On failure the endpoint's id goes with `exposed`.
            system.register_local_service(service, id)?;
            exposed.service = Some(service);
        }
        Ok(exposed)
    }
}

/// Why an [`Endpoint`] could not be exposed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ExposeError {
    /// The endpoint names no event type: it would take nothing.
    #[error("the endpoint names no event type")]
    NoEvents,
    /// Two Rust types (or one twice) were named for one YDB event type.
    #[error("event type {event_type:#x} is named twice ({first}, {second})")]
    DuplicateEventType {
        /// The YDB event type.
        event_type: EventType,
        /// One Rust type named for it.
        first: &'static str,
        /// The other.
        second: &'static str,
    },
    /// A mutable event for a multi-consumer mbox.
    #[error("mutable {type_name} cannot go to the multi-consumer mbox {mbox}")]
    MutableToMultiConsumer {
        /// The event's Rust type.
        type_name: &'static str,
        /// The mbox.
        mbox: String,
    },
    /// No id could be registered (unknown pool, a stopping system, a full table).
    #[error(transparent)]
    Register(#[from] RegisterActorError),
    /// The service id is not one.
    #[error(transparent)]
    Service(#[from] ServiceError),
}

/// An mbox reachable by an `ActorId`: events sent to [`id`](Self::id) (or to its service)
/// from an actor, an agent or another node arrive in the mbox as messages. Dropping it
/// takes the id away (later events to it are not delivered, reason `ActorUnknown`; a sender
/// that asked for `TRACK_DELIVERY` gets `Undelivered` with its cookie), unless it was
/// [`detach`](Self::detach)ed.
///
/// It is also the agent's own address for sending: [`send`](Self::send) and
/// [`send_with`](Self::send_with) send from [`id`](Self::id), so that answers and
/// `Undelivered` notices come back to the mbox.
#[must_use = "dropping an Exposed endpoint takes its id away: keep it (an agent can keep its own as a field), detach() it, or give it to the environment with `env.keep(exposed)`"]
#[derive(Debug)]
pub struct Exposed {
    id: ActorId,
    service: Option<ActorId>,
    sys: Weak<SystemInner>,
    detached: bool,
}

impl Exposed {
    /// The endpoint's own id (an ordinary actor id of the system's node).
    pub fn id(&self) -> ActorId {
        self.id
    }

    /// The service id that resolves to it, if it was exposed with
    /// [`expose_as`](Endpoint::expose_as).
    pub fn service(&self) -> Option<ActorId> {
        self.service
    }

    /// Keeps the endpoint for the system's whole life and gives its id.
    pub fn detach(mut self) -> ActorId {
        self.detached = true;
        self.id
    }

    /// Sends `event` to `recipient` from this endpoint (sender = [`id`](Self::id)), no
    /// flags, cookie 0.
    ///
    /// # Errors
    ///
    /// See [`send_handle`](Self::send_handle).
    pub fn send<E: Event>(&self, recipient: ActorId, event: E) -> Result<(), BridgeSendError> {
        self.send_handle(EventHandle::new(recipient, self.id, event))
    }

    /// Sends `event` to `recipient` from this endpoint with `flags` and `cookie`
    /// (`TRACK_DELIVERY` brings an `Undelivered` back to the mbox, if the endpoint takes
    /// it).
    ///
    /// # Errors
    ///
    /// See [`send_handle`](Self::send_handle).
    pub fn send_with<E: Event>(
        &self,
        recipient: ActorId,
        event: E,
        flags: EventFlags,
        cookie: u64,
    ) -> Result<(), BridgeSendError> {
        self.send_handle(
            EventHandle::new(recipient, self.id, event)
                .with_flags(flags)
                .with_cookie(cookie),
        )
    }

    /// Sends a handle as it is (its sender included).
    ///
    /// # Errors
    ///
    /// [`BridgeSendError::NotSerializable`] when the recipient is on another node and the
    /// event's type has no codec registered with the interconnect (it could only become a
    /// dead letter); [`BridgeSendError::SystemGone`] when the system is gone. Anything
    /// else follows YDB's non-delivery rules, as for an actor's send.
    pub fn send_handle(&self, h: EventHandle) -> Result<(), BridgeSendError> {
        let sys = self.sys.upgrade().ok_or(BridgeSendError::SystemGone)?;
        let node = h.recipient().node_id();
        if node != 0 && node != sys.node_id {
            if let Some(router) = sys.remote.get() {
                if !router.can_encode(h.event_type()) {
                    return Err(BridgeSendError::NotSerializable {
                        event_type: h.event_type(),
                        node,
                    });
                }
            }
        }
        sys.send(h);
        Ok(())
    }
}

impl Drop for Exposed {
    fn drop(&mut self) {
        if self.detached {
            return;
        }
        if let Some(sys) = self.sys.upgrade() {
            if let Some(service) = self.service {
                sys.services.clear_if(service, self.id);
            }
            sys.forget(self.id);
        }
    }
}

/// Why [`Exposed::send`] refused an event.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BridgeSendError {
    /// The recipient is on another node and the event's type has no codec registered
    /// with the interconnect ([`InterconnectSetup::event`]).
    ///
    #[cfg_attr(
        feature = "interconnect",
        doc = "[`InterconnectSetup::event`]: crate::interconnect::InterconnectSetup::event"
    )]
    #[cfg_attr(
        not(feature = "interconnect"),
        doc = "[`InterconnectSetup::event`]: crate"
    )]
    #[error("event type {event_type:#x} has no codec: it cannot go to node {node}")]
    NotSerializable {
        /// The event's YDB type.
        event_type: EventType,
        /// The recipient's node.
        node: u32,
    },
    /// The actor system is gone.
    #[error("the actor system is gone")]
    SystemGone,
}

/// The custom mbox in the actor table's slot: takes each `Delivery`, converts its event by
/// type and delivers the message to the exposed mbox, on the sender's thread.
struct EndpointMbox {
    id: MboxId,
    sys: Weak<SystemInner>,
    mbox: Mbox,
    /// Sorted by event type.
    converts: Vec<(EventType, Convert)>,
}

impl EndpointMbox {
    fn convert(&self, ty: EventType) -> Option<Convert> {
        self.converts
            .binary_search_by_key(&ty, |c| c.0)
            .ok()
            .map(|i| self.converts[i].1)
    }
}

impl MboxImpl for EndpointMbox {
    fn id(&self) -> MboxId {
        self.id
    }

    fn kind(&self) -> MboxKind {
        MboxKind::SingleConsumer
    }

    fn subscribe(&self, _: MessageType, _: &Sink) -> Result<(), SubscribeError> {
        Err(SubscribeError::Refused {
            mbox: self.name(),
            reason: "an endpoint delivers to the mbox it exposes: subscribe there".into(),
        })
    }

    fn deliver(
        &self,
        msg: Message,
        _depth: RedirectionDepth,
        mode: DeliveryMode,
    ) -> Result<(), SendError> {
        let Some((h, counted)) = Delivery::take_for_endpoint(&msg) else {
            return Ok(());
        };
        let Some(sys) = self.sys.upgrade() else {
            return Ok(());
        };
        if counted {
            sys.dequeued(h.recipient_rewrite());
        }
        if self.mbox.is_closed_agent() {
            // The agent behind the id is going or gone: as an actor that passed away.
            sys.not_delivered(h, DeadLetterReason::PassedAway);
            return Ok(());
        }
        let Some(convert) = self.convert(h.event_type()) else {
            sys.dead_letter(&h, DeadLetterReason::Unhandled);
            return Ok(());
        };
        // What a refusal needs once the handle is consumed.
        let (event_type, recipient, sender, cookie, flags) = (
            h.event_type(),
            h.recipient(),
            h.sender(),
            h.cookie(),
            h.flags(),
        );
        match convert(h, &self.sys) {
            Ok(m) => {
                // The exposed mbox's own rules apply (no subscriber, filters, limits: all
                // counted by the core). Never blocking: the sender may be the
                // interconnect's reader, which serves a whole session.
                let _ = mode;
                if let Err(e) = self.mbox.deliver_with(m, 0, DeliveryMode::Nonblocking) {
                    // Refused (a full or closed chain, a custom mbox's refusal): YDB's
                    // non-delivery rules, as for an actor that cannot take it.
                    tracing::debug!(error = %e, "bridge: an endpoint's mbox refused an event");
                    let stub = EventHandle::serialized(event_type, recipient, sender, Vec::new())
                        .with_cookie(cookie)
                        .with_flags(flags);
                    sys.not_delivered(stub, DeadLetterReason::Unhandled);
                }
            }
            // A serialized event that did not decode as the named type.
            Err(h) => sys.dead_letter(&h, DeadLetterReason::Unhandled),
        }
        Ok(())
    }

    fn name(&self) -> String {
        format!("endpoint({})", self.mbox.name())
    }

    fn environment(&self) -> Option<Environment> {
        self.mbox.environment()
    }
}
