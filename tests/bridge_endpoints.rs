//! The bridge: mboxes reachable by `ActorId`s (`agentbox::bridge`). Events sent to an
//! endpoint's id arrive in its mbox as messages, under the core's rules (subscribers,
//! filters); the receiver sees sender and cookie; YDB's non-delivery rules hold for a gone
//! endpoint; agents send to actors (on this node or another) from their endpoint's id; a
//! type without a codec is refused at the send.

mod interconnect_support;

use std::sync::mpsc::{self, Sender};
use std::sync::Arc;

use agentbox::actors::*;
use agentbox::bridge::{BridgeSendError, Endpoint, ExposeError, FromActor};
use agentbox::prelude::*;
use agentbox::{ActorId, MboxKind};
use interconnect_support::{
    cluster, echo, next, recorder, wait_until, Got, NoCodec, Ping, Pong, What, PATIENCE,
};
use parking_lot::Mutex;

/// Within PATIENCE, or the test fails instead of hanging.
fn bounded<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(PATIENCE)
        .expect("the test did not finish in time")
}

/// Reports every `FromActor<Ping>` it gets (with its tag) to `tx`.
struct PingSink {
    from: Mbox,
    tag: &'static str,
    filter: Option<fn(&FromActor<Ping>) -> bool>,
    tx: Sender<(&'static str, u64, ActorId, u64)>,
}

impl Agent for PingSink {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe(&self.from)
            .event(|a: &mut Self, _, p: &FromActor<Ping>| {
                let _ = a.tx.send((a.tag, p.0, p.sender(), p.cookie()));
            })?;
        if let Some(f) = self.filter {
            ctx.set_delivery_filter(&self.from, f)?;
        }
        Ok(())
    }
}

#[test]
fn an_actor_reaches_every_subscriber_of_an_mpmc_mbox_through_its_id_with_sender_and_cookie() {
    bounded(|| {
        Environment::launch(|env| {
            let system = ActorSystem::start(env, SystemSetup::new(1)).unwrap();
            let jobs = env.create_mbox();
            let (tx, rx) = mpsc::channel();
            env.introduce_coop(|coop| {
                for (tag, filter) in [
                    ("all", None),
                    (
                        "even",
                        Some((|p: &FromActor<Ping>| p.0.is_multiple_of(2)) as fn(&_) -> bool),
                    ),
                ] {
                    coop.add_agent(PingSink {
                        from: jobs.clone(),
                        tag,
                        filter,
                        tx: tx.clone(),
                    });
                }
            })
            .unwrap();
            let exposed = Endpoint::new(&jobs)
                .event_from_actor::<Ping>()
                .expose(&system)
                .unwrap();
            let to = exposed.id();
            let actor = system
                .register(Scripted::boot_only(move |ctx| {
                    for n in 1..=4 {
                        ctx.send_with(to, Ping(n), EventFlags::empty(), 100 + n);
                    }
                }))
                .unwrap();
            let mut got: Vec<_> = (0..6).map(|_| next(&rx, "a ping")).collect();
            got.sort();
            let expect = |tag, n: u64| (tag, n, actor, 100 + n);
            assert_eq!(
                got,
                [
                    expect("all", 1),
                    expect("all", 2),
                    expect("all", 3),
                    expect("all", 4),
                    expect("even", 2),
                    expect("even", 4),
                ]
            );
            system.send(actor, Poison);
            env.stop();
        })
        .unwrap();
    });
}

/// An actor made of a bootstrap closure that then ignores what it gets (Poison ends it).
struct Scripted;

impl Scripted {
    fn boot_only(
        f: impl FnOnce(&mut ActorContext<interconnect_support::Scripted>) + Send + 'static,
    ) -> interconnect_support::Scripted {
        interconnect_support::Scripted::new(|_, ev| {
            if ev.event_type() == EV_POISON {
                return ev.unhandled();
            }
            Handled::Yes
        })
        .boot(f)
    }
}

#[test]
fn a_dropped_endpoint_gives_undelivered_with_the_cookie_and_a_finished_agent_too() {
    bounded(|| {
        Environment::launch(|env| {
            let system = ActorSystem::start(env, SystemSetup::new(1)).unwrap();
            let (tx, rx) = mpsc::channel();
            let watcher = system.register(recorder(tx)).unwrap();
            // 1. An endpoint that was dropped.
            let mbox = env.create_mbox();
            let gone = Endpoint::new(&mbox)
                .event::<Ping>()
                .expose(&system)
                .unwrap();
            let gone_id = gone.id();
            drop(gone);
            system.send_handle(
                EventHandle::new(gone_id, watcher, Ping(1))
                    .with_flags(EventFlags::TRACK_DELIVERY)
                    .with_cookie(11),
            );
            let got = next(&rx, "Undelivered for the dropped endpoint");
            assert_eq!(got.cookie, 11);
            assert!(matches!(
                got.what,
                What::Undelivered(Undelivered {
                    reason: UndeliveredReason::ActorUnknown,
                    ..
                })
            ));
            // 2. The direct mbox of an agent whose coop is gone.
            let mut coop = env.make_coop();
            let direct = coop.add_agent(Quiet);
            let handle = env.register_coop(coop).unwrap();
            let endpoint = Endpoint::new(&direct)
                .event::<Ping>()
                .expose(&system)
                .unwrap();
            handle.deregister(DeregReason::Normal);
            wait_until("the agent's coop is gone", || !handle.is_registered());
            system.send_handle(
                EventHandle::new(endpoint.id(), watcher, Ping(2))
                    .with_flags(EventFlags::TRACK_DELIVERY)
                    .with_cookie(12),
            );
            let got = next(&rx, "Undelivered for the finished agent");
            assert_eq!(got.cookie, 12);
            assert!(matches!(got.what, What::Undelivered(_)));
            system.send(watcher, Poison);
            env.stop();
        })
        .unwrap();
    });
}

