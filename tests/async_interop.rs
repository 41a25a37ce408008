//! Feature `tokio`: async code asks agents and actors without blocking a runtime thread,
//! reads mchains as futures and streams, awaits the environment's end; agents and actors
//! run futures whose outputs come back as messages, cancelled when their owner is gone.
//!
//! Run with `cargo test --features tokio --test async_interop`.
#![cfg(feature = "tokio")]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use agentbox::actors::{
    event_space_begin, Actor, ActorContext, ActorSystem, Event, EventHandle, Handled, SystemSetup,
    UndeliveredReason, ES_USERSPACE,
};
use agentbox::mchain::{CloseMode, MChainParams};
use agentbox::prelude::*;
use agentbox::request::{ReplyHandle, Request, RequestError};
use agentbox::tokio_interop::{
    ask, request_reply, ActorAsyncExt, AgentAsyncExt, AskError, SpawnFutureError,
};
use agentbox::{ActorId, CoopDeregistered, WrappedEnv};
use futures_core::Stream;
use tokio::runtime::{Builder, Handle, Runtime};
use tokio::sync::oneshot;

/// Generous bound for anything that should happen "soon" on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(30);

fn current_thread() -> Runtime {
    Builder::new_current_thread().enable_time().build().unwrap()
}

/// A current-thread runtime driven by a thread of its own until dropped.
struct RuntimeThread {
    handle: Handle,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl RuntimeThread {
    fn start() -> Self {
        let rt = current_thread();
        let handle = rt.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = thread::spawn(move || {
            rt.block_on(async {
                let _ = stopped.await;
            })
        });
        RuntimeThread {
            handle,
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for RuntimeThread {
    fn drop(&mut self) {
        let _ = self.stop.take().map(|s| s.send(()));
        let _ = self.thread.take().map(|t| t.join());
    }
}

/// Waits (bounded) until `cond` holds.
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(1));
    }
}

async fn next<S: Stream + Unpin>(s: &mut S) -> Option<S::Item> {
    std::future::poll_fn(|cx| Pin::new(&mut *s).poll_next(cx)).await
}

// ---- request_reply as a future ----------------------------------------------------

struct Go;

/// Holds each request until a `Go` arrives, then answers with the request doubled.
#[derive(Default)]
struct Holder {
    held: Vec<(u32, ReplyHandle<u32>)>,
}

impl Agent for Holder {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self()
            .event(|a: &mut Self, _, r: &Request<u32, u32>| {
                a.held.push((*r.get(), r.take_reply_handle().unwrap()));
            })?;
        ctx.subscribe_self().event(|a: &mut Self, _, _: &Go| {
            for (n, h) in a.held.drain(..) {
                h.reply(2 * n).unwrap();
            }
        })?;
        Ok(())
    }
}

/// The reply can only come after another task on the same single-threaded runtime has
/// run (it sends the `Go` that releases the answer): a caller that blocked the thread
/// would starve that task and end at its timeout instead.
#[test]
fn a_request_from_a_current_thread_runtime_leaves_the_runtime_free() {
    let wrapped = WrappedEnv::new(|_| {}).unwrap();
    let holder = wrapped
        .environment()
        .introduce_coop(|c| c.add_agent(Holder::default()))
        .unwrap();
    let rt = current_thread();
    let ticks = Arc::new(AtomicU32::new(0));
    let answer = rt.block_on({
        let ticks = ticks.clone();
        let holder = holder.clone();
        async move {
            let to = holder.clone();
            let releaser = tokio::spawn(async move {
                for _ in 0..5 {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    ticks.fetch_add(1, Ordering::SeqCst);
                }
                send(&to, Go).unwrap();
            });
            let answer = request_reply::<u32, u32>(&holder, PATIENCE, 21).await;
            releaser.await.unwrap();
            answer
        }
    });
    assert_eq!(answer, Ok(42));
    assert_eq!(ticks.load(Ordering::SeqCst), 5);
    wrapped.stop_then_join().unwrap();
}

