//! Core guarantees that the other tests leave unchecked: message limits are released as
//! demands run, unsubscribing and failed registrations remove the agent at the mbox,
//! equal-priority subscribers are served in subscription order, direct mboxes with many
//! types or with filters but no subscription, filters of custom mboxes in the trace, and
//! the false cases of `is_in_state`.

mod common;

use std::sync::Arc;

use parking_lot::Mutex;

use agentbox::prelude::*;
use agentbox::trace::{TraceEvent, TraceRecord, Tracer};
use agentbox::{
    DeliveryFilter, DeliveryMode, EnvParams, MboxId, MboxImpl, Message, MessageType,
    RedirectionDepth, RegisterError, SendError, Sink, SubscribeError,
};
use common::{send_self, within_patience, Log, Script};

/// One trace record, reduced to what the tests compare.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Rec {
    event: TraceEvent,
    /// The message type's last path segment (`"u32"`, `"Note"`, `"Ty<3>"`).
    ty: String,
    agent: Option<u64>,
    mbox: Option<u64>,
}

/// Keeps every trace record, in the order the tracer got them.
#[derive(Default)]
struct Collect(Mutex<Vec<Rec>>);

impl Tracer for Collect {
    fn trace(&self, r: &TraceRecord<'_>) {
        let ty = r.msg_type.map(|t| short_name(t.name())).unwrap_or_default();
        self.0.lock().push(Rec {
            event: r.event,
            ty,
            agent: r.agent.map(|a| a.as_u64()),
            mbox: r.mbox.map(|m| m.as_u64()),
        });
    }
}

impl Collect {
    /// The records of message type `ty`.
    fn of(&self, ty: &str) -> Vec<Rec> {
        self.0
            .lock()
            .iter()
            .filter(|r| r.ty == ty)
            .cloned()
            .collect()
    }
    /// The events of message type `ty`.
    fn events_of(&self, ty: &str) -> Vec<TraceEvent> {
        self.of(ty).into_iter().map(|r| r.event).collect()
    }
}

/// `a::b::Ty<a::b::X>` → `Ty<X>`; `a::b::Note` → `Note`.
fn short_name(name: &str) -> String {
    match name.split_once('<') {
        Some((head, rest)) => format!(
            "{}<{}",
            head.rsplit("::").next().unwrap(),
            rest.rsplit("::").next().unwrap()
        ),
        None => name.rsplit("::").next().unwrap().to_owned(),
    }
}

/// Runs `init` in an environment with a collecting tracer; returns the tracer once the
/// environment has stopped.
fn traced(init: impl FnOnce(&Environment) + Send + 'static) -> Arc<Collect> {
    let collect = Arc::new(Collect::default());
    let c = collect.clone();
    within_patience(move || {
        Environment::launch_with(EnvParams::new().message_tracer(c), init).expect("launch");
    });
    collect
}

/// Runs one scripted agent in an environment with a collecting tracer until it
/// deregisters; returns its log, the tracer and the agent's id.
fn run_traced_script(
    make: impl FnOnce(&Log) -> Script + Send + 'static,
) -> (Vec<String>, Arc<Collect>, u64) {
    let log = Log::new();
    let id = Arc::new(Mutex::new(None));
    let (l, i) = (log.clone(), id.clone());
    let collect = traced(move |env| {
        let agent = make(&l);
        let mbox = env
            .introduce_coop(|coop| coop.add_agent(agent))
            .expect("register the scripted coop");
        *i.lock() = Some(mbox.id().as_u64());
    });
    let id = id.lock().expect("registered");
    (log.get(), collect, id)
}

// ---------------------------------------------------------------------------------------
// 1. Message limits are released as their demands run.

/// Batch `.0`, message `.1` of the batch.
struct Job(u32, u32);
/// Same, for a type under the default limit.
struct Spare(u32, u32);
/// Sends batch `.0` (or ends the test after the last).
struct NextBatch(u32);

