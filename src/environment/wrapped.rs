//! An environment running on a thread of its own.

use std::thread::JoinHandle;

use super::{EnvParams, Environment, LaunchError};

/// An environment that runs on its own thread and is stopped and joined when dropped.
///
/// Autoshutdown is off: the environment runs until [`stop_then_join`](Self::stop_then_join)
/// or drop, even with no coops.
///
/// # Examples
///
/// ```
/// use agentbox::prelude::*;
/// use agentbox::WrappedEnv;
///
/// struct Echo;
/// impl Agent for Echo {
///     fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
///         ctx.subscribe_self().event(|_: &mut Self, _, n: &std::sync::mpsc::Sender<u32>| {
///             n.send(7).unwrap();
///         })?;
///         Ok(())
///     }
/// }
///
/// let wrapped = WrappedEnv::new(|_env| {}).unwrap();
/// let echo = wrapped.environment().introduce_coop(|coop| coop.add_agent(Echo)).unwrap();
/// let (tx, rx) = std::sync::mpsc::channel::<u32>();
/// send(&echo, tx).unwrap();
/// assert_eq!(rx.recv().unwrap(), 7);
/// wrapped.stop_then_join().unwrap();
/// ```
pub struct WrappedEnv {
    env: Environment,
    thread: Option<JoinHandle<Result<(), LaunchError>>>,
}

impl std::fmt::Debug for WrappedEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WrappedEnv")
            .field("running", &self.thread.is_some())
            .finish_non_exhaustive()
    }
}

impl WrappedEnv {
    /// Starts an environment with default parameters (autoshutdown off) on a new thread;
    /// `init` runs there first.
    ///
    /// # Errors
    ///
    /// [`LaunchError`] if the environment cannot start or `init` panics.
    pub fn new<F>(init: F) -> Result<Self, LaunchError>
    where
        F: FnOnce(&Environment) + Send + 'static,
    {
        Self::with_params(EnvParams::new(), init)
    }

    /// As [`new`](Self::new), with parameters (autoshutdown is turned off regardless).
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    pub fn with_params<F>(params: EnvParams, init: F) -> Result<Self, LaunchError>
    where
        F: FnOnce(&Environment) + Send + 'static,
    {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let thread = std::thread::Builder::new()
            .name("agentbox-wrapped".into())
            .spawn(move || {
                Environment::launch_with(params.disable_autoshutdown(), move |env| {
                    init(env);
                    let _ = tx.send(env.clone());
                })
            })
            .map_err(LaunchError::Spawn)?;
        match rx.recv() {
            Ok(env) => Ok(WrappedEnv {
                env,
                thread: Some(thread),
            }),
            Err(_) => match thread.join() {
                Ok(Err(e)) => Err(e),
                Ok(Ok(())) => Err(LaunchError::InitPanicked("init did not complete".into())),
                Err(p) => Err(LaunchError::InitPanicked(crate::exception::panic_message(
                    &p,
                ))),
            },
        }
    }

    /// The running environment.
    pub fn environment(&self) -> &Environment {
        &self.env
    }

    /// Stops the environment and waits for its thread.
    ///
    /// # Errors
    ///
    /// What the environment's launch returned.
    pub fn stop_then_join(mut self) -> Result<(), LaunchError> {
        self.join()
    }

    fn join(&mut self) -> Result<(), LaunchError> {
        self.env.stop();
        match self.thread.take() {
            Some(t) => t.join().unwrap_or_else(|p| {
                Err(LaunchError::InitPanicked(crate::exception::panic_message(
                    &p,
                )))
            }),
            None => Ok(()),
        }
    }
}

impl Drop for WrappedEnv {
    fn drop(&mut self) {
        let _ = self.join();
    }
}