#[test]
fn an_unanswered_request_times_out_with_a_typed_error() {
    let wrapped = WrappedEnv::new(|_| {}).unwrap();
    let holder = wrapped
        .environment()
        .introduce_coop(|c| c.add_agent(Holder::default()))
        .unwrap();
    let rt = current_thread();
    let started = Instant::now();
    let answer = rt.block_on(request_reply::<u32, u32>(
        &holder,
        Duration::from_millis(50),
        1,
    ));
    assert_eq!(answer, Err(RequestError::Timeout));
    assert!(started.elapsed() >= Duration::from_millis(50));
    wrapped.stop_then_join().unwrap();
}

#[test]
fn a_request_nobody_handles_fails_as_dropped_before_its_timeout() {
    let wrapped = WrappedEnv::new(|_| {}).unwrap();
    let holder = wrapped
        .environment()
        .introduce_coop(|c| c.add_agent(Holder::default()))
        .unwrap();
    let rt = current_thread();
    // Nobody subscribes to `Request<u32, String>`.
    let answer = rt.block_on(request_reply::<u32, String>(&holder, PATIENCE, 1));
    assert_eq!(answer, Err(RequestError::Dropped));
    wrapped.stop_then_join().unwrap();
}

#[test]
fn many_concurrent_requests_get_their_own_answers() {
    let wrapped = WrappedEnv::new(|_| {}).unwrap();
    let holder = wrapped
        .environment()
        .introduce_coop(|c| c.add_agent(Holder::default()))
        .unwrap();
    let rt = current_thread();
    let answers = rt.block_on(async {
        let asks: Vec<_> = (0..50u32)
            .map(|n| tokio::spawn(request_reply::<u32, u32>(&holder, PATIENCE, n)))
            .collect();
        send(&holder, Go).unwrap();
        let mut answers = Vec::new();
        for a in asks {
            answers.push(a.await.unwrap().unwrap());
        }
        answers
    });
    assert_eq!(answers, (0..50u32).map(|n| 2 * n).collect::<Vec<_>>());
    wrapped.stop_then_join().unwrap();
}

// ---- mchains ------------------------------------------------------------------------

#[test]
fn an_mchain_stream_yields_messages_in_order_then_ends_when_closed() {
    let wrapped = WrappedEnv::new(|_| {}).unwrap();
    let chain = wrapped
        .environment()
        .create_mchain(MChainParams::bounded(4).wait_on_full(PATIENCE));
    // The reader waits on an empty chain first: the sends must wake it.
    let sender = {
        let chain = chain.clone();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            for n in 0..200u32 {
                send(&chain.as_mbox(), n).unwrap();
                if n % 50 == 0 {
                    thread::sleep(Duration::from_millis(2));
                }
            }
            chain.close(CloseMode::RetainContent);
        })
    };
    let rt = current_thread();
    // Bounded: a lost wake-up fails the test instead of hanging it.
    let got = rt
        .block_on(async {
            tokio::time::timeout(PATIENCE, async {
                let mut stream = chain.stream();
                let mut got = Vec::new();
                while let Some(m) = next(&mut stream).await {
                    got.push(*m.downcast_ref::<u32>().expect("a u32"));
                }
                got
            })
            .await
        })
        .expect("the stream's end within the patience (a lost wake-up?)");
    sender.join().unwrap();
    assert_eq!(got, (0..200).collect::<Vec<u32>>());
    wrapped.stop_then_join().unwrap();
}

