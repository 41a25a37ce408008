//! Late subscribers get the current configuration from a retained-message mbox.
//!
//! A configuration source publishes three versions; a reader that joins after all of them
//! immediately gets the latest (and only that), then every later version as it comes.

use agentbox::prelude::*;
use agentbox_extra::retained;

#[derive(Debug)]
struct Config {
    version: u32,
    workers: u32,
}

struct Reader {
    config: Mbox,
    seen: Vec<u32>,
}

impl Agent for Reader {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe(&self.config.clone())
            .event(|a: &mut Self, ctx, c: &Config| {
                println!(
                    "reader: configuration v{} ({} workers)",
                    c.version, c.workers
                );
                a.seen.push(c.version);
                if c.version == 4 {
                    ctx.deregister_coop(DeregReason::Normal);
                }
            })?;
        Ok(())
    }
    fn on_finish(&mut self, _ctx: &mut Context<Self>) {
        println!("reader saw versions {:?}", self.seen);
    }
}

fn main() {
    Environment::launch(|env| {
        let config = retained::create(env);
        for version in 1..=3 {
            println!("source: publishing v{version}");
            send(
                &config,
                Config {
                    version,
                    workers: version * 2,
                },
            )
            .unwrap();
        }
        println!("source: a reader joins");
        env.introduce_coop(|coop| {
            coop.add_agent(Reader {
                config: config.clone(),
                seen: Vec::new(),
            });
        })
        .unwrap();
        println!("source: publishing v4");
        send(
            &config,
            Config {
                version: 4,
                workers: 8,
            },
        )
        .unwrap();
    })
    .unwrap();
}