const LIMIT: u32 = 3;
const BATCHES: u32 = 40;
/// Sent per batch and type: two more than the limit, so each batch also overflows.
const PER_BATCH: u32 = LIMIT + 2;

/// Declares `limit_then_drop::<Job>(LIMIT)` and `default_limit_then_drop(LIMIT)` (which
/// covers `Spare`), then sends itself `BATCHES` batches of `PER_BATCH` of each, every batch
/// after the previous one was handled.
struct Batcher {
    log: Log,
}

impl Agent for Batcher {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.limit_then_drop::<Job>(LIMIT as usize)?;
        // Never reached even if no demand gave its place back: only the data types can
        // overflow.
        ctx.limit_then_drop::<NextBatch>(BATCHES as usize + 10)?;
        ctx.default_limit_then_drop(LIMIT as usize)?;
        ctx.subscribe_self()
            .event(|a: &mut Self, _, j: &Job| a.log.push(format!("job {}.{}", j.0, j.1)))?;
        ctx.subscribe_self()
            .event(|a: &mut Self, _, s: &Spare| a.log.push(format!("spare {}.{}", s.0, s.1)))?;
        ctx.subscribe_self()
            .event(|_: &mut Self, ctx, n: &NextBatch| {
                if n.0 == BATCHES {
                    ctx.deregister_coop(DeregReason::Normal);
                    return;
                }
                let me = ctx.direct_mbox();
                for i in 0..PER_BATCH {
                    send(&me, Job(n.0, i)).unwrap();
                }
                for i in 0..PER_BATCH {
                    send(&me, Spare(n.0, i)).unwrap();
                }
                // Queued behind the batch: runs once every message of it has run.
                send(&me, NextBatch(n.0 + 1)).unwrap();
            })?;
        Ok(())
    }
    fn on_start(&mut self, ctx: &mut Context<Self>) {
        send(&ctx.direct_mbox(), NextBatch(0)).unwrap();
    }
}

#[test]
fn a_message_limit_is_released_as_its_demands_run_so_every_batch_within_it_arrives() {
    let log = within_patience(|| {
        let log = Log::new();
        let l = log.clone();
        Environment::launch(move |env| {
            env.introduce_coop(|coop| {
                coop.add_agent(Batcher { log: l });
            })
            .unwrap();
        })
        .unwrap();
        log.get()
    });
    // Each batch: the first LIMIT of each type fit (the previous batch gave its places
    // back), the two over the limit are dropped.
    let mut expected = Vec::new();
    for b in 0..BATCHES {
        expected.extend((0..LIMIT).map(|i| format!("job {b}.{i}")));
        expected.extend((0..LIMIT).map(|i| format!("spare {b}.{i}")));
    }
    assert_eq!(log.len(), (BATCHES * LIMIT * 2) as usize);
    assert_eq!(log, expected);
}

// ---------------------------------------------------------------------------------------
// 2. Unsubscribing from an MPMC mbox removes the agent at the mbox.

struct Note(u32);
struct Unsubscribe;

