//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod suite;
pub mod suite_robust;

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

/// A shared, ordered log of what agents did.
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    pub fn new() -> Self {
        Log::default()
    }
    pub fn push(&self, s: impl Into<String>) {
        self.0.lock().push(s.into());
    }
    pub fn get(&self) -> Vec<String> {
        self.0.lock().clone()
    }
    pub fn len(&self) -> usize {
        self.0.lock().len()
    }
    /// Waits until at least `n` lines are in (at most [`PATIENCE`]; the caller's asserts
    /// then say what is missing).
    pub fn wait_for(&self, n: usize) {
        let deadline = std::time::Instant::now() + PATIENCE;
        while self.len() < n && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Runs `f` in a fresh environment (within [`PATIENCE`]), then stops it.
pub fn with_env(f: impl FnOnce(&Environment) + Send + 'static) {
    within_patience(move || {
        Environment::launch(move |env| {
            f(env);
            env.stop();
        })
        .unwrap();
    });
}

/// Every `u32` queued in `chain`, in order, without waiting.
pub fn drain_u32(chain: &agentbox::mchain::MChain) -> Vec<u32> {
    use agentbox::mchain::{receive, Handlers, ReceiveParams};
    let mut got = Vec::new();
    receive(
        chain,
        ReceiveParams::new().no_wait(),
        &mut Handlers::new().on(|v: &u32| got.push(*v)),
    );
    got
}

/// Generous bound for anything that should finish at once: the machine is shared and slow.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Runs `f` on its own thread and fails the test (instead of hanging CI) if it does not
/// return within [`PATIENCE`].
pub fn within_patience<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        let r = f();
        let _ = tx.send(());
        r
    });
    match rx.recv_timeout(PATIENCE) {
        Ok(()) => t.join().expect("test body panicked"),
        Err(mpsc::RecvTimeoutError::Disconnected) => match t.join() {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("test did not finish within {PATIENCE:?}"),
    }
}

use agentbox::prelude::*;

type Setup = Box<dyn FnOnce(&mut Script, &mut Context<Script>) -> Result<(), DefineError> + Send>;
type Start = Box<dyn FnOnce(&mut Script, &mut Context<Script>) + Send>;

/// A test agent whose `define` and `on_start` are closures given by the test.
pub struct Script {
    pub log: Log,
    pub setup: Option<Setup>,
    pub start: Option<Start>,
    pub reaction: ExceptionReaction,
    pub priority: Priority,
}

/// Ends a scripted test: the agent deregisters its coop.
pub struct End;

impl Script {
    pub fn new(log: &Log) -> Self {
        Script {
            log: log.clone(),
            setup: None,
            start: None,
            reaction: ExceptionReaction::Inherit,
            priority: Priority::P0,
        }
    }
    pub fn setup(
        mut self,
        f: impl FnOnce(&mut Script, &mut Context<Script>) -> Result<(), DefineError> + Send + 'static,
    ) -> Self {
        self.setup = Some(Box::new(f));
        self
    }
    pub fn start(
        mut self,
        f: impl FnOnce(&mut Script, &mut Context<Script>) + Send + 'static,
    ) -> Self {
        self.start = Some(Box::new(f));
        self
    }
    pub fn reaction(mut self, r: ExceptionReaction) -> Self {
        self.reaction = r;
        self
    }
    pub fn priority(mut self, p: Priority) -> Self {
        self.priority = p;
        self
    }
}

impl Agent for Script {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self()
            .dead_letter(|_: &mut Self, ctx, _: &End| ctx.deregister_coop(DeregReason::Normal))?;
        match self.setup.take() {
            Some(f) => f(self, ctx),
            None => Ok(()),
        }
    }
    fn on_start(&mut self, ctx: &mut Context<Self>) {
        if let Some(f) = self.start.take() {
            f(self, ctx);
        }
    }
    fn priority(&self) -> Priority {
        self.priority
    }
    fn exception_reaction(&self) -> ExceptionReaction {
        self.reaction
    }
}

