//! A message with no handler in the agent's current state is logged once per (agent type,
//! message type) with `EnvParams::log_drops`; agents' optional names show in the logs and
//! are readable through `AgentRef::name`.

use std::sync::{Arc, Mutex};

use agentbox::prelude::*;
use agentbox::{AgentNameError, EnvParams};

struct Hello;
struct Bye;
struct Done;

/// Subscribes in the default state, then lives in a state of its own.
struct Misplaced {
    busy: State,
    name: Option<&'static str>,
}

impl Agent for Misplaced {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        if let Some(n) = self.name {
            ctx.set_name(n).unwrap();
        }
        ctx.subscribe_self()
            .event(|_: &mut Self, _, _: &Hello| {})?;
        ctx.subscribe_self().event(|_: &mut Self, _, _: &Bye| {})?;
        // Handled in `busy`: ends the coop once the messages before it were dropped.
        ctx.subscribe_self()
            .in_state(&self.busy)
            .event(|_: &mut Self, ctx, _: &Done| ctx.deregister_coop(DeregReason::Normal))?;
        ctx.change_state(&self.busy).unwrap();
        Ok(())
    }
    fn on_start(&mut self, ctx: &mut Context<Self>) {
        for _ in 0..3 {
            send(&ctx.direct_mbox(), Hello).unwrap();
        }
        send(&ctx.direct_mbox(), Bye).unwrap();
        send(&ctx.direct_mbox(), Done).unwrap();
    }
}

/// Runs `agents` agents that drop everything: the error logger's lines, and the
/// `no_handler` count once they are gone.
fn run(params: EnvParams, agents: usize) -> (Vec<String>, u64) {
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = lines.clone();
    let params = params.error_logger(move |l| log.lock().unwrap().push(l.to_owned()));
    let mut drops_of = None;
    Environment::launch_with(params, |env| {
        for k in 0..agents {
            env.introduce_coop(|coop| {
                coop.add_agent(Misplaced {
                    busy: State::new("busy"),
                    name: (k == 0).then_some("first-misplaced"),
                });
            })
            .unwrap();
        }
        // Ends when every coop is gone (each after its `Done`).
        drops_of = Some(env.clone());
    })
    .unwrap();
    let lines = lines.lock().unwrap().clone();
    (lines, drops_of.unwrap().drop_counts().no_handler)
}

#[test]
fn each_no_handler_drop_kind_is_logged_once_with_the_state_and_a_hint() {
    let (lines, _) = run(EnvParams::new().log_drops(true), 3);
    // 3 agents × (3 Hello + 1 Bye) drops: one line per message type.
    assert_eq!(lines.len(), 2, "{lines:?}");
    let hello = lines.iter().find(|l| l.contains("Hello")).expect("Hello");
    let bye = lines.iter().find(|l| l.contains("Bye")).expect("Bye");
    for l in [hello, bye] {
        assert!(l.contains("no handler"), "{l}");
        assert!(l.contains("Misplaced"), "{l}");
        assert!(l.contains("`busy`"), "{l}");
        assert!(l.contains("default state"), "{l}");
    }
    // The first agent to drop is the first one registered, the named one.
    assert!(hello.contains("(first-misplaced)"), "{hello}");
}

#[test]
fn without_the_option_drops_are_only_counted() {
    let (lines, no_handler) = run(EnvParams::new().log_drops(false), 2);
    assert!(lines.is_empty(), "{lines:?}");
    assert_eq!(no_handler, 8);
}

#[test]
fn the_option_is_on_by_default_in_debug_builds_only() {
    let (lines, _) = run(EnvParams::new(), 1);
    assert_eq!(lines.is_empty(), !cfg!(debug_assertions), "{lines:?}");
}

struct Named;
impl Agent for Named {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.set_name("worker-7").unwrap();
        assert_eq!(
            ctx.set_name("other"),
            Err(AgentNameError::AlreadyNamed {
                name: "worker-7".into()
            })
        );
        Ok(())
    }
    fn on_start(&mut self, _: &mut Context<Self>) {
        panic!("boom");
    }
}