#[test]
fn unsubscribing_from_an_mpmc_mbox_stops_deliveries_at_the_mbox() {
    let log = Log::new();
    let ids = Arc::new(Mutex::new((0u64, 0u64, 0u64))); // (news, leaver, stayer)
    let (l, i) = (log.clone(), ids.clone());
    let collect = traced(move |env| {
        let news = env.create_mbox();
        let (n1, n2) = (news.clone(), news.clone());
        let (leaver, stayer) = env
            .introduce_coop(|coop| {
                let leaver = coop.add_agent(Script::new(&l).setup(move |_, ctx| {
                    ctx.subscribe(&n1).event(|s: &mut Script, _, n: &Note| {
                        s.log.push(format!("leaver {}", n.0))
                    })?;
                    let news = n1.clone();
                    ctx.subscribe_self()
                        .event(move |s: &mut Script, ctx, _: &Unsubscribe| {
                            let default = ctx.default_state().clone();
                            let had = ctx.unsubscribe::<Note>(&news, &default);
                            s.log.push(format!("unsubscribed {had}"));
                            send(&news, Note(2)).unwrap();
                            send(&ctx.direct_mbox(), common::End).unwrap();
                        })?;
                    Ok(())
                }));
                let stayer = coop.add_agent(Script::new(&l).setup(move |_, ctx| {
                    ctx.subscribe(&n2).event(|s: &mut Script, _, n: &Note| {
                        s.log.push(format!("stayer {}", n.0))
                    })?;
                    Ok(())
                }));
                (leaver, stayer)
            })
            .unwrap();
        *i.lock() = (
            news.id().as_u64(),
            leaver.id().as_u64(),
            stayer.id().as_u64(),
        );
        // After registration both agents are bound: one FIFO queue, in this order.
        send(&news, Note(1)).unwrap();
        send(&leaver, Unsubscribe).unwrap();
    });
    let (news, leaver, stayer) = *ids.lock();
    assert_eq!(
        log.get(),
        ["leaver 1", "stayer 1", "unsubscribed true", "stayer 2"]
    );
    use TraceEvent::*;
    let for_agent = |agent: u64| -> Vec<TraceEvent> {
        collect
            .of("Note")
            .into_iter()
            .filter(|r| r.agent == Some(agent))
            .map(|r| r.event)
            .collect()
    };
    // Note(2) never reaches the leaver: not queued for it (no `Delivered`, no `NoHandler`).
    assert_eq!(for_agent(leaver), [Delivered, HandlerCalled]);
    assert_eq!(
        for_agent(stayer),
        [Delivered, HandlerCalled, Delivered, HandlerCalled]
    );
    assert!(collect
        .of("Note")
        .iter()
        .all(|r| r.mbox == Some(news) && r.event != NoSubscribers));
}

#[test]
fn the_last_unsubscriber_of_an_mpmc_mbox_leaves_it_without_subscribers() {
    let log = Log::new();
    let news_id = Arc::new(Mutex::new(0u64));
    let (l, i) = (log.clone(), news_id.clone());
    let collect = traced(move |env| {
        let news = env.create_mbox();
        *i.lock() = news.id().as_u64();
        let n = news.clone();
        let agent = env
            .introduce_coop(|coop| {
                coop.add_agent(Script::new(&l).setup(move |_, ctx| {
                    ctx.subscribe(&n)
                        .event(|s: &mut Script, _, m: &Note| s.log.push(format!("note {}", m.0)))?;
                    let news = n.clone();
                    ctx.subscribe_self()
                        .event(move |s: &mut Script, ctx, _: &Unsubscribe| {
                            let default = ctx.default_state().clone();
                            let had = ctx.unsubscribe::<Note>(&news, &default);
                            s.log.push(format!("unsubscribed {had}"));
                            send(&news, Note(2)).unwrap();
                            send(&ctx.direct_mbox(), common::End).unwrap();
                        })?;
                    Ok(())
                }))
            })
            .unwrap();
        send(&news, Note(1)).unwrap();
        send(&agent, Unsubscribe).unwrap();
    });
    let news = *news_id.lock();
    assert_eq!(log.get(), ["note 1", "unsubscribed true"]);
    use TraceEvent::*;
    assert_eq!(
        collect.events_of("Note"),
        [Delivered, HandlerCalled, NoSubscribers]
    );
    let last = collect.of("Note").pop().unwrap();
    assert_eq!((last.mbox, last.agent), (Some(news), None));
}

// ---------------------------------------------------------------------------------------
// 3. A failed registration drops the subscriptions made in `define`.

/// Subscribes to `news` in `define`, then fails if `fail`.
fn subscriber_that_may_fail(news: &Mbox, log: &Log, fail: bool) -> Script {
    let news = news.clone();
    Script::new(log).setup(move |_, ctx| {
        ctx.subscribe(&news)
            .event(|s: &mut Script, _, n: &Note| s.log.push(format!("note {}", n.0)))?;
        ctx.set_delivery_filter(&news, |_: &Note| true)?;
        ctx.subscribe_self()
            .event(|s: &mut Script, _, n: &u32| s.log.push(format!("direct {n}")))?;
        if fail {
            return Err(DefineError::Custom("refused on purpose".into()));
        }
        Ok(())
    })
}