/// Runs one scripted agent in its own environment until it deregisters; returns the log.
pub fn run_script(make: impl FnOnce(&Log) -> Script + Send + 'static) -> Vec<String> {
    within_patience(move || {
        let log = Log::new();
        let agent = make(&log);
        Environment::launch(move |env| {
            env.introduce_coop(|coop| {
                coop.add_agent(agent);
            })
            .expect("register the scripted coop");
        })
        .expect("launch");
        log.get()
    })
}

/// Sends each message to the agent's own mbox, then `End`.
pub fn send_self<M: Send + Sync + 'static>(
    ctx: &Context<Script>,
    msgs: impl IntoIterator<Item = M>,
) {
    let me = ctx.direct_mbox();
    for m in msgs {
        send(&me, m).unwrap();
    }
    send(&me, End).unwrap();
}

/// A custom mbox that records every message it is given (through the public trait): lets
/// tests observe notices sent while every agent is shutting down.
pub struct Recorder {
    id: agentbox::MboxId,
    pub seen: Log,
    describe: fn(&agentbox::Message) -> String,
}

impl Recorder {
    pub fn mbox(describe: fn(&agentbox::Message) -> String) -> (Mbox, Log) {
        let seen = Log::new();
        let r = Arc::new(Recorder {
            id: agentbox::MboxId::next(),
            seen: seen.clone(),
            describe,
        });
        (Mbox::custom(r), seen)
    }
}

impl agentbox::MboxImpl for Recorder {
    fn id(&self) -> agentbox::MboxId {
        self.id
    }
    fn kind(&self) -> MboxKind {
        MboxKind::MultiConsumer
    }
    fn subscribe(
        &self,
        _: agentbox::MessageType,
        _: &agentbox::Sink,
    ) -> Result<(), agentbox::SubscribeError> {
        Err(agentbox::SubscribeError::Refused {
            mbox: self.name(),
            reason: "record only".into(),
        })
    }
    fn unsubscribe(&self, _: agentbox::MessageType, _: &agentbox::Sink) {}
    fn deliver(
        &self,
        msg: agentbox::Message,
        _: agentbox::RedirectionDepth,
        _: agentbox::DeliveryMode,
    ) -> Result<(), agentbox::SendError> {
        self.seen.push((self.describe)(&msg));
        Ok(())
    }
    fn set_delivery_filter(
        &self,
        _: agentbox::MessageType,
        _: agentbox::DeliveryFilter,
        _: &agentbox::Sink,
    ) -> Result<(), agentbox::SubscribeError> {
        Err(agentbox::SubscribeError::FiltersUnsupported { mbox: self.name() })
    }
    fn drop_delivery_filter(&self, _: agentbox::MessageType, _: &agentbox::Sink) {}
    fn name(&self) -> String {
        "recorder".into()
    }
    fn environment(&self) -> Option<Environment> {
        None
    }
}

/// Describes coop notices: `reg` or `dereg <reason>`.
pub fn coop_notice(m: &agentbox::Message) -> String {
    if let Some(d) = m.downcast_ref::<agentbox::CoopDeregistered>() {
        format!("dereg {:?}", d.reason)
    } else if m.downcast_ref::<agentbox::CoopRegistered>().is_some() {
        "reg".into()
    } else {
        format!("other {}", m.message_type().name())
    }
}

/// Runs this test binary's `child_entry` test in a child process with `env_var` set, and
/// checks that the child aborted (SIGABRT on Unix) before printing `NOT ABORTED`, with
/// `stderr_has` in its error output.
pub fn expect_child_abort(env_var: &str, stderr_has: &str) {
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env(env_var, "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let read_all = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = read_all(Box::new(child.stdout.take().unwrap()));
    let stderr = read_all(Box::new(child.stderr.take().unwrap()));
    // Bounded: a child that hangs instead of aborting is killed, and the test fails.
    let deadline = std::time::Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the child did not end within {PATIENCE:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let out = std::process::Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(!stdout.contains("NOT ABORTED"), "{stdout}");
    assert!(stderr.contains(stderr_has), "{stderr}");
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            out.status.signal(),
            Some(6),
            "SIGABRT expected: {:?}",
            out.status
        );
    }
}
