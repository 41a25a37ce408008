//! Delivery tracing: the records of each step, the replaceable filter, the `tracing` tracer.

mod common;

use std::sync::Arc;

use parking_lot::Mutex;

use agentbox::prelude::*;
use agentbox::trace::{LimitAction, TraceEvent, TraceFilter, TraceRecord, Tracer, TracingTracer};
use agentbox::EnvParams;
use common::within_patience;

/// Keeps (event, message type name, state) of every record it gets.
#[derive(Default)]
struct Collect(Mutex<Vec<(TraceEvent, String, String)>>);

impl Tracer for Collect {
    fn trace(&self, r: &TraceRecord<'_>) {
        let ty = r
            .msg_type
            .map(|t| t.name().rsplit("::").next().unwrap().to_owned())
            .unwrap_or_default();
        self.0
            .lock()
            .push((r.event, ty, r.state.unwrap_or("").to_owned()));
    }
}

impl Collect {
    fn events_for(&self, ty: &str) -> Vec<TraceEvent> {
        self.0
            .lock()
            .iter()
            .filter(|(_, t, _)| t == ty)
            .map(|(e, _, _)| *e)
            .collect()
    }
}

struct Hello;
struct Unhandled;
struct Filtered(u32);
struct Busy;
struct Late;

struct Traced {
    other: State,
}

impl Agent for Traced {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let other = self.other.clone();
        ctx.limit_then_drop::<Hello>(1)?;
        ctx.default_limit_then_drop(100)?;
        ctx.subscribe_self()
            .event(|_: &mut Self, _, _: &Hello| {})?;
        ctx.subscribe_self()
            .in_state(&other)
            .event(|_: &mut Self, _, _: &Unhandled| {})?;
        ctx.subscribe_self()
            .event(|_: &mut Self, _, _: &Filtered| {})?;
        ctx.set_delivery_filter(&ctx.direct_mbox(), |f: &Filtered| f.0 > 0)?;
        ctx.subscribe_self().event(|a: &mut Self, ctx, _: &Busy| {
            // Queue a message, then deregister: it is dropped at deregistration.
            send(&ctx.direct_mbox(), Late).unwrap();
            ctx.change_state(&a.other.clone()).unwrap();
            ctx.deregister_coop(DeregReason::Normal);
        })?;
        ctx.subscribe_self()
            .in_state(&other)
            .event(|_: &mut Self, _, _: &Late| {})?;
        Ok(())
    }
    fn on_start(&mut self, ctx: &mut Context<Self>) {
        let me = ctx.direct_mbox();
        send(&me, Hello).unwrap(); // delivered, handler called
        send(&me, Hello).unwrap(); // over the limit: dropped
        send(&me, Unhandled).unwrap(); // no handler in the default state
        send(&me, Filtered(0)).unwrap(); // rejected by the filter
        send(&me, 5u64).unwrap(); // no subscription on the direct mbox
        send(&me, Busy).unwrap();
    }
}

#[test]
fn each_step_is_traced_in_order() {
    let collect = Arc::new(Collect::default());
    let c = collect.clone();
    within_patience(move || {
        Environment::launch_with(EnvParams::new().message_tracer(c), |env| {
            env.introduce_coop(|coop| {
                coop.add_agent(Traced {
                    other: State::new("other"),
                });
            })
            .unwrap();
        })
        .unwrap();
    });
    use TraceEvent::*;
    assert_eq!(
        collect.events_for("Hello"),
        [Delivered, OverLimit(LimitAction::Drop), HandlerCalled]
    );
    assert_eq!(collect.events_for("Unhandled"), [Delivered, NoHandler]);
    assert_eq!(collect.events_for("Filtered"), [RejectedByFilter]);
    assert_eq!(collect.events_for("u64"), [NoSubscribers]);
    assert_eq!(
        collect.events_for("Late"),
        [Delivered, DroppedAtDeregistration]
    );
    let states: Vec<_> = collect
        .0
        .lock()
        .iter()
        .filter(|(e, _, _)| matches!(e, StateLeft | StateEntered))
        .map(|(e, _, s)| (*e, s.clone()))
        .collect();
    assert_eq!(
        states,
        [
            (StateLeft, "<default>".to_owned()),
            (StateEntered, "other".to_owned()),
            // On the way out: back to the default state.
            (StateLeft, "other".to_owned()),
            (StateEntered, "<default>".to_owned()),
        ]
    );
}

#[test]
fn the_filter_can_be_replaced_while_running() {
    let collect = Arc::new(Collect::default());
    let c = collect.clone();
    within_patience(move || {
        let params = EnvParams::new()
            .message_tracer(c)
            .trace_filter(TraceFilter::new(|_| false));
        Environment::launch_with(params, |env| {
            let mbox = env.create_mbox();
            send(&mbox, Hello).unwrap();
            env.change_trace_filter(None);
            send(&mbox, Hello).unwrap();
            env.change_trace_filter(Some(TraceFilter::new(|r| {
                r.event != TraceEvent::NoSubscribers
            })));
            send(&mbox, Hello).unwrap();
        })
        .unwrap();
    });
    assert_eq!(collect.events_for("Hello"), [TraceEvent::NoSubscribers]);
}

