//! The proxy base delegates subscriptions, filters and delivery, and ends forwarding loops.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use agentbox::prelude::*;
use agentbox::{SendError, MAX_REDIRECTION_DEPTH};
use agentbox_extra::proxy::{ProxyHooks, ProxyMbox};
use parking_lot::Mutex;

struct Plain;
impl ProxyHooks for Plain {}

struct Listener {
    source: Mbox,
    got: Arc<Mutex<Vec<u32>>>,
}

impl Agent for Listener {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.set_delivery_filter(&self.source, |n: &u32| n.is_multiple_of(2))?;
        ctx.subscribe(&self.source)
            .event(|a: &mut Self, ctx, n: &u32| {
                a.got.lock().push(*n);
                if *n == 4 {
                    ctx.deregister_coop(DeregReason::Normal);
                }
            })?;
        Ok(())
    }
}

#[test]
fn subscriptions_and_filters_through_a_proxy_reach_the_inner_mbox() {
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    Environment::launch(move |env| {
        let inner = env.create_mbox();
        let proxy = ProxyMbox::wrap(inner.clone(), Plain);
        assert_eq!(proxy.id(), inner.id());
        assert_eq!(proxy.name(), format!("proxy({})", inner.name()));
        env.introduce_coop(|coop| {
            coop.add_agent(Listener {
                source: proxy.clone(),
                got: g,
            });
        })
        .unwrap();
        for n in 1..=4u32 {
            send(&proxy, n).unwrap();
        }
    })
    .unwrap();
    assert_eq!(*got.lock(), [2, 4]);
}

struct Loop {
    next: Mutex<Option<Mbox>>,
    hops: Arc<AtomicUsize>,
}
struct LoopHook(Arc<Loop>);
impl ProxyHooks for LoopHook {
    fn deliver(
        &self,
        _inner: &Mbox,
        msg: agentbox::Message,
        depth: agentbox::RedirectionDepth,
        mode: agentbox::DeliveryMode,
    ) -> Result<(), SendError> {
        self.0.hops.fetch_add(1, Ordering::SeqCst);
        let next = self.0.next.lock().clone().expect("wired");
        next.deliver_with(msg, depth + 1, mode)
    }
}

#[test]
fn a_forwarding_loop_ends_at_the_redirection_limit() {
    Environment::launch(|env| {
        let hops = Arc::new(AtomicUsize::new(0));
        let a = Arc::new(Loop {
            next: Mutex::new(None),
            hops: hops.clone(),
        });
        let b = Arc::new(Loop {
            next: Mutex::new(None),
            hops: hops.clone(),
        });
        let ma = ProxyMbox::wrap(env.create_mbox(), LoopHook(a.clone()));
        let mb = ProxyMbox::wrap(env.create_mbox(), LoopHook(b.clone()));
        *a.next.lock() = Some(mb.clone());
        *b.next.lock() = Some(ma.clone());
        let r = send(&ma, 1u8);
        assert!(
            matches!(r, Err(SendError::RedirectionDepthExceeded { .. })),
            "{r:?}"
        );
        assert_eq!(hops.load(Ordering::SeqCst), MAX_REDIRECTION_DEPTH as usize);
        // Break the Arc cycle.
        *a.next.lock() = None;
        *b.next.lock() = None;
    })
    .unwrap();
}