#[test]
fn an_mchain_future_gets_the_next_message_and_none_once_closed() {
    let wrapped = WrappedEnv::new(|_| {}).unwrap();
    let chain = wrapped
        .environment()
        .create_mchain(MChainParams::unbounded());
    let rt = current_thread();
    rt.block_on(async {
        let later = {
            let chain = chain.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(10)).await;
                send(&chain.as_mbox(), "hello").unwrap();
            })
        };
        let m = tokio::time::timeout(PATIENCE, chain.recv_async())
            .await
            .expect("woken by the send")
            .unwrap();
        assert_eq!(m.downcast_ref::<&str>(), Some(&"hello"));
        later.await.unwrap();
        // Closing wakes a waiting reader with `None`.
        let closer = {
            let chain = chain.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(10)).await;
                chain.close(CloseMode::DropContent);
            })
        };
        let closed = tokio::time::timeout(PATIENCE, chain.recv_async()).await;
        assert!(closed.expect("woken by the close").is_none());
        closer.await.unwrap();
    });
    wrapped.stop_then_join().unwrap();
}

// ---- the environment's end -----------------------------------------------------------

#[test]
fn the_environment_finished_future_resolves_after_the_stop() {
    let wrapped = WrappedEnv::new(|_| {}).unwrap();
    let env = wrapped.environment().clone();
    env.introduce_coop(|c| {
        c.add_agent(Holder::default());
    })
    .unwrap();
    let finished = env.finished();
    let rt = current_thread();
    // Not before the stop.
    let early = rt
        .block_on(async { tokio::time::timeout(Duration::from_millis(30), env.finished()).await });
    assert!(early.is_err(), "resolved before the stop");
    let stopper = thread::spawn(move || {
        thread::sleep(Duration::from_millis(10));
        env.stop();
        env
    });
    rt.block_on(async { tokio::time::timeout(PATIENCE, finished).await })
        .expect("the environment's end within the patience");
    let env = stopper.join().unwrap();
    assert_eq!(env.coop_count(), 0);
    // Already finished: resolves at once.
    rt.block_on(async { tokio::time::timeout(PATIENCE, env.finished()).await })
        .expect("an already finished environment");
    wrapped.stop_then_join().unwrap();
}

// ---- agents running futures ------------------------------------------------------------

/// Sets its flag when dropped: the future holding it was dropped.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

struct Computed(u32);

/// Starts a future; reports the output it gets through `results`.
struct Spawner {
    rt: Handle,
    results: mpsc::Sender<u32>,
    forever: bool,
    dropped: Arc<AtomicBool>,
    spawned: mpsc::Sender<Result<(), String>>,
}

impl Agent for Spawner {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        // In `define` the coop is not registered yet.
        let early = ctx.spawn_future(&self.rt, async { Computed(0) });
        assert!(
            matches!(early, Err(SpawnFutureError::NotRegistered)),
            "{early:?}"
        );
        ctx.subscribe_self()
            .event(|a: &mut Self, _, c: &Computed| {
                let _ = a.results.send(c.0);
            })?;
        Ok(())
    }

    fn on_start(&mut self, ctx: &mut Context<Self>) {
        let guard = DropFlag(self.dropped.clone());
        let forever = self.forever;
        let r = ctx.spawn_future(&self.rt, async move {
            let _guard = guard;
            tokio::time::sleep(Duration::from_millis(5)).await;
            if forever {
                std::future::pending::<()>().await;
            }
            Computed(7)
        });
        let _ = self.spawned.send(r.map(|_| ()).map_err(|e| e.to_string()));
    }
}

#[test]
fn an_agents_future_delivers_its_output_as_a_message() {
    let rt = RuntimeThread::start();
    let wrapped = WrappedEnv::new(|_| {}).unwrap();
    let (results, got) = mpsc::channel();
    let (spawned, spawn_result) = mpsc::channel();
    let dropped = Arc::new(AtomicBool::new(false));
    wrapped
        .environment()
        .introduce_coop(|c| {
            c.add_agent(Spawner {
                rt: rt.handle.clone(),
                results,
                forever: false,
                dropped: dropped.clone(),
                spawned,
            });
        })
        .unwrap();
    assert_eq!(spawn_result.recv_timeout(PATIENCE).unwrap(), Ok(()));
    assert_eq!(got.recv_timeout(PATIENCE).unwrap(), 7);
    // The finished future was dropped with its task.
    wait_until("the finished future's drop", || {
        dropped.load(Ordering::SeqCst)
    });
    wrapped.stop_then_join().unwrap();
}

