//! Compile-time checks of the public types: auto traits pinned, misuse rejected.
//!
//! A `Mutable<T>` is a type name, not a value: it cannot be built, so it cannot be sent as
//! an immutable message.
//!
//! ```compile_fail
//! let _m = agentbox::Mutable::<u32>(std::marker::PhantomData);
//! ```
//!
//! Immutable messages are shared between threads, so they must be `Sync`:
//!
//! ```compile_fail
//! use agentbox::prelude::*;
//! fn f(mbox: &Mbox) {
//!     let not_sync = std::cell::Cell::new(1u8);
//!     let _ = send(mbox, not_sync);
//! }
//! ```
//!
//! …but a mutable message (one receiver) need only be `Send`:
//!
//! ```
//! use agentbox::prelude::*;
//! fn f(mbox: &Mbox) {
//!     let _ = send_mutable(mbox, std::cell::Cell::new(1u8));
//! }
//! ```
//!
//! Handlers take the agent by `&mut`: a handler of another agent type does not fit.
//!
//! ```compile_fail
//! use agentbox::prelude::*;
//! struct A;
//! struct B;
//! impl Agent for A {
//!     fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
//!         ctx.subscribe_self().event(|_: &mut B, _, _: &u8| {})?;
//!         Ok(())
//!     }
//! }
//! ```
//!
//! A guard whose drop stops something is `#[must_use]`: a harmonizer built and dropped at
//! once (as at the end of `launch`'s closure) would stop before it ran a step.
//!
//! ```compile_fail
//! #![deny(unused_must_use)]
//! use agentbox::dispatcher::thread_pool;
//! use agentbox::harmonizer::Harmonizer;
//! let pool = thread_pool::Builder::new().thread_limits(1, 2, 4).build().unwrap();
//! Harmonizer::builder().dispatcher(&pool).build().unwrap();
//! ```
//!
//! …as is a sink binding (dropping it removes the binding):
//!
//! ```compile_fail
//! #![deny(unused_must_use)]
//! agentbox::SingleSinkBinding::new();
//! ```
//!
//! Kept in a variable or given to the environment, they compile:
//!
//! ```
//! #![deny(unused_must_use)]
//! use agentbox::dispatcher::thread_pool;
//! use agentbox::harmonizer::Harmonizer;
//! agentbox::Environment::launch(|env| {
//!     let pool = thread_pool::Builder::new().thread_limits(1, 2, 4).build().unwrap();
//!     env.keep(Harmonizer::builder().dispatcher(&pool).build().unwrap());
//!     let _binding = agentbox::SingleSinkBinding::new();
//!     env.stop();
//! })
//! .unwrap();
//! ```

#[allow(dead_code)]
fn assert_auto_traits() {
    fn send_sync_clone<T: Send + Sync + Clone>() {}
    fn send_sync<T: Send + Sync>() {}
    send_sync_clone::<crate::Mbox>();
    send_sync_clone::<crate::Environment>();
    send_sync_clone::<crate::State>();
    send_sync_clone::<crate::CoopHandle>();
    send_sync_clone::<crate::AgentRef>();
    send_sync_clone::<crate::Message>();
    send_sync_clone::<crate::DeliveryFilter>();
    send_sync_clone::<crate::Binder>();
    send_sync_clone::<crate::DispatcherHandle>();
    send_sync::<crate::WrappedEnv>();
    fn copy_hash<T: Copy + std::hash::Hash + Eq>() {}
    copy_hash::<crate::MboxId>();
    copy_hash::<crate::AgentId>();
    copy_hash::<crate::MessageType>();
    copy_hash::<crate::Priority>();
}