struct Quiet;
impl Agent for Quiet {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self().event(|_: &mut Self, _, _: &Ping| {})?;
        Ok(())
    }
}

#[test]
fn an_event_of_a_type_not_named_is_a_dead_letter_unhandled() {
    bounded(|| {
        Environment::launch(|env| {
            let system = ActorSystem::start(env, SystemSetup::new(1)).unwrap();
            let letters = Arc::new(Mutex::new(Vec::new()));
            let l = letters.clone();
            let dead = system.dead_letters();
            env.introduce_coop(move |coop| coop.add_agent(Letters(dead, l)))
                .unwrap();
            let mbox = env.create_mbox();
            let exposed = Endpoint::new(&mbox)
                .event::<Ping>()
                .expose(&system)
                .unwrap();
            system.send(exposed.id(), Pong(1));
            wait_until("a dead letter", || !letters.lock().is_empty());
            let d: DeadLetter = letters.lock()[0];
            assert_eq!(
                (d.recipient, d.event_type, d.reason),
                (exposed.id(), Pong::EVENT_TYPE, DeadLetterReason::Unhandled)
            );
            env.stop();
        })
        .unwrap();
    });
}

struct Letters(Mbox, Arc<Mutex<Vec<DeadLetter>>>);
impl Agent for Letters {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe(&self.0)
            .event(|a: &mut Self, _, d: &DeadLetter| a.1.lock().push(*d))?;
        Ok(())
    }
}

#[test]
fn a_service_id_resolves_to_the_endpoint_until_it_is_dropped() {
    bounded(|| {
        Environment::launch(|env| {
            let system = ActorSystem::start(env, SystemSetup::new(1)).unwrap();
            let service = ActorId::service(0, b"jobs").unwrap();
            let chain = env.create_mchain(agentbox::mchain::MChainParams::unbounded());
            let exposed = Endpoint::new(&chain.as_mbox())
                .event::<Ping>()
                .expose_as(&system, service)
                .unwrap();
            assert_eq!(exposed.service(), Some(service));
            system.send(service, Ping(5));
            wait_until("the ping in the chain", || chain.len() == 1);
            drop(exposed);
            assert_eq!(system.lookup_local_service(service), None);
            env.stop();
        })
        .unwrap();
    });
}

#[test]
fn bad_endpoints_are_typed_errors() {
    bounded(|| {
        Environment::launch(|env| {
            let system = ActorSystem::start(env, SystemSetup::new(1)).unwrap();
            let mpmc = env.create_mbox();
            assert!(matches!(
                Endpoint::new(&mpmc).expose(&system),
                Err(ExposeError::NoEvents)
            ));
            assert!(matches!(
                Endpoint::new(&mpmc)
                    .event::<Ping>()
                    .event_from_actor::<Ping>()
                    .expose(&system),
                Err(ExposeError::DuplicateEventType { event_type, .. }) if event_type == Ping::EVENT_TYPE
            ));
            assert_eq!(mpmc.kind(), MboxKind::MultiConsumer);
            assert!(matches!(
                Endpoint::new(&mpmc).event_mutable::<Ping>().expose(&system),
                Err(ExposeError::MutableToMultiConsumer { .. })
            ));
            assert!(matches!(
                Endpoint::new(&mpmc)
                    .event::<Ping>()
                    .expose_as(&system, ActorId::new(1, 5, 0)),
                Err(ExposeError::Service(_))
            ));
            assert!(matches!(
                Endpoint::new(&mpmc).event::<Ping>().on_pool("nope").expose(&system),
                Err(ExposeError::Register(RegisterActorError::UnknownPool(_)))
            ));
            env.stop();
        })
        .unwrap();
    });
}