#[test]
fn a_redirect_loop_is_traced_32_times_then_dropped() {
    let collect = Arc::new(Collect::default());
    let c = collect.clone();
    within_patience(move || {
        Environment::launch_with(EnvParams::new().message_tracer(c), |env| {
            let (ping, pong) = (env.create_mbox(), env.create_mbox());
            struct Bouncer(Mbox, Mbox);
            impl Agent for Bouncer {
                fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
                    ctx.limit_then_redirect::<Hello>(0, &self.1)?;
                    ctx.subscribe(&self.0.clone())
                        .event(|_: &mut Self, _, _: &Hello| {})?;
                    Ok(())
                }
            }
            env.introduce_coop(|coop| {
                coop.add_agent(Bouncer(ping.clone(), pong.clone()));
                coop.add_agent(Bouncer(pong.clone(), ping.clone()));
            })
            .unwrap();
            send(&ping, Hello).unwrap();
            env.stop();
        })
        .unwrap();
    });
    let redirects = collect
        .events_for("Hello")
        .into_iter()
        .filter(|e| *e == TraceEvent::OverLimit(LimitAction::Redirect))
        .count();
    assert_eq!(redirects, 32);
}

#[test]
fn the_tracing_crate_tracer_emits_events() {
    // A minimal subscriber that counts events of target `agentbox::trace`.
    struct Count(Arc<Mutex<usize>>);
    impl tracing::Subscriber for Count {
        fn enabled(&self, m: &tracing::Metadata<'_>) -> bool {
            m.target() == "agentbox::trace"
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, _: &tracing::Event<'_>) {
            *self.0.lock() += 1;
        }
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }
    let count = Arc::new(Mutex::new(0));
    let c = count.clone();
    within_patience(move || {
        let dispatch = tracing::Dispatch::new(Count(c));
        tracing::dispatcher::with_default(&dispatch, || {
            Environment::launch_with(
                EnvParams::new().message_tracer(Arc::new(TracingTracer)),
                |env| {
                    let mbox = env.create_mbox();
                    send(&mbox, Hello).unwrap();
                    send(&mbox, Hello).unwrap();
                },
            )
            .unwrap();
        });
    });
    assert_eq!(*count.lock(), 2);
}

/// An MPMC mbox whose only entry for a type is a filter without a subscription traces
/// `NoSubscribers`, as a direct mbox does.
#[test]
fn an_mpmc_mbox_with_only_a_filter_for_a_type_traces_no_subscribers() {
    struct FilterOnly(Mbox);
    impl Agent for FilterOnly {
        fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
            ctx.set_delivery_filter(&self.0.clone(), |_: &u16| true)?;
            Ok(())
        }
        fn on_start(&mut self, ctx: &mut Context<Self>) {
            send(&self.0, 7u16).unwrap();
            ctx.deregister_coop(DeregReason::Normal);
        }
    }
    let collect = Arc::new(Collect::default());
    let c = collect.clone();
    within_patience(move || {
        let params = EnvParams::new().message_tracer(c);
        Environment::launch_with(params, |env| {
            let source = env.create_mbox();
            env.introduce_coop(|coop| {
                coop.add_agent(FilterOnly(source));
            })
            .unwrap();
        })
        .unwrap();
    });
    assert_eq!(collect.events_for("u16"), [TraceEvent::NoSubscribers]);
}

/// An agent's name is its environment's (each environment keeps its own), shown in the
/// trace records about the agent while it lives, and forgotten once it has finished: a
/// message sent to its direct mbox afterwards is traced without the name.
#[test]
fn records_carry_the_agent_s_name_until_it_has_finished() {
    #[derive(Default)]
    struct Names(Mutex<Vec<(TraceEvent, Option<String>)>>);
    impl Tracer for Names {
        fn trace(&self, r: &TraceRecord<'_>) {
            if r.msg_type.is_some_and(|t| t.name().ends_with("Knock")) {
                self.0
                    .lock()
                    .push((r.event, r.agent_name.map(str::to_owned)));
            }
        }
    }
    struct Knock;
    struct Named(&'static str);
    impl Agent for Named {
        fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
            ctx.set_name(self.0).unwrap();
            ctx.subscribe_self()
                .event(|_: &mut Self, ctx, _: &Knock| ctx.deregister_coop(DeregReason::Normal))?;
            Ok(())
        }
    }
    let run = |name: &'static str| {
        let names = Arc::new(Names::default());
        let tracer = names.clone();
        within_patience(move || {
            let params = EnvParams::new().message_tracer(tracer);
            let kept = Arc::new(Mutex::new(None));
            let k = kept.clone();
            Environment::launch_with(params, move |env| {
                let me = env
                    .introduce_coop(|coop| coop.add_agent(Named(name)))
                    .unwrap();
                send(&me, Knock).unwrap();
                *k.lock() = Some(me);
            })
            .unwrap();
            // Finished: a message to it now is traced without the name.
            let me = kept.lock().take().unwrap();
            let _ = send(&me, Knock);
        });
        let got = names.0.lock().clone();
        got
    };
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| run("alpha"));
        let b = s.spawn(|| run("beta"));
        (a.join().unwrap(), b.join().unwrap())
    });
    for (got, name) in [(a, "alpha"), (b, "beta")] {
        let called = got
            .iter()
            .find(|(e, _)| *e == TraceEvent::HandlerCalled)
            .unwrap_or_else(|| panic!("{got:?}"));
        assert_eq!(called.1.as_deref(), Some(name), "{got:?}");
        let (_, late) = got.last().unwrap();
        assert_eq!(late, &None, "after it finished: {got:?}");
    }
}
