//! Agents and async code on one tokio runtime, both ways (feature `tokio`).
//!
//! - Three async sensor tasks tick on tokio timers and feed readings to an aggregator
//!   agent (plain sends from async code).
//! - An async dashboard asks the aggregator for a summary with
//!   `tokio_interop::request_reply` while the sensors keep ticking on the same
//!   single-threaded runtime: the request never blocks the runtime's thread.
//! - The aggregator raises alerts into an mchain that an async task reads as a `Stream`.
//! - A watchdog agent starts a future (`spawn_future`) that would report a missed
//!   deadline; the watchdog's coop ends first, so the future is cancelled.
//! - At the end the runtime stops the environment and awaits its end.
//!
//! Run with `cargo run --example async_interop --features tokio`. It ends by itself.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use agentbox::mchain::{CloseMode, MChain, MChainParams};
use agentbox::prelude::*;
use agentbox::request::Request;
use agentbox::tokio_interop::{request_reply, AgentAsyncExt};
use agentbox::WrappedEnv;
use futures_core::Stream;

const SENSORS: u32 = 3;
const TICKS: u32 = 40;
const ALERT_ABOVE: u64 = 36;

/// One sensor reading.
struct Reading {
    sensor: u32,
    value: u64,
}

/// A dashboard's question; the answer is a [`Summary`].
struct Query;

#[derive(Debug, Clone, Default)]
struct Summary {
    readings: u64,
    sum: u64,
    alerts: u64,
}

/// Counts readings, answers queries, raises alerts.
struct Aggregator {
    alerts: MChain,
    summary: Summary,
}

impl Agent for Aggregator {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self().event(|a: &mut Self, _, r: &Reading| {
            a.summary.readings += 1;
            a.summary.sum += r.value;
            if r.value > ALERT_ABOVE {
                a.summary.alerts += 1;
                let _ = a
                    .alerts
                    .send(format!("sensor {} read {}", r.sensor, r.value));
            }
        })?;
        ctx.subscribe_self()
            .event(|a: &mut Self, _, q: &Request<Query, Summary>| {
                let _ = q.reply(a.summary.clone());
            })?;
        Ok(())
    }
}

/// What the watchdog's future would send: never, as its coop ends first.
struct DeadlineMissed;

/// Starts a long async deadline; its coop is deregistered well before it.
struct Watchdog {
    rt: tokio::runtime::Handle,
    cancelled: Arc<AtomicBool>,
}

/// Sets its flag when dropped: the watchdog's future was dropped unfinished.
struct OnDrop(Arc<AtomicBool>);
impl Drop for OnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Agent for Watchdog {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self()
            .event(|_: &mut Self, _, _: &DeadlineMissed| {
                println!("watchdog: deadline missed (never printed)");
            })?;
        Ok(())
    }

    fn on_start(&mut self, ctx: &mut Context<Self>) {
        let guard = OnDrop(self.cancelled.clone());
        ctx.spawn_future(&self.rt, async move {
            let _guard = guard;
            tokio::time::sleep(Duration::from_secs(3600)).await;
            DeadlineMissed
        })
        .expect("the watchdog's coop is registered");
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a tokio runtime");
    let wrapped = WrappedEnv::new(|_| {}).expect("an environment");
    let env = wrapped.environment().clone();

    let alerts = env.create_mchain(MChainParams::unbounded().name("alerts"));
    let aggregator = env
        .introduce_coop(|c| {
            c.add_agent(Aggregator {
                alerts: alerts.clone(),
                summary: Summary::default(),
            })
        })
        .expect("the aggregator's coop");
    let cancelled = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let mut coop = env.make_coop();
        coop.add_agent(Watchdog {
            rt: rt.handle().clone(),
            cancelled: cancelled.clone(),
        });
        env.register_coop(coop).expect("the watchdog's coop")
    };

    let summary = rt.block_on(async {
        // The alert reader: a `Stream` over the mchain, ending when it is closed.
        let reader = tokio::spawn({
            let alerts = alerts.clone();
            async move {
                let mut stream = alerts.stream();
                let mut seen = 0u64;
                while let Some(m) =
                    std::future::poll_fn(|cx| Pin::new(&mut stream).poll_next(cx)).await
                {
                    if let Some(text) = m.downcast_ref::<String>() {
                        seen += 1;
                        if seen <= 3 {
                            println!("alert: {text}");
                        }
                    }
                }
                seen
            }
        });

        // The sensors: timer-driven async tasks feeding the aggregator.
        let sensors: Vec<_> = (0..SENSORS)
            .map(|sensor| {
                let to = aggregator.clone();
                tokio::spawn(async move {
                    let mut every =
                        tokio::time::interval(Duration::from_millis(2 + u64::from(sensor)));
                    for tick in 0..TICKS {
                        every.tick().await;
                        let value = u64::from((tick * 7 + sensor * 13) % 41);
                        send(&to, Reading { sensor, value }).expect("the aggregator lives");
                    }
                })
            })
            .collect();

        // The dashboard: asks while the sensors tick on this same thread.
        for round in 1..=3 {
            tokio::time::sleep(Duration::from_millis(25)).await;
            let s = request_reply::<Query, Summary>(&aggregator, Duration::from_secs(10), Query)
                .await
                .expect("the aggregator answers");
            println!(
                "dashboard {round}: {} readings, sum {}, {} alerts",
                s.readings, s.sum, s.alerts
            );
        }

        // The watchdog's coop ends long before its deadline: its future is cancelled
        // (dropped by this runtime soon after).
        watchdog.deregister(DeregReason::Normal);
        let give_up = tokio::time::Instant::now() + Duration::from_secs(10);
        while !cancelled.load(Ordering::SeqCst) && tokio::time::Instant::now() < give_up {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        println!(
            "watchdog gone; its future dropped: {}",
            cancelled.load(Ordering::SeqCst)
        );
        for sensor in sensors {
            sensor.await.expect("a sensor task");
        }
        let last = request_reply::<Query, Summary>(&aggregator, Duration::from_secs(10), Query)
            .await
            .expect("the aggregator answers");
        alerts.close(CloseMode::RetainContent);
        let seen = reader.await.expect("the alert reader");
        assert_eq!(seen, last.alerts, "every alert read once");

        // Stop the environment and await its end without blocking the runtime.
        env.stop();
        env.finished().await;
        last
    });

    assert_eq!(summary.readings, u64::from(SENSORS * TICKS));
    assert!(
        cancelled.load(Ordering::SeqCst),
        "the watchdog's future was dropped with its coop"
    );
    println!(
        "done: {} readings, {} alerts; the watchdog's pending future was cancelled",
        summary.readings, summary.alerts
    );
    wrapped.stop_then_join().expect("a clean stop");
}
