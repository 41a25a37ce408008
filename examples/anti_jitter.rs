//! The anti-jitter mbox scenario from the SObjectizer article on custom mboxes.
//!
//! Two agents print the strings they receive: one through its ordinary direct mbox, one
//! through an anti-jitter mbox with a 250 ms threshold. The same delayed strings are sent to
//! both at 125, 250, 400, 500, 700, 750 and 800 ms; the anti-jitter one drops each that comes
//! less than 250 ms after the previous one it let through. Prints:
//!
//! ```text
//! ordinary-mbox: signal received -> 125ms
//! anti-jitter-mbox: signal received -> 125ms
//! ordinary-mbox: signal received -> 250ms
//! ordinary-mbox: signal received -> 400ms
//! anti-jitter-mbox: signal received -> 400ms
//! ordinary-mbox: signal received -> 500ms
//! ordinary-mbox: signal received -> 700ms
//! anti-jitter-mbox: signal received -> 700ms
//! ordinary-mbox: signal received -> 750ms
//! ordinary-mbox: signal received -> 800ms
//! ```

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentbox::prelude::*;
use agentbox_extra::anti_jitter;

/// Prints what arrives in its own direct mbox.
struct OrdinarySubscriber {
    name: &'static str,
}

impl Agent for OrdinarySubscriber {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self().event(|a: &mut Self, _, s: &String| {
            println!("{}: signal received -> {s}", a.name);
        })?;
        Ok(())
    }
}

/// Prints what arrives through its anti-jitter mbox, which it makes over its direct mbox
/// and publishes in `target` for the senders.
struct AntiJitterSubscriber {
    name: &'static str,
    threshold: Duration,
    target: Arc<Mutex<Option<Mbox>>>,
}

impl Agent for AntiJitterSubscriber {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let mbox = anti_jitter::create(ctx.direct_mbox(), self.threshold);
        ctx.subscribe(&mbox).event(|a: &mut Self, _, s: &String| {
            println!("{}: signal received -> {s}", a.name);
        })?;
        *self.target.lock().unwrap() = Some(mbox);
        Ok(())
    }
}

fn main() {
    Environment::launch(|env| {
        let target = Arc::new(Mutex::new(None));
        let ordinary = env
            .introduce_coop(|coop| {
                coop.add_agent(AntiJitterSubscriber {
                    name: "anti-jitter-mbox",
                    threshold: Duration::from_millis(250),
                    target: target.clone(),
                });
                coop.add_agent(OrdinarySubscriber {
                    name: "ordinary-mbox",
                })
            })
            .unwrap();
        // `define` has run during registration: the anti-jitter mbox exists.
        let anti_jitter = target.lock().unwrap().clone().expect("made in define");
        for ms in [125u64, 250, 400, 500, 700, 750, 800] {
            let d = Duration::from_millis(ms);
            send_delayed(&ordinary, d, format!("{ms}ms"))
                .unwrap()
                .detach();
            send_delayed(&anti_jitter, d, format!("{ms}ms"))
                .unwrap()
                .detach();
        }
        std::thread::sleep(Duration::from_millis(1250));
        env.stop();
    })
    .unwrap();
}
