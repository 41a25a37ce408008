//! Registration racing deregistration and `stop()`: no hang, no lost `on_finish`, and
//! only the documented registration errors.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use agentbox::dispatcher::active_obj;
use agentbox::prelude::*;
use agentbox::{EnvParams, RegisterError};
use common::within_patience;

struct Counted {
    started: Arc<AtomicUsize>,
    finished: Arc<AtomicUsize>,
    quit_at_start: bool,
}

impl Agent for Counted {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self().event(|_: &mut Self, ctx, n: &u32| {
            if *n > 0 {
                send(&ctx.direct_mbox(), n - 1).unwrap();
            }
        })?;
        send(&ctx.direct_mbox(), 50u32).unwrap();
        Ok(())
    }
    fn on_start(&mut self, ctx: &mut Context<Self>) {
        self.started.fetch_add(1, Ordering::SeqCst);
        if self.quit_at_start {
            ctx.deregister_coop(DeregReason::Normal);
        }
    }
    fn on_finish(&mut self, _ctx: &mut Context<Self>) {
        self.finished.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn registering_while_deregistering_and_stopping_loses_no_agent() {
    for round in 0..10 {
        within_patience(move || {
            let started = Arc::new(AtomicUsize::new(0));
            let finished = Arc::new(AtomicUsize::new(0));
            let unexpected = Arc::new(AtomicUsize::new(0));
            let (s, f, u) = (started.clone(), finished.clone(), unexpected.clone());
            Environment::launch_with(EnvParams::new().disable_autoshutdown(), move |env| {
                let disp = active_obj::Builder::new().build().unwrap();
                let threads: Vec<_> = (0..3)
                    .map(|t| {
                        let (env, s, f, u) = (env.clone(), s.clone(), f.clone(), u.clone());
                        let binder = disp.binder();
                        std::thread::spawn(move || {
                            for i in 0..40 {
                                let make = |coop: &mut Coop| {
                                    if (i + t) % 2 == 0 {
                                        coop.set_binder(binder.clone());
                                    }
                                    for k in 0..3 {
                                        coop.add_agent(Counted {
                                            started: s.clone(),
                                            finished: f.clone(),
                                            quit_at_start: k == 0 && i % 3 == 0,
                                        });
                                    }
                                };
                                let mut parent = env.make_coop();
                                make(&mut parent);
                                let parent = match env.register_coop(parent) {
                                    Ok(p) => p,
                                    Err(RegisterError::ShuttingDown) => return,
                                    Err(_) => {
                                        u.fetch_add(1, Ordering::SeqCst);
                                        return;
                                    }
                                };
                                let mut child = env.make_child_coop(&parent);
                                make(&mut child);
                                match env.register_coop(child) {
                                    Ok(_)
                                    | Err(RegisterError::ShuttingDown)
                                    | Err(RegisterError::ParentNotRegistered) => {}
                                    Err(_) => {
                                        u.fetch_add(1, Ordering::SeqCst);
                                    }
                                }
                                if i % 4 == 1 {
                                    parent.deregister(DeregReason::User(i));
                                }
                            }
                        })
                    })
                    .collect();
                // Stop somewhere in the middle of the registrations.
                while s.load(Ordering::SeqCst) < 30 + round * 10 {
                    std::thread::yield_now();
                }
                env.stop();
                for t in threads {
                    t.join().unwrap();
                }
            })
            .unwrap();
            assert_eq!(unexpected.load(Ordering::SeqCst), 0);
            assert_eq!(
                started.load(Ordering::SeqCst),
                finished.load(Ordering::SeqCst),
                "every agent that started has finished"
            );
        });
    }
}
