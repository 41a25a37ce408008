//! `SystemSetup::harmonize`: the harmonizer over an actor system's pools.

use agentbox::actors::{ActorSystem, PoolConfig, SystemSetup};
use agentbox::harmonizer::Harmonizer;
use agentbox::WrappedEnv;

#[test]
fn a_system_without_elastic_pools_has_no_harmonizer() {
    let wrapped = WrappedEnv::new(|_| {}).unwrap();
    let setup = SystemSetup::new(1)
        .pool(PoolConfig::new(PoolConfig::SYSTEM))
        .pool(PoolConfig::new(PoolConfig::USER).threads(2))
        .harmonize(Harmonizer::builder().cpu_budget(2.0));
    let system = ActorSystem::start(wrapped.environment(), setup).unwrap();
    assert!(system.harmonizer().is_none());
    let plain = ActorSystem::start(wrapped.environment(), SystemSetup::new(2)).unwrap();
    assert!(plain.harmonizer().is_none());
    wrapped.stop_then_join().unwrap();
}