#[test]
fn an_agents_future_is_cancelled_when_its_coop_deregisters() {
    let rt = RuntimeThread::start();
    let wrapped = WrappedEnv::new(|_| {}).unwrap();
    let env = wrapped.environment().clone();
    let (results, got) = mpsc::channel();
    let (spawned, spawn_result) = mpsc::channel();
    let dropped = Arc::new(AtomicBool::new(false));
    let notes = env.create_mchain(MChainParams::unbounded());
    let coop = {
        let mut coop = env.make_coop();
        coop.add_agent(Spawner {
            rt: rt.handle.clone(),
            results,
            forever: true,
            dropped: dropped.clone(),
            spawned,
        });
        coop.add_dereg_notificator(&notes.as_mbox());
        env.register_coop(coop).unwrap()
    };
    assert_eq!(spawn_result.recv_timeout(PATIENCE).unwrap(), Ok(()));
    // The future runs (it is past its sleep, waiting forever) and is not dropped.
    thread::sleep(Duration::from_millis(50));
    assert!(
        !dropped.load(Ordering::SeqCst),
        "dropped while its agent lives"
    );

    coop.deregister(DeregReason::Normal);
    let rt2 = current_thread();
    let note = rt2
        .block_on(async { tokio::time::timeout(PATIENCE, notes.recv_async()).await })
        .expect("the coop's deregistration")
        .expect("a notification");
    assert!(note.downcast_ref::<CoopDeregistered>().is_some());
    wait_until("the cancelled future's drop", || {
        dropped.load(Ordering::SeqCst)
    });
    assert!(
        got.try_recv().is_err(),
        "a cancelled future sent its output"
    );
    wrapped.stop_then_join().unwrap();
}

/// A result arriving in a state with no handler for it is dropped as any message is.
#[test]
fn an_agents_future_output_follows_the_agents_states() {
    struct Picky {
        rt: Handle,
        busy: State,
        results: mpsc::Sender<u32>,
    }
    impl Agent for Picky {
        fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
            // `Computed` is handled only in the default state; the agent sits in `busy`.
            ctx.subscribe_self()
                .event(|a: &mut Self, _, c: &Computed| {
                    let _ = a.results.send(c.0);
                })?;
            let busy = self.busy.clone();
            ctx.subscribe_self()
                .in_state(&busy)
                .event(|a: &mut Self, _, n: &u32| {
                    let _ = a.results.send(1000 + n);
                })?;
            ctx.change_state(&busy).unwrap();
            Ok(())
        }
        fn on_start(&mut self, ctx: &mut Context<Self>) {
            ctx.spawn_future(&self.rt, async { Computed(5) }).unwrap();
        }
    }
    let rt = RuntimeThread::start();
    let wrapped = WrappedEnv::new(|_| {}).unwrap();
    let env = wrapped.environment().clone();
    let (results, got) = mpsc::channel();
    let picky = env
        .introduce_coop(|c| {
            c.add_agent(Picky {
                rt: rt.handle.clone(),
                busy: State::new("busy"),
                results,
            })
        })
        .unwrap();
    wait_until("the output dropped for lack of a handler", || {
        env.drop_counts().no_handler >= 1
    });
    send(&picky, 1u32).unwrap();
    assert_eq!(got.recv_timeout(PATIENCE).unwrap(), 1001);
    assert!(got.try_recv().is_err());
    wrapped.stop_then_join().unwrap();
}

// ---- actors ------------------------------------------------------------------------------

const EVENTS: u32 = event_space_begin(ES_USERSPACE + 7);