#[test]
fn a_failed_registration_drops_the_subscriptions_its_agents_made_in_define() {
    let log = Log::new();
    let results = Arc::new(Mutex::new(Vec::new()));
    let (l, r) = (log.clone(), results.clone());
    let collect = traced(move |env| {
        let news = env.create_mbox();
        // The failing agent alone; then a good agent before a failing one.
        let mut directs = Vec::new();
        let alone = env.introduce_coop(|coop| {
            directs.push(coop.add_agent(subscriber_that_may_fail(&news, &l, true)));
        });
        let pair = env.introduce_coop(|coop| {
            directs.push(coop.add_agent(subscriber_that_may_fail(&news, &l, false)));
            directs.push(coop.add_agent(subscriber_that_may_fail(&news, &l, true)));
        });
        for res in [alone, pair] {
            r.lock().push(match res {
                Err(RegisterError::Define {
                    index,
                    source: DefineError::Custom(why),
                }) => format!("define of #{index} failed: {why}"),
                other => format!("unexpected {other:?}"),
            });
        }
        send(&news, Note(1)).unwrap();
        for d in &directs {
            send(d, 7u32).unwrap();
        }
        assert_eq!(env.coop_count(), 0);
    });
    assert_eq!(
        *results.lock(),
        [
            "define of #0 failed: refused on purpose",
            "define of #1 failed: refused on purpose"
        ]
    );
    assert!(log.get().is_empty(), "{:?}", log.get());
    use TraceEvent::*;
    // Nobody is left at the mbox, nor at the direct mboxes of the three agents.
    assert_eq!(collect.events_of("Note"), [NoSubscribers]);
    assert_eq!(
        collect.events_of("u32"),
        [NoSubscribers, NoSubscribers, NoSubscribers]
    );
}

// ---------------------------------------------------------------------------------------
// 4. Equal priorities: subscription order.

struct SubscribeNow;

#[test]
fn subscribers_of_equal_priority_receive_a_message_in_subscription_order() {
    within_patience(|| {
        let log = Log::new();
        let l = log.clone();
        Environment::launch(move |env| {
            let news = env.create_mbox();
            // Created in this order; they subscribe in another order, when told to.
            let agents = [
                ("a", Priority::P0),
                ("b", Priority::P3),
                ("c", Priority::P0),
                ("d", Priority::P3),
                ("e", Priority::P0),
                ("f", Priority::P0),
            ];
            let mboxes: Vec<Mbox> = env
                .introduce_coop(|coop| {
                    agents
                        .iter()
                        .map(|&(name, prio)| {
                            let news = news.clone();
                            coop.add_agent(Script::new(&l).priority(prio).setup(move |_, ctx| {
                                ctx.subscribe_self().event(
                                    move |s: &mut Script, ctx, _: &SubscribeNow| {
                                        ctx.subscribe(&news)
                                            .event(move |s: &mut Script, _, n: &Note| {
                                                s.log.push(format!("{name} {}", n.0))
                                            })
                                            .unwrap();
                                        s.log.push(format!("subscribed {name}"));
                                    },
                                )?;
                                Ok(())
                            }))
                        })
                        .collect()
                })
                .unwrap();
            // One one_thread queue: they subscribe in exactly this order.
            for i in [4, 3, 0, 1, 5, 2] {
                send(&mboxes[i], SubscribeNow).unwrap();
            }
            l.wait_for(6);
            send(&news, Note(1)).unwrap();
            send(&news, Note(2)).unwrap();
            l.wait_for(18);
            env.stop();
        })
        .unwrap();
        let log = log.get();
        assert_eq!(
            log[..6],
            [
                "subscribed e",
                "subscribed d",
                "subscribed a",
                "subscribed b",
                "subscribed f",
                "subscribed c"
            ]
        );
        // Priority P3 first (d before b: subscription order), then P0 in subscription
        // order (e, a, f, c) — not creation order.
        assert_eq!(
            log[6..],
            ["d 1", "b 1", "e 1", "a 1", "f 1", "c 1", "d 2", "b 2", "e 2", "a 2", "f 2", "c 2"]
        );
    });
}

