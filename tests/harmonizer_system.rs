//! `SystemSetup::harmonize`: the harmonizer over an actor system's pools.

use std::time::Duration;

use agentbox::actors::{ActorSystem, PoolConfig, SystemSetup};
use agentbox::harmonizer::Harmonizer;
use agentbox::WrappedEnv;

#[test]
fn a_system_without_elastic_pools_has_no_harmonizer() {
    let wrapped = WrappedEnv::new(|_| {}).unwrap();
    let setup = SystemSetup::new(1)
        .pool(PoolConfig::new(PoolConfig::SYSTEM))
        .harmonize(Harmonizer::builder().cpu_budget(2.0));
    let system = ActorSystem::start(wrapped.environment(), setup).unwrap();
    assert!(system.harmonizer().is_none());
    let plain = ActorSystem::start(wrapped.environment(), SystemSetup::new(2)).unwrap();
    assert!(plain.harmonizer().is_none());
    wrapped.stop_then_join().unwrap();
}

#[test]
fn the_elastic_pools_of_a_system_are_harmonized_and_their_stats_show_it() {
    let wrapped = WrappedEnv::new(|_| {}).unwrap();
    let setup = SystemSetup::new(1)
        .pool(PoolConfig::new(PoolConfig::SYSTEM))
        .pool(
            PoolConfig::new("Interactive")
                .min_threads(1)
                .default_threads(1)
                .max_threads(3)
                .priority(1),
        )
        .pool(
            PoolConfig::new("Batch")
                .min_threads(1)
                .default_threads(2)
                .max_threads(3),
        )
        .harmonize(Harmonizer::builder().cpu_budget(3.0));
    let system = ActorSystem::start(wrapped.environment(), setup).unwrap();
    let h = system.harmonizer().expect("two elastic pools");
    // The one-thread System pool is not elastic: only the two others are driven.
    let names: Vec<_> = h.pools().iter().map(|p| p.name().to_owned()).collect();
    assert_eq!(names.len(), 2);
    assert!(names[0].ends_with("Interactive") && names[1].ends_with("Batch"));
    let st = h.stats();
    assert_eq!(st.total_cores, 3.0);
    assert_eq!(st.pools[0].priority, 1);
    assert_eq!(
        (
            st.pools[1].min_thread_count,
            st.pools[1].default_thread_count,
            st.pools[1].max_thread_count
        ),
        (1, 2, 3)
    );
    // Two steps by hand (the idle pools may shrink, never leave their bounds); the
    // system's PoolStats show the harmonizer's figures of each pool.
    h.harmonize_at(h.origin() + Duration::from_secs(1));
    h.harmonize_at(h.origin() + Duration::from_secs(2));
    assert!(h.stats().iterations >= 2);
    for id in [1, 2] {
        let ps = system.pool_stats(id).unwrap();
        assert!(ps.harmonizer.iterations >= 2, "{ps:?}");
        assert!((ps.min_threads..=ps.max_threads).contains(&ps.current_threads));
        assert!(ps.potential_max_threads_milli >= 1000);
    }
    wrapped.stop_then_join().unwrap();
}
