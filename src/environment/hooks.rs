//! The environment's side of the hooks the lower layers define: what the mboxes
//! ([`EnvSide`](super::handle::EnvSide)), the timers ([`TimerHome`]), the stats controller
//! ([`StatsHome`]) and the coop registry ([`Slotted`](super::registry::Slotted)) need of it.

use std::sync::Arc;

use super::handle::{self, Environment};
use super::{registry, EnvInner};
use crate::coop::CoopInner;
use crate::drops::DropCounters;
use crate::stats::{Quantity, StatsCore, StatsHome};
use crate::timer::{TimerHome, TimerThread};

impl registry::Slotted for CoopInner {
    #[inline]
    fn registry_slot(&self) -> &std::sync::atomic::AtomicU32 {
        &self.registry_slot
    }
}

impl handle::EnvSide for handle::EnvLayer {
    type Inner = EnvInner;
    #[inline]
    fn drops(inner: &EnvInner) -> &Arc<DropCounters> {
        &inner.drops
    }
    fn log_error(inner: &EnvInner, line: &str) {
        match &inner.logger {
            Some(l) => l(line),
            None => eprintln!("agentbox: {line}"),
        }
    }
}

impl StatsHome for EnvInner {
    fn env_id(&self) -> u64 {
        self.id
    }
    fn stats(&self) -> &StatsCore {
        &self.stats
    }
    fn own_quantities(env: &Environment, send: &mut dyn FnMut(Quantity)) {
        send(Quantity {
            prefix: "coop_repository".into(),
            suffix: "coop.count",
            value: env.coop_count(),
        });
        send(Quantity {
            prefix: "mbox_repository".into(),
            suffix: "named_mbox.count",
            value: env.named_mbox_count(),
        });
        send(Quantity {
            prefix: "timer_thread".into(),
            suffix: "timer.count",
            value: env.pending_timers(),
        });
        let drops = env.drop_counts();
        for (suffix, n) in [
            ("no_subscribers.count", drops.no_subscribers),
            ("filtered.count", drops.filtered),
            ("over_limit.count", drops.over_limit),
            ("no_handler.count", drops.no_handler),
            ("at_deregistration.count", drops.at_deregistration),
            ("redirection_depth.count", drops.redirection_depth),
            ("refused.count", drops.refused),
            ("receiver_finished.count", drops.receiver_finished),
            ("unreachable.count", drops.unreachable),
        ] {
            send(Quantity {
                prefix: "drops".into(),
                suffix,
                value: usize::try_from(n).unwrap_or(usize::MAX),
            });
        }
    }
}

impl TimerHome for EnvInner {
    #[inline]
    fn timers(&self) -> &TimerThread {
        &self.timers
    }
}