// ---------------------------------------------------------------------------------------
// 5. A direct mbox with more than eight subscribed types.

/// Twelve distinct message types.
struct Ty<const N: usize>;

type SubFn = fn(&mut Context<Script>) -> Result<(), SubscribeError>;
type SendFn = fn(&Mbox);
type UnsubFn = fn(&mut Context<Script>) -> bool;

fn sub_ty<const N: usize>(ctx: &mut Context<Script>) -> Result<(), SubscribeError> {
    ctx.subscribe_self()
        .event(|s: &mut Script, _, _: &Ty<N>| s.log.push(format!("t{N}")))
}
fn send_ty<const N: usize>(to: &Mbox) {
    send(to, Ty::<N>).unwrap();
}
fn unsub_ty<const N: usize>(ctx: &mut Context<Script>) -> bool {
    let (me, default) = (ctx.direct_mbox(), ctx.default_state().clone());
    ctx.unsubscribe::<Ty<N>>(&me, &default)
}

macro_rules! ty_ops {
    ($($n:literal),*) => {
        [$((sub_ty::<$n> as SubFn, send_ty::<$n> as SendFn, unsub_ty::<$n> as UnsubFn)),*]
    };
}

const TYS: [(SubFn, SendFn, UnsubFn); 12] = ty_ops!(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11);

fn send_all_tys(ctx: &Context<Script>) {
    let me = ctx.direct_mbox();
    for (_, send, _) in TYS {
        send(&me);
    }
}

struct Step(u8);

#[test]
fn a_direct_mbox_with_twelve_types_delivers_each_and_stops_exactly_the_unsubscribed_ones() {
    // Types on the direct mbox: the 12 `Ty` and the script's `End`: 13, then 9 after the
    // first round of unsubscriptions (still more than 8), then 6. The steps go through an
    // MPMC mbox, so that a lost `Ty` cannot stall the script.
    const FIRST: [usize; 4] = [1, 4, 7, 10];
    const SECOND: [usize; 3] = [0, 2, 3];
    let (log, collect, _) = run_traced_script(|log| {
        Script::new(log).setup(|_, ctx| {
            let steps = ctx.environment().create_mbox();
            for (sub, _, _) in TYS {
                sub(ctx)?;
            }
            let to_steps = steps.clone();
            ctx.subscribe(&steps)
                .event(move |s: &mut Script, ctx, st: &Step| {
                    let which: &[usize] = match st.0 {
                        0 => &[],
                        1 => &FIRST,
                        2 => &SECOND,
                        _ => return ctx.deregister_coop(DeregReason::Normal),
                    };
                    if !which.is_empty() {
                        let dropped = which.iter().filter(|&&i| (TYS[i].2)(ctx)).count();
                        s.log.push(format!("unsubscribed {dropped}"));
                    }
                    send_all_tys(ctx);
                    // Behind this round's messages.
                    send(&to_steps, Step(st.0 + 1)).unwrap();
                })?;
            send(&steps, Step(0)).unwrap();
            Ok(())
        })
    });
    let t = |ns: &[usize]| ns.iter().map(|n| format!("t{n}")).collect::<Vec<_>>();
    let mut expected = t(&(0..12).collect::<Vec<_>>());
    expected.push("unsubscribed 4".into());
    expected.extend(t(&[0, 2, 3, 5, 6, 8, 9, 11]));
    expected.push("unsubscribed 3".into());
    expected.extend(t(&[5, 6, 8, 9, 11]));
    assert_eq!(log, expected);
    use TraceEvent::*;
    for n in 0..12 {
        let events = collect.events_of(&format!("Ty<{n}>"));
        let rounds = if FIRST.contains(&n) {
            1
        } else if SECOND.contains(&n) {
            2
        } else {
            3
        };
        // Every send and handler runs on the agent's own worker: one order per type.
        let mut want = Vec::new();
        for _ in 0..rounds {
            want.extend([Delivered, HandlerCalled]);
        }
        for _ in rounds..3 {
            want.push(NoSubscribers);
        }
        assert_eq!(events, want, "Ty<{n}>");
    }
}

