//! What a stats source reports: one [`Quantity`] per figure, framed by [`StatsStarted`]
//! and [`StatsFinished`].

use std::sync::Arc;

/// One measured quantity, sent to the stats mbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quantity {
    /// What is measured, e.g. `disp/one_thread/io` (see the module docs).
    pub prefix: String,
    /// Which quantity of it, e.g. `agent.count`.
    pub suffix: &'static str,
    /// The value.
    pub value: usize,
}

/// Sent before the quantities of one distribution.
#[derive(Clone, Copy, Debug)]
pub struct StatsStarted;

/// Sent after the quantities of one distribution.
#[derive(Clone, Copy, Debug)]
pub struct StatsFinished;

/// Something that reports quantities: a dispatcher, the coop registry, …
pub(crate) trait StatsSource: Send + Sync {
    /// Hands each quantity to `out`, which only collects them (the controller sends them
    /// once every source is done): `out` may be called under the source's locks.
    fn distribute(&self, out: &mut dyn FnMut(Quantity));
}

/// A dispatcher's source, kept by its binders and registered weakly with each environment
/// that binds an agent to it.
pub(crate) type SourceRef = Arc<dyn StatsSource>;

/// A [`Quantity`] of `prefix` (a dispatcher's figures are made this way).
pub(crate) fn quantity(prefix: &str, suffix: &'static str, value: usize) -> Quantity {
    Quantity {
        prefix: prefix.to_owned(),
        suffix,
        value,
    }
}