#[test]
fn a_name_is_set_once_and_shown_in_the_error_logger_s_lines_about_the_agent() {
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = lines.clone();
    let params = EnvParams::new()
        .exception_reaction(ExceptionReaction::DeregisterCoop)
        .error_logger(move |l| log.lock().unwrap().push(l.to_owned()));
    Environment::launch_with(params, |env| {
        env.introduce_coop(|coop| {
            coop.add_agent(Named);
        })
        .unwrap();
    })
    .unwrap();
    let lines = lines.lock().unwrap();
    let failed: Vec<_> = lines.iter().filter(|l| l.contains("boom")).collect();
    assert_eq!(failed.len(), 1, "{lines:?}");
    assert!(failed[0].contains("(worker-7)"), "{}", failed[0]);
}

mod agent_ref_name {
    use std::sync::{Arc, Mutex};

    use agentbox::prelude::*;
    use agentbox::{
        DeliveryFilter, DeliveryMode, MboxId, MboxImpl, Message, MessageType, RedirectionDepth,
        SendError, Sink, SubscribeError,
    };

    /// Forwards to an ordinary mbox and records the names of the agents that subscribe.
    struct Recording {
        inner: Mbox,
        names: Mutex<Vec<Option<Arc<str>>>>,
    }

    impl MboxImpl for Recording {
        fn id(&self) -> MboxId {
            self.inner.id()
        }
        fn kind(&self) -> MboxKind {
            self.inner.kind()
        }
        fn subscribe(&self, ty: MessageType, who: &Sink) -> Result<(), SubscribeError> {
            let name = who.as_agent().and_then(|a| a.name());
            self.names.lock().unwrap().push(name);
            self.inner.raw().subscribe(ty, who)
        }
        fn unsubscribe(&self, ty: MessageType, who: &Sink) {
            self.inner.raw().unsubscribe(ty, who)
        }
        fn deliver(
            &self,
            msg: Message,
            depth: RedirectionDepth,
            mode: DeliveryMode,
        ) -> Result<(), SendError> {
            self.inner.deliver_with(msg, depth + 1, mode)
        }
        fn set_delivery_filter(
            &self,
            ty: MessageType,
            f: DeliveryFilter,
            who: &Sink,
        ) -> Result<(), SubscribeError> {
            self.inner.raw().set_delivery_filter(ty, f, who)
        }
        fn drop_delivery_filter(&self, ty: MessageType, who: &Sink) {
            self.inner.raw().drop_delivery_filter(ty, who)
        }
        fn name(&self) -> String {
            "recording".into()
        }
        fn environment(&self) -> Option<Environment> {
            self.inner.environment()
        }
    }

    struct Subscriber {
        mbox: Mbox,
        name: Option<&'static str>,
    }
    impl Agent for Subscriber {
        fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
            if let Some(n) = self.name {
                ctx.set_name(n).unwrap();
            }
            ctx.subscribe(&self.mbox)
                .event(|_: &mut Self, _, _: &u8| {})?;
            Ok(())
        }
        fn on_start(&mut self, ctx: &mut Context<Self>) {
            ctx.deregister_coop(DeregReason::Normal);
        }
    }

    #[test]
    fn an_agent_ref_reads_the_agent_s_name() {
        let mut recording = None;
        Environment::launch(|env| {
            let rec = Arc::new(Recording {
                inner: env.create_mbox(),
                names: Mutex::new(Vec::new()),
            });
            let mbox = Mbox::custom(rec.clone());
            for name in [Some("alpha"), None] {
                let mbox = mbox.clone();
                env.introduce_coop(|coop| {
                    coop.add_agent(Subscriber { mbox, name });
                })
                .unwrap();
            }
            recording = Some(rec);
        })
        .unwrap();
        let names = recording.unwrap().names.lock().unwrap().clone();
        assert_eq!(names, [Some(Arc::from("alpha")), None]);
    }
}