/// Sent to the agent's own direct mbox, round `.0`.
struct Probe(u8);
/// Runs round `.0` (through an MPMC mbox, so that a refused `Probe` cannot stall it).
struct Round(u8);

/// The agent's own direct mbox keeps a type for as long as any use of it is left: a
/// subscription in any state or a dead-letter handler (its uses are counted from the
/// subscription index, not recorded apart).
#[test]
fn a_direct_mbox_keeps_a_type_while_any_state_or_dead_letter_handler_uses_it() {
    let (log, collect, _) = run_traced_script(|log| {
        Script::new(log).setup(|_, ctx| {
            // The agent stays in the default state: its `Probe`s go to the dead-letter
            // handler while there is one, and are dropped unhandled after.
            let (a, b) = (State::new("a"), State::new("b"));
            ctx.subscribe_self()
                .in_state(&a)
                .in_state(&b)
                .event(|s: &mut Script, _, p: &Probe| s.log.push(format!("in a state {}", p.0)))?;
            ctx.subscribe_self()
                .dead_letter(|s: &mut Script, _, p: &Probe| {
                    s.log.push(format!("dead letter {}", p.0))
                })?;
            let rounds = ctx.environment().create_mbox();
            let next = rounds.clone();
            ctx.subscribe(&rounds)
                .event(move |s: &mut Script, ctx, r: &Round| {
                    let me = ctx.direct_mbox();
                    let removed = match r.0 {
                        0 => true,
                        1 => ctx.unsubscribe::<Probe>(&me, &a),
                        2 => ctx.unsubscribe::<Probe>(&me, &b),
                        3 => ctx.unsubscribe_dead_letter::<Probe>(&me),
                        4 => ctx
                            .subscribe_self()
                            .in_state(&a)
                            .event(|_: &mut Script, _, _: &Probe| {})
                            .is_ok(),
                        _ => return ctx.deregister_coop(DeregReason::Normal),
                    };
                    s.log.push(format!("round {} {removed}", r.0));
                    send(&me, Probe(r.0)).unwrap();
                    // Behind this round's probe.
                    send(&next, Round(r.0 + 1)).unwrap();
                })?;
            send(&rounds, Round(0)).unwrap();
            Ok(())
        })
    });
    assert_eq!(
        log,
        [
            "round 0 true",
            "dead letter 0",
            "round 1 true",
            "dead letter 1",
            "round 2 true",
            "dead letter 2",
            "round 3 true",
            "round 4 true",
        ]
    );
    use TraceEvent::*;
    assert_eq!(
        collect.events_of("Probe"),
        [
            // Two states and the dead-letter handler use it.
            Delivered,
            HandlerCalled,
            // One state less.
            Delivered,
            HandlerCalled,
            // No state has it, the dead-letter handler still does.
            Delivered,
            HandlerCalled,
            // No use left: refused at the mbox.
            NoSubscribers,
            // Subscribed again.
            Delivered,
            NoHandler,
        ]
    );
}

// ---------------------------------------------------------------------------------------
// 6. A direct-mbox filter without a subscription.