struct Question(u64);
impl Event for Question {
    const EVENT_TYPE: u32 = EVENTS + 1;
}
#[derive(Debug)]
struct Answer(u64);
impl Event for Answer {
    const EVENT_TYPE: u32 = EVENTS + 2;
}
struct Done(u64);
impl Event for Done {
    const EVENT_TYPE: u32 = EVENTS + 3;
}
struct Quit;
impl Event for Quit {
    const EVENT_TYPE: u32 = EVENTS + 4;
}
struct Ignored;
impl Event for Ignored {
    const EVENT_TYPE: u32 = EVENTS + 5;
}

/// Answers questions; starts a future at bootstrap and reports its `Done`; passes away
/// on `Quit`.
struct Worker {
    rt: Handle,
    forever: bool,
    dropped: Arc<AtomicBool>,
    done: mpsc::Sender<u64>,
}

impl Actor for Worker {
    fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _parent: ActorId) {
        let guard = DropFlag(self.dropped.clone());
        let forever = self.forever;
        ctx.spawn_future(&self.rt, async move {
            let _guard = guard;
            if forever {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            Done(9)
        });
        ctx.become_state(Self::working);
    }
}

impl Worker {
    fn working(&mut self, ctx: &mut ActorContext<Self>, mut ev: EventHandle) -> Handled {
        if let Some(Question(n)) = ev.take::<Question>() {
            ctx.send(ev.sender(), Answer(n + 1));
        } else if let Some(Done(n)) = ev.take::<Done>() {
            // From the actor itself; anything else would show as a different number.
            let _ = self
                .done
                .send(if ev.sender() == ctx.self_id() { n } else { 0 });
        } else if ev.is::<Ignored>() {
        } else if ev.is::<Quit>() {
            ctx.pass_away().unwrap();
        } else {
            return ev.unhandled();
        }
        Handled::Yes
    }
}

fn start_worker(
    rt: &RuntimeThread,
    forever: bool,
) -> (
    WrappedEnv,
    ActorSystem,
    ActorId,
    Arc<AtomicBool>,
    mpsc::Receiver<u64>,
) {
    let wrapped = WrappedEnv::new(|_| {}).unwrap();
    let system = ActorSystem::start(wrapped.environment(), SystemSetup::new(1)).unwrap();
    let dropped = Arc::new(AtomicBool::new(false));
    let (done, done_rx) = mpsc::channel();
    let worker = system
        .register(Worker {
            rt: rt.handle.clone(),
            forever,
            dropped: dropped.clone(),
            done,
        })
        .unwrap();
    (wrapped, system, worker, dropped, done_rx)
}

#[test]
fn an_actors_future_delivers_its_output_as_an_event_from_itself() {
    let rt = RuntimeThread::start();
    let (wrapped, system, _worker, dropped, done) = start_worker(&rt, false);
    assert_eq!(done.recv_timeout(PATIENCE).unwrap(), 9);
    wait_until("the finished future's drop", || {
        dropped.load(Ordering::SeqCst)
    });
    system.stop();
    wrapped.stop_then_join().unwrap();
}

#[test]
fn an_actors_future_is_cancelled_when_it_passes_away() {
    let rt = RuntimeThread::start();
    let (wrapped, system, worker, dropped, done) = start_worker(&rt, true);
    thread::sleep(Duration::from_millis(60));
    assert!(
        !dropped.load(Ordering::SeqCst),
        "dropped while its actor lives"
    );
    system.send(worker, Quit);
    wait_until("the actor's pass-away", || !system.is_registered(worker));
    wait_until("the cancelled future's drop", || {
        dropped.load(Ordering::SeqCst)
    });
    assert!(done.try_recv().is_err());
    system.stop();
    wrapped.stop_then_join().unwrap();
}

