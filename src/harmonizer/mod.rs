//! YDB's harmonizer: threads that move between pools to where the load is.
//!
//! Placeholder docs, completed with the driver.

mod driver;
mod history;
mod model;
mod shared;
mod stats;
#[cfg(test)]
mod tests;

pub use driver::{Harmonizer, HarmonizerBuilder, HarmonizerError};
pub use history::ValueHistory;
pub use stats::{HarmonizerStats, OperationCounts, PoolHarmonizerStats};