#[test]
fn a_direct_mbox_filter_without_a_subscription_delivers_nothing_and_filters_once_subscribed() {
    let (log, collect, me) = run_traced_script(|log| {
        Script::new(log)
            .setup(|_, ctx| {
                let me = ctx.direct_mbox();
                ctx.set_delivery_filter(&me, |n: &u32| n.is_multiple_of(2))?;
                Ok(())
            })
            .start(|_, ctx| {
                let me = ctx.direct_mbox();
                // A filter alone: nothing is queued, even what the filter would pass.
                for n in 1..=4u32 {
                    send(&me, n).unwrap();
                }
                // Had 2 and 4 been queued, this handler would take them.
                ctx.subscribe_self()
                    .event(|s: &mut Script, _, n: &u32| s.log.push(format!("{n}")))
                    .unwrap();
                for n in 5..=8u32 {
                    send(&me, n).unwrap();
                }
                send(&me, common::End).unwrap();
            })
    });
    assert_eq!(log, ["6", "8"]);
    use TraceEvent::*;
    assert_eq!(
        collect.events_of("u32"),
        [
            NoSubscribers,
            NoSubscribers,
            NoSubscribers,
            NoSubscribers,
            RejectedByFilter,
            Delivered,
            RejectedByFilter,
            Delivered,
            HandlerCalled,
            HandlerCalled
        ]
    );
    assert!(collect.of("u32").iter().all(|r| r.mbox == Some(me)));
}

// ---------------------------------------------------------------------------------------
// 7. Filters of a custom mbox in the trace.

struct Entry {
    ty: MessageType,
    agent: Sink,
    subscribed: bool,
    filter: Option<DeliveryFilter>,
}

/// A multi-consumer mbox written against the public trait only, filtering by itself and
/// reporting refusals with `Sink::trace_filtered`.
struct FilteringMbox {
    id: MboxId,
    env: agentbox::WeakEnv,
    entries: Mutex<Vec<Entry>>,
}

impl FilteringMbox {
    fn with_entry(&self, ty: MessageType, who: &Sink, f: impl FnOnce(&mut Entry)) {
        let mut entries = self.entries.lock();
        let pos = match entries.iter().position(|e| e.ty == ty && e.agent == *who) {
            Some(p) => p,
            None => {
                entries.push(Entry {
                    ty,
                    agent: who.clone(),
                    subscribed: false,
                    filter: None,
                });
                entries.len() - 1
            }
        };
        f(&mut entries[pos]);
        entries.retain(|e| e.subscribed || e.filter.is_some());
    }
}

impl MboxImpl for FilteringMbox {
    fn id(&self) -> MboxId {
        self.id
    }
    fn kind(&self) -> MboxKind {
        MboxKind::MultiConsumer
    }
    fn subscribe(&self, ty: MessageType, who: &Sink) -> Result<(), SubscribeError> {
        self.with_entry(ty, who, |e| e.subscribed = true);
        Ok(())
    }
    fn unsubscribe(&self, ty: MessageType, who: &Sink) {
        self.with_entry(ty, who, |e| e.subscribed = false);
    }
    fn deliver(
        &self,
        msg: Message,
        depth: RedirectionDepth,
        mode: DeliveryMode,
    ) -> Result<(), SendError> {
        let entries = self.entries.lock();
        for e in entries
            .iter()
            .filter(|e| e.subscribed && e.ty == msg.message_type())
        {
            if e.filter.as_ref().is_none_or(|f| f.accepts(&msg)) {
                e.agent.push_message(self.id, msg.clone(), depth, mode);
            } else {
                e.agent.trace_filtered(self.id, &msg);
            }
        }
        Ok(())
    }
    fn set_delivery_filter(
        &self,
        ty: MessageType,
        filter: DeliveryFilter,
        who: &Sink,
    ) -> Result<(), SubscribeError> {
        self.with_entry(ty, who, |e| e.filter = Some(filter));
        Ok(())
    }
    fn drop_delivery_filter(&self, ty: MessageType, who: &Sink) {
        self.with_entry(ty, who, |e| e.filter = None);
    }
    fn name(&self) -> String {
        "filtering".into()
    }
    fn environment(&self) -> Option<Environment> {
        self.env.upgrade()
    }
}

