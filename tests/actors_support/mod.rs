//! Helpers shared by the `actors_*` integration tests.
#![allow(dead_code)]

use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::Duration;

use agentbox::actors::*;
use agentbox::prelude::*;
use agentbox::{ActorId, WrappedEnv};

/// Generous bound for anything that should happen at once (the machine is shared).
pub const PATIENCE: Duration = Duration::from_secs(60);

pub const SPACE: u32 = event_space_begin(ES_USERSPACE + 7);

/// A test event carrying a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Num(pub u64);
impl Event for Num {
    const EVENT_TYPE: u32 = SPACE + 1;
}

/// Another test event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hold;
impl Event for Hold {
    const EVENT_TYPE: u32 = SPACE + 2;
}

/// What a [`Scripted`] actor saw of one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub by: ActorId,
    pub event_type: u32,
    pub sender: ActorId,
    pub recipient: ActorId,
    pub rewrite: ActorId,
    pub cookie: u64,
    pub flags: EventFlags,
    pub num: Option<u64>,
    pub undelivered: Option<Undelivered>,
}

impl Seen {
    pub fn of(by: ActorId, ev: &EventHandle) -> Seen {
        Seen {
            by,
            event_type: ev.event_type(),
            sender: ev.sender(),
            recipient: ev.recipient(),
            rewrite: ev.recipient_rewrite(),
            cookie: ev.cookie(),
            flags: ev.flags(),
            num: ev.get::<Num>().map(|n| n.0),
            undelivered: ev.get::<Undelivered>().copied(),
        }
    }
}

pub type Boot = Box<dyn FnOnce(&mut Scripted, &mut ActorContext<Scripted>, ActorId) + Send>;
pub type OnEvent = Box<dyn FnMut(&mut ActorContext<Scripted>, EventHandle) -> Handled + Send>;

/// An actor made of closures: `boot` at bootstrap, `on_event` for every event.
pub struct Scripted {
    pub boot: Option<Boot>,
    pub on_event: Option<OnEvent>,
    pub reaction: ExceptionReaction,
}

impl Scripted {
    pub fn new(
        on_event: impl FnMut(&mut ActorContext<Scripted>, EventHandle) -> Handled + Send + 'static,
    ) -> Scripted {
        Scripted {
            boot: None,
            on_event: Some(Box::new(on_event)),
            reaction: ExceptionReaction::Inherit,
        }
    }

    pub fn boot(
        mut self,
        f: impl FnOnce(&mut Scripted, &mut ActorContext<Scripted>, ActorId) + Send + 'static,
    ) -> Scripted {
        self.boot = Some(Box::new(f));
        self
    }

    pub fn reaction(mut self, r: ExceptionReaction) -> Scripted {
        self.reaction = r;
        self
    }

    fn state(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
        match self.on_event.as_mut() {
            Some(f) => f(ctx, ev),
            None => ev.unhandled(),
        }
    }
}

impl Actor for Scripted {
    fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, parent: ActorId) {
        ctx.become_state(Self::state);
        if let Some(b) = self.boot.take() {
            b(self, ctx, parent);
        }
    }
    fn exception_reaction(&self) -> ExceptionReaction {
        self.reaction
    }
}

/// An actor that reports every event it sees (Poison is left unhandled: it passes away).
pub fn recorder(tx: Sender<Seen>) -> Scripted {
    Scripted::new(move |ctx, ev| {
        let _ = tx.send(Seen::of(ctx.self_id(), &ev));
        if ev.event_type() == EV_POISON {
            return ev.unhandled();
        }
        Handled::Yes
    })
}

/// Receives `n` items, failing after [`PATIENCE`].
pub fn take<T>(rx: &Receiver<T>, n: usize) -> Vec<T> {
    (0..n)
        .map(|i| {
            rx.recv_timeout(PATIENCE)
                .unwrap_or_else(|e| panic!("item {i} of {n} did not come: {e}"))
        })
        .collect()
}

/// Asserts nothing more arrives on `rx` once `settle` has been observed: `settle` is a
/// probe that went through the same queues after everything under test.
pub fn none_left<T: std::fmt::Debug>(rx: &Receiver<T>) {
    if let Ok(x) = rx.try_recv() {
        panic!("unexpected extra item {x:?}");
    }
}

/// Polls `cond` until it holds (at most [`PATIENCE`]).
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + PATIENCE;
    while !cond() {
        assert!(
            std::time::Instant::now() < deadline,
            "never happened: {what}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A core agent forwarding every dead letter of a system into a channel.
pub struct DeadLetterSink {
    pub mbox: Mbox,
    pub tx: Sender<DeadLetter>,
}

impl Agent for DeadLetterSink {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let mbox = self.mbox.clone();
        ctx.subscribe(&mbox)
            .event(|a: &mut Self, _, d: &DeadLetter| {
                let _ = a.tx.send(*d);
            })?;
        Ok(())
    }
}

/// Subscribes a sink to `system`'s dead letters; returns its receiver.
pub fn dead_letters(env: &Environment, system: &ActorSystem) -> Receiver<DeadLetter> {
    let (tx, rx) = channel();
    env.introduce_coop(|coop| {
        coop.add_agent(DeadLetterSink {
            mbox: system.dead_letters(),
            tx,
        });
    })
    .unwrap();
    rx
}

/// Runs a test's body on its own thread and fails the test if it does not return within
/// [`PATIENCE`]: an actor system's pools are dispatchers, and dropping one waits for its
/// worker threads, which would hang, not fail, a test whose worker stop path broke.
pub fn bounded(body: impl FnOnce() + Send + 'static) {
    let (tx, rx) = channel();
    let t = std::thread::spawn(move || {
        body();
        let _ = tx.send(());
    });
    match rx.recv_timeout(PATIENCE) {
        Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            if let Err(p) = t.join() {
                std::panic::resume_unwind(p);
            }
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("the test did not finish within {PATIENCE:?}")
        }
    }
}

/// A wrapped environment (runs until stopped).
pub fn env() -> WrappedEnv {
    WrappedEnv::new(|_| {}).unwrap()
}

/// A system on `env` with a fixed first local id (deterministic ids).
pub fn system(env: &Environment, node: u32) -> ActorSystem {
    ActorSystem::start(env, SystemSetup::new(node).first_local_id(100)).unwrap()
}
