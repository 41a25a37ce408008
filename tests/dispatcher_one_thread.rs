//! The behavioural suite on `one_thread`: the environment's default dispatcher and a
//! dedicated one.

mod common;

dispatcher_suite!(default_dispatcher, |env| env.default_binder());
dispatcher_suite!(dedicated, |_env| {
    agentbox::dispatcher::one_thread::Builder::new()
        .build()
        .expect("build one_thread")
        .binder()
});