#[test]
fn a_custom_mbox_that_filters_shows_rejected_by_filter_in_the_trace() {
    let log = Log::new();
    let ids = Arc::new(Mutex::new((0u64, 0u64)));
    let (l, i) = (log.clone(), ids.clone());
    let collect = traced(move |env| {
        let custom = Mbox::custom(Arc::new(FilteringMbox {
            id: MboxId::next(),
            env: env.downgrade(),
            entries: Mutex::new(Vec::new()),
        }));
        let c = custom.clone();
        let agent = env
            .introduce_coop(|coop| {
                coop.add_agent(Script::new(&l).setup(move |_, ctx| {
                    ctx.subscribe(&c)
                        .event(|s: &mut Script, _, n: &u32| s.log.push(format!("{n}")))?;
                    ctx.set_delivery_filter(&c, |n: &u32| n.is_multiple_of(2))?;
                    Ok(())
                }))
            })
            .unwrap();
        *i.lock() = (custom.id().as_u64(), agent.id().as_u64());
        // The agent is bound: sends from here are traced on this thread, in order; the
        // handler records come from the worker.
        for n in 1..=4u32 {
            send(&custom, n).unwrap();
        }
        send(&agent, common::End).unwrap();
    });
    let (mbox, agent) = *ids.lock();
    assert_eq!(log.get(), ["2", "4"]);
    use TraceEvent::*;
    let sender_side: Vec<Rec> = collect
        .of("u32")
        .into_iter()
        .filter(|r| r.event != HandlerCalled)
        .collect();
    let rec = |event| Rec {
        event,
        ty: "u32".into(),
        agent: Some(agent),
        mbox: Some(mbox),
    };
    assert_eq!(
        sender_side,
        [
            rec(RejectedByFilter),
            rec(Delivered),
            rec(RejectedByFilter),
            rec(Delivered)
        ]
    );
    assert_eq!(
        collect
            .of("u32")
            .into_iter()
            .filter(|r| r.event == HandlerCalled)
            .count(),
        2
    );
}

// ---------------------------------------------------------------------------------------
// 8. `is_in_state`.

fn report(ctx: &Context<Script>, states: &[&State]) -> String {
    let parts: Vec<String> = states
        .iter()
        .map(|s| format!("{}={}", s.name(), ctx.is_in_state(s)))
        .collect();
    format!("in {}: {}", ctx.current_state().name(), parts.join(" "))
}

#[test]
fn is_in_state_is_true_for_the_current_state_and_its_parents_only() {
    let log = common::run_script(|log| {
        Script::new(log)
            .setup(|_, ctx| {
                let top = State::new("top");
                let a = top.initial_substate("a")?;
                let b = top.substate("b")?;
                let b1 = b.initial_substate("b1")?;
                let other = State::new("other");
                let default = ctx.default_state().clone();
                let all = [
                    top.clone(),
                    a,
                    b.clone(),
                    b1,
                    other.clone(),
                    default.clone(),
                ];
                let parent = other.clone();
                ctx.change_state(&top)?;
                // A dead-letter handler: runs in every state.
                ctx.subscribe_self()
                    .dead_letter(move |s: &mut Script, ctx, st: &Step| {
                        let refs: Vec<&State> = all.iter().collect();
                        let mut line = report(ctx, &refs);
                        if st.0 == 2 {
                            // A substate made while the agent is in its parent: not entered.
                            let deeper = parent.substate("deeper").unwrap();
                            line.push_str(&format!(" deeper={}", ctx.is_in_state(&deeper)));
                        }
                        s.log.push(line);
                        let next = match st.0 {
                            0 => Some(&b),
                            1 => Some(&other),
                            2 => Some(&default),
                            _ => None,
                        };
                        if let Some(next) = next {
                            ctx.change_state(next).unwrap();
                        }
                    })?;
                Ok(())
            })
            .start(|_, ctx| send_self(ctx, (0..4).map(Step)))
    });
    assert_eq!(
        log,
        [
            "in a: top=true a=true b=false b1=false other=false <default>=false",
            "in b1: top=true a=false b=true b1=true other=false <default>=false",
            "in other: top=false a=false b=false b1=false other=true <default>=false deeper=false",
            "in <default>: top=false a=false b=false b1=false other=false <default>=true",
        ]
    );
}