#[test]
fn async_code_asks_an_actor() {
    let rt = RuntimeThread::start();
    let (wrapped, system, worker, _dropped, _done) = start_worker(&rt, true);
    let caller = current_thread();
    caller.block_on(async {
        let answer = ask::<_, Answer>(&system, worker, Question(41), PATIENCE).await;
        assert_eq!(answer.map(|a| a.0), Ok(42));

        let nobody = ActorId::new(1, 987_654, 3);
        let lost = ask::<_, Answer>(&system, nobody, Question(1), PATIENCE).await;
        assert!(
            matches!(
                lost,
                Err(AskError::Undelivered {
                    reason: UndeliveredReason::ActorUnknown
                })
            ),
            "{lost:?}"
        );

        // The worker does not answer `Ignored`.
        let silent = ask::<_, Answer>(&system, worker, Ignored, Duration::from_millis(30)).await;
        assert!(matches!(silent, Err(AskError::Timeout)), "{silent:?}");
    });
    system.stop();
    wrapped.stop_then_join().unwrap();
}

// ---- FutureHandle::abort against a future being polled ---------------------------------

/// How many times each abort race is run.
const ABORT_ROUNDS: u32 = 20;

/// A future that, on its first poll, says it is being polled, then blocks its runtime
/// thread inside that poll until released, then returns `output`: an abort is forced to
/// land while the future is being polled and is about to complete.
fn gated<T: Send + 'static>(
    output: T,
) -> (
    impl std::future::Future<Output = T> + Send + 'static,
    mpsc::Receiver<()>,
    mpsc::Sender<()>,
) {
    let (polled_tx, polled) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    let future = async move {
        let _ = polled_tx.send(());
        let _ = release_rx.recv_timeout(PATIENCE);
        output
    };
    (future, polled, release)
}

struct Marker(u32);

/// Starts one gated future; hands its handle out; reports its output and each `Marker`.
struct AbortTarget {
    rt: Handle,
    handles: Option<mpsc::Sender<agentbox::tokio_interop::FutureHandle>>,
    future: Option<Pin<Box<dyn std::future::Future<Output = Computed> + Send>>>,
    results: mpsc::Sender<u32>,
}

impl Agent for AbortTarget {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self()
            .event(|a: &mut Self, _, c: &Computed| {
                let _ = a.results.send(c.0);
            })?;
        ctx.subscribe_self().event(|a: &mut Self, _, m: &Marker| {
            let _ = a.results.send(m.0);
        })?;
        Ok(())
    }

    fn on_start(&mut self, ctx: &mut Context<Self>) {
        if let (Some(handles), Some(future)) = (self.handles.take(), self.future.take()) {
            let handle = ctx.spawn_future(&self.rt, future).unwrap();
            let _ = handles.send(handle);
        }
    }
}

/// Rule: once `FutureHandle::abort` has returned `true`, the agent never gets the
/// future's result, even when the abort came while the future was being polled on
/// its runtime thread and that poll then completed.
#[test]
fn an_agents_future_aborted_while_being_polled_never_delivers_its_result() {
    let rt = RuntimeThread::start();
    let wrapped = WrappedEnv::new(|_| {}).unwrap();
    let env = wrapped.environment().clone();
    for round in 0..ABORT_ROUNDS {
        let (future, polled, release) = gated(Computed(7));
        let (handles, handle_rx) = mpsc::channel();
        let (results, got) = mpsc::channel();
        let target = env
            .introduce_coop(|c| {
                c.add_agent(AbortTarget {
                    rt: rt.handle.clone(),
                    handles: Some(handles),
                    future: Some(Box::pin(future)),
                    results,
                })
            })
            .unwrap();
        let handle = handle_rx.recv_timeout(PATIENCE).unwrap();
        polled
            .recv_timeout(PATIENCE)
            .expect("the future's first poll");
        // The runtime thread is inside the poll now.
        assert!(handle.abort(), "round {round}: a running future's abort");
        release.send(()).unwrap();
        wait_until("the aborted task's end", || handle.is_finished());
        // A result sent before the task ended would come before this marker.
        send(&target, Marker(1000 + round)).unwrap();
        assert_eq!(
            got.recv_timeout(PATIENCE).unwrap(),
            1000 + round,
            "round {round}: the result came after the abort returned"
        );
    }
    // A finished future's result was sent: its late abort says so.
    let (future, polled, release) = gated(Computed(8));
    let (handles, handle_rx) = mpsc::channel();
    let (results, got) = mpsc::channel();
    env.introduce_coop(|c| {
        c.add_agent(AbortTarget {
            rt: rt.handle.clone(),
            handles: Some(handles),
            future: Some(Box::pin(future)),
            results,
        })
    })
    .unwrap();
    let handle = handle_rx.recv_timeout(PATIENCE).unwrap();
    polled.recv_timeout(PATIENCE).unwrap();
    release.send(()).unwrap();
    assert_eq!(got.recv_timeout(PATIENCE).unwrap(), 8);
    assert!(!handle.abort(), "the result was sent before the abort");
    wrapped.stop_then_join().unwrap();
}

