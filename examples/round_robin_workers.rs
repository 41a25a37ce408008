//! N jobs spread over M workers through a round-robin mbox.
//!
//! Each job goes to exactly one worker, the next in turn, so every worker gets N / M of
//! them. Prints how many each worker handled.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use agentbox::dispatcher::thread_pool;
use agentbox::prelude::*;
use agentbox::{BindParams, Fifo};
use agentbox_extra::round_robin;

const JOBS: u32 = 1200;
const WORKERS: u32 = 4;

struct Job(u32);

struct Worker {
    id: u32,
    jobs: Mbox,
    handled: Arc<Mutex<BTreeMap<u32, u32>>>,
    total: Arc<Mutex<u32>>,
}

impl Agent for Worker {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe(&self.jobs.clone())
            .event(|a: &mut Self, ctx, job: &Job| {
                let _checksum = job.0.wrapping_mul(2654435761); // the "work"
                *a.handled.lock().unwrap().entry(a.id).or_insert(0) += 1;
                let mut total = a.total.lock().unwrap();
                *total += 1;
                if *total == JOBS {
                    ctx.environment().stop();
                }
            })?;
        Ok(())
    }
}

fn main() {
    let handled = Arc::new(Mutex::new(BTreeMap::new()));
    let h = handled.clone();
    Environment::launch(move |env| {
        let jobs = round_robin::create(env);
        let pool = thread_pool::Builder::new().threads(2).build().unwrap();
        let total = Arc::new(Mutex::new(0));
        // Individual FIFO: each worker has its own queue on the pool, so workers run in
        // parallel. With the default cooperation FIFO, the agents of one coop share one
        // queue that one pool thread serves at a time: four workers, one thread busy.
        let binder = pool.binder_with(BindParams::new().fifo(Fifo::Individual));
        env.introduce_coop(|coop| {
            coop.set_binder(binder);
            for id in 0..WORKERS {
                coop.add_agent(Worker {
                    id,
                    jobs: jobs.clone(),
                    handled: h.clone(),
                    total: total.clone(),
                });
            }
        })
        .unwrap();
        for i in 0..JOBS {
            send(&jobs, Job(i)).unwrap();
        }
    })
    .unwrap();
    for (worker, n) in handled.lock().unwrap().iter() {
        println!("worker {worker}: {n} jobs");
    }
}