/// A filter of the exposed mbox registers an actor while the endpoint delivers: the
/// delivery runs outside the actor table's lock, so it does not deadlock.
#[test]
fn user_code_run_by_an_endpoint_may_register_actors() {
    bounded(|| {
        Environment::launch(|env| {
            let system = ActorSystem::start(env, SystemSetup::new(1)).unwrap();
            let mbox = env.create_mbox();
            let (tx, rx) = mpsc::channel();
            let (s, m) = (system.clone(), mbox.clone());
            env.introduce_coop(move |coop| {
                coop.add_agent(FilterRegisters {
                    from: m,
                    system: s,
                    tx,
                })
            })
            .unwrap();
            let exposed = Endpoint::new(&mbox)
                .event::<Ping>()
                .expose(&system)
                .unwrap();
            system.send(exposed.id(), Ping(9));
            assert_eq!(next(&rx, "the ping"), 9);
            env.stop();
        })
        .unwrap();
    });
}

struct FilterRegisters {
    from: Mbox,
    system: ActorSystem,
    tx: Sender<u64>,
}
impl Agent for FilterRegisters {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe(&self.from)
            .event(|a: &mut Self, _, p: &Ping| {
                let _ = a.tx.send(p.0);
            })?;
        let system = self.system.clone();
        ctx.set_delivery_filter(&self.from, move |_: &Ping| {
            system.register(Scripted::boot_only(|_| {})).is_ok()
        })?;
        Ok(())
    }
}

/// An agent on node 2 exposes its direct mbox; an actor on node 1 pings it with a cookie;
/// the agent answers from its endpoint; a type without codec is refused at the send.
#[test]
fn across_nodes_an_agent_and_an_actor_talk_by_id() {
    bounded(|| {
        Environment::launch(|env| {
            let nodes = cluster(env, &[1, 2], |_, s| s);
            let (tx, rx) = mpsc::channel::<Got>();
            let actor = nodes[0].system.register(echo(Some(tx))).unwrap();
            let (pongs_tx, pongs) = mpsc::channel();
            let node2 = nodes[1].system.clone();
            let me = Arc::new(Mutex::new(None));
            let me2 = me.clone();
            let direct = env
                .introduce_coop(move |coop| {
                    coop.add_agent(RemoteTalker {
                        endpoint: me2,
                        pongs: pongs_tx,
                    })
                })
                .unwrap();
            let exposed = Endpoint::new(&direct)
                .event_from_actor::<Pong>()
                .event::<Undelivered>()
                .expose(&node2)
                .unwrap();
            let my_id = exposed.id();
            assert_eq!(my_id.node_id(), 2);
            // No codec for NoCodec: refused at once, nothing sent.
            assert_eq!(
                exposed.send(actor, NoCodec(1)),
                Err(BridgeSendError::NotSerializable {
                    event_type: NoCodec::EVENT_TYPE,
                    node: 1
                })
            );
            exposed
                .send_with(actor, Ping(3), EventFlags::TRACK_DELIVERY, 77)
                .unwrap();
            *me.lock() = Some(exposed);
            let got = next(&rx, "the ping on node 1");
            assert_eq!(
                (got.what, got.sender, got.cookie),
                (What::Ping(3), my_id, 77)
            );
            assert_eq!(next(&pongs, "the pong on node 2"), (3, actor, 77));
            nodes[0].system.send(actor, Poison);
            env.stop();
        })
        .unwrap();
    });
}

struct RemoteTalker {
    endpoint: Arc<Mutex<Option<agentbox::bridge::Exposed>>>,
    pongs: Sender<(u64, ActorId, u64)>,
}
impl Agent for RemoteTalker {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self()
            .event(|a: &mut Self, _, p: &FromActor<Pong>| {
                let _ = a.pongs.send((p.0, p.sender(), p.cookie()));
            })?;
        ctx.subscribe_self()
            .event(|_: &mut Self, _, _: &Undelivered| {})?;
        Ok(())
    }

    fn on_finish(&mut self, _ctx: &mut Context<Self>) {
        self.endpoint.lock().take();
    }
}

/// An endpoint in front of an mbox that refuses (a closed chain): the event follows YDB's
/// non-delivery rules, so a tracking sender gets `Undelivered` with its cookie.
#[test]
fn an_event_the_exposed_mbox_refuses_is_not_delivered_with_the_cookie() {
    bounded(|| {
        Environment::launch(|env| {
            let system = ActorSystem::start(env, SystemSetup::new(1)).unwrap();
            let (tx, rx) = mpsc::channel();
            let watcher = system.register(recorder(tx)).unwrap();
            let chain = env.create_mchain(agentbox::mchain::MChainParams::unbounded());
            let exposed = Endpoint::new(&chain.as_mbox())
                .event::<Ping>()
                .expose(&system)
                .unwrap();
            chain.close(agentbox::mchain::CloseMode::DropContent);
            system.send_handle(
                EventHandle::new(exposed.id(), watcher, Ping(3))
                    .with_flags(EventFlags::TRACK_DELIVERY)
                    .with_cookie(31),
            );
            let got = next(&rx, "Undelivered for the refused event");
            assert_eq!(got.cookie, 31);
            assert!(matches!(got.what, What::Undelivered(_)));
            system.send(watcher, Poison);
            env.stop();
        })
        .unwrap();
    });
}