struct ActorMarker(u64);
impl Event for ActorMarker {
    const EVENT_TYPE: u32 = EVENTS + 6;
}

/// Starts one gated future at bootstrap; hands its handle out; reports its `Done` and
/// each `ActorMarker`.
struct ActorAbortTarget {
    rt: Handle,
    future: Option<Pin<Box<dyn std::future::Future<Output = Done> + Send>>>,
    handles: mpsc::Sender<agentbox::tokio_interop::FutureHandle>,
    results: mpsc::Sender<u64>,
}

impl Actor for ActorAbortTarget {
    fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _parent: ActorId) {
        if let Some(future) = self.future.take() {
            let _ = self.handles.send(ctx.spawn_future(&self.rt, future));
        }
        ctx.become_state(Self::working);
    }
}

impl ActorAbortTarget {
    fn working(&mut self, _ctx: &mut ActorContext<Self>, mut ev: EventHandle) -> Handled {
        if let Some(Done(n)) = ev.take::<Done>() {
            let _ = self.results.send(n);
        } else if let Some(ActorMarker(n)) = ev.take::<ActorMarker>() {
            let _ = self.results.send(n);
        } else {
            return ev.unhandled();
        }
        Handled::Yes
    }
}

/// The same rule for an actor's future.
#[test]
fn an_actors_future_aborted_while_being_polled_never_delivers_its_result() {
    let rt = RuntimeThread::start();
    let wrapped = WrappedEnv::new(|_| {}).unwrap();
    let system = ActorSystem::start(wrapped.environment(), SystemSetup::new(1)).unwrap();
    for round in 0..u64::from(ABORT_ROUNDS) {
        let (future, polled, release) = gated(Done(9));
        let (handles, handle_rx) = mpsc::channel();
        let (results, got) = mpsc::channel();
        let target = system
            .register(ActorAbortTarget {
                rt: rt.handle.clone(),
                future: Some(Box::pin(future)),
                handles,
                results,
            })
            .unwrap();
        let handle = handle_rx.recv_timeout(PATIENCE).unwrap();
        polled
            .recv_timeout(PATIENCE)
            .expect("the future's first poll");
        assert!(handle.abort(), "round {round}: a running future's abort");
        release.send(()).unwrap();
        wait_until("the aborted task's end", || handle.is_finished());
        system.send(target, ActorMarker(1000 + round));
        assert_eq!(
            got.recv_timeout(PATIENCE).unwrap(),
            1000 + round,
            "round {round}: the result came after the abort returned"
        );
    }
    system.stop();
    wrapped.stop_then_join().unwrap();
}

// ---- nothing left behind by a dropped reader or waiter ---------------------------------

