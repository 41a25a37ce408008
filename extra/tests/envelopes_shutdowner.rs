//! Revocable and time-limited messages; the shutdowner.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentbox::prelude::*;
use agentbox_extra::envelopes::{send_revocable, send_time_limited};
use agentbox_extra::shutdowner::{ShutdownInitiated, Shutdowner};
use parking_lot::Mutex;

const PATIENCE: Duration = Duration::from_secs(60);

fn within_patience(f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    if rx.recv_timeout(PATIENCE).is_err() {
        panic!("test did not finish in {PATIENCE:?}");
    }
    t.join().unwrap();
}

struct Hold(Arc<AtomicBool>);
struct Done;

/// Counts `u32`s (through an optional filter); held by `Hold`; deregisters on `Done`.
struct Receiver {
    got: Arc<Mutex<Vec<u32>>>,
    filtered: bool,
}

impl Agent for Receiver {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        if self.filtered {
            ctx.set_delivery_filter(&ctx.direct_mbox(), |v: &u32| (*v).is_multiple_of(2))?;
        }
        ctx.subscribe_self().event(|_: &mut Self, _, h: &Hold| {
            while !h.0.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
        })?;
        ctx.subscribe_self()
            .event(|a: &mut Self, _, v: &u32| a.got.lock().push(*v))?;
        ctx.subscribe_self()
            .event(|_: &mut Self, ctx, _: &Done| ctx.deregister_coop(DeregReason::Normal))?;
        Ok(())
    }
}

/// Holds the receiver, lets `send` queue messages, then releases it.
fn held_run(filtered: bool, send_all: impl FnOnce(&Mbox) + Send + 'static) -> Vec<u32> {
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    within_patience(move || {
        Environment::launch(move |env| {
            let me = env
                .introduce_coop(|coop| coop.add_agent(Receiver { got: g, filtered }))
                .unwrap();
            let go = Arc::new(AtomicBool::new(false));
            send(&me, Hold(go.clone())).unwrap();
            send_all(&me);
            send(&me, Done).unwrap();
            go.store(true, Ordering::SeqCst);
        })
        .unwrap();
    });
    let v = got.lock().clone();
    v
}

#[test]
fn a_revoked_message_already_queued_is_not_handled() {
    let got = held_run(false, |me| {
        let kept = send_revocable(me, 1u32).unwrap();
        let revoked = send_revocable(me, 2u32).unwrap();
        drop(send_revocable(me, 3u32).unwrap()); // dropping the handle revokes too
        revoked.revoke();
        assert!(revoked.is_revoked());
        std::mem::forget(kept); // never revoked
    });
    assert_eq!(got, [1]);
}

#[test]
fn delivery_filters_see_the_payload_inside_the_envelope() {
    let got = held_run(true, |me| {
        for v in 1..=4u32 {
            std::mem::forget(send_revocable(me, v).unwrap());
        }
    });
    assert_eq!(got, [2, 4]);
}

#[test]
fn a_time_limited_message_that_expires_in_the_queue_is_not_handled() {
    let got = held_run(false, |me| {
        send_time_limited(me, Duration::from_secs(3600), 1u32).unwrap();
        send_time_limited(me, Duration::from_millis(1), 2u32).unwrap();
        // Too long for an `Instant`: never expires (and never panics).
        send_time_limited(me, Duration::MAX, 3u32).unwrap();
        // The receiver is held until after the deadline has passed.
        let until = Instant::now() + Duration::from_millis(5);
        while Instant::now() < until {
            std::thread::yield_now();
        }
    });
    assert_eq!(got, [1, 3]);
}

// ---- shutdowner ----

struct Saver {
    notices: Mbox,
    told: Arc<AtomicUsize>,
}

impl Agent for Saver {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe(&self.notices.clone()).event(
            |a: &mut Self, ctx, _: &ShutdownInitiated| {
                a.told.fetch_add(1, Ordering::SeqCst);
                // Finish later: a delayed message to ourselves, then deregister.
                send_delayed(&ctx.direct_mbox(), Duration::from_millis(20), Done)
                    .unwrap()
                    .detach();
            },
        )?;
        ctx.subscribe_self()
            .event(|_: &mut Self, ctx, _: &Done| ctx.deregister_coop(DeregReason::Normal))?;
        Ok(())
    }
}

#[test]
fn stop_waits_until_every_subscriber_is_gone() {
    let told = Arc::new(AtomicUsize::new(0));
    let t = told.clone();
    within_patience(move || {
        Environment::launch(move |env| {
            let s = Shutdowner::install(env, PATIENCE).unwrap();
            for _ in 0..3 {
                env.introduce_coop(|coop| {
                    coop.add_agent(Saver {
                        notices: s.mbox(),
                        told: t.clone(),
                    });
                })
                .unwrap();
            }
            assert_eq!(s.subscriber_count(), 3);
            env.stop();
            // Still running: the savers are finishing their way.
            assert!(!env.is_shutting_down());
        })
        .unwrap();
    });
    assert_eq!(told.load(Ordering::SeqCst), 3);
}

#[test]
fn with_no_subscriber_the_stop_goes_on_at_once() {
    within_patience(|| {
        Environment::launch(|env| {
            let _s = Shutdowner::install(env, PATIENCE).unwrap();
            env.stop();
            assert!(env.is_shutting_down());
        })
        .unwrap();
    });
}

#[test]
fn child_entry() {
    if std::env::var_os("AGENTBOX_SHUTDOWNER_CHILD").is_none() {
        return; // only meaningful inside the child process
    }
    struct Stubborn(Mbox);
    impl Agent for Stubborn {
        fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
            ctx.subscribe(&self.0.clone())
                .event(|_: &mut Self, _, _: &ShutdownInitiated| {})?;
            Ok(())
        }
    }
    Environment::launch(|env| {
        let s = Shutdowner::install(env, Duration::from_millis(50)).unwrap();
        env.introduce_coop(|coop| {
            coop.add_agent(Stubborn(s.mbox()));
        })
        .unwrap();
        env.stop();
    })
    .unwrap();
    println!("NOT ABORTED");
}

#[test]
fn a_subscriber_that_never_leaves_aborts_after_the_maximum_time() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env("AGENTBOX_SHUTDOWNER_CHILD", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(!stdout.contains("NOT ABORTED"), "{stdout}");
    assert!(stderr.contains("still there after"), "{stderr}");
}