/// A task waker that counts its wake-ups; its `Arc`'s strong count shows who holds it.
#[derive(Default)]
struct CountingWake(AtomicU32);

impl std::task::Wake for CountingWake {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// How many async readers or waiters are given up in each leak test.
const GIVEN_UP: usize = 10_000;

/// Polls `f` once with a waker of its own; the future must be pending.
fn poll_once_pending<F: std::future::Future + Unpin>(f: &mut F, wake: &Arc<CountingWake>)
where
    F::Output: std::fmt::Debug,
{
    let waker = std::task::Waker::from(wake.clone());
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(Pin::new(f).poll(&mut cx).is_pending());
}

/// Rule: a `recv_async` future or an mchain stream dropped while it waits leaves
/// nothing behind in the chain: each task's waker is let go with it (the chain held
/// every one until the next send).
#[test]
fn dropped_mchain_readers_leave_no_waker_in_the_chain() {
    let wrapped = WrappedEnv::new(|_| {}).unwrap();
    let chain = wrapped
        .environment()
        .create_mchain(MChainParams::unbounded());
    let wakes: Vec<Arc<CountingWake>> = (0..GIVEN_UP).map(|_| Arc::default()).collect();
    for (i, w) in wakes.iter().enumerate() {
        if i % 2 == 0 {
            let mut recv = chain.recv_async();
            poll_once_pending(&mut recv, w);
            // Polled again with the same waker: still one entry, still let go.
            poll_once_pending(&mut recv, w);
        } else {
            let mut stream = chain.stream();
            let mut next = Box::pin(std::future::poll_fn(|cx| {
                Pin::new(&mut stream).poll_next(cx)
            }));
            poll_once_pending(&mut next, w);
        }
    }
    let held = wakes.iter().filter(|w| Arc::strong_count(w) > 1).count();
    assert_eq!(held, 0, "wakers of dropped readers still held by the chain");

    // A waiting reader is still woken, once, by a send; the dropped ones are not.
    let live = Arc::new(CountingWake::default());
    let mut recv = chain.recv_async();
    poll_once_pending(&mut recv, &live);
    chain.send(5u32).unwrap();
    assert_eq!(live.0.load(Ordering::SeqCst), 1);
    assert!(wakes.iter().all(|w| w.0.load(Ordering::SeqCst) == 0));
    let waker = std::task::Waker::from(live.clone());
    let got = Pin::new(&mut recv).poll(&mut std::task::Context::from_waker(&waker));
    assert!(matches!(got, std::task::Poll::Ready(Some(m)) if m.downcast_ref::<u32>() == Some(&5)));
    drop(recv);
    drop(waker);
    assert_eq!(Arc::strong_count(&live), 1);
    wrapped.stop_then_join().unwrap();
}

/// Rule: an `Environment::finished` future dropped before the end takes its hook back
/// (each call added one that stayed until the environment finished).
#[test]
fn dropped_finished_futures_leave_no_hook_in_the_environment() {
    let wrapped = WrappedEnv::new(|_| {}).unwrap();
    let env = wrapped.environment().clone();
    let base = env.waiting_finish_hooks();
    let wake = Arc::new(CountingWake::default());
    let mut futures: Vec<_> = (0..GIVEN_UP).map(|_| env.finished()).collect();
    for f in futures.iter_mut().step_by(100) {
        poll_once_pending(f, &wake);
    }
    assert_eq!(env.waiting_finish_hooks(), base + GIVEN_UP);
    drop(futures);
    assert_eq!(
        env.waiting_finish_hooks(),
        base,
        "hooks of dropped futures still held by the environment"
    );
    // One kept future still resolves at the end.
    let kept = env.finished();
    env.stop();
    current_thread()
        .block_on(async { tokio::time::timeout(PATIENCE, kept).await })
        .expect("the environment's end");
    assert_eq!(Arc::strong_count(&wake), 1);
    wrapped.stop_then_join().unwrap();
}
