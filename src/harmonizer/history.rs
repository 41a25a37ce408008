//! A per-second history of a cumulative figure (YDB's `TValueHistory<N>`).
//!
//! The harmonizer reads cumulative counters (seconds of CPU, seconds not parked) at
//! irregular instants. A [`ValueHistory`] spreads each increase evenly over the time it
//! covers and keeps the amounts of the last `N` whole seconds in a ring, plus a partial
//! second (the "tail"). From it come the `N`-second average, the last second's amount, and
//! the largest and smallest whole second.
//!
//! Rules (YDB's, restated):
//! 1. The first reading only sets the starting point; so does a reading earlier than the
//!    previous one (time went backwards: the ring is cleared).
//! 2. A gap longer than `N` seconds fills every slot with the gap's mean per second.
//! 3. A gap of zero adds the increase to the tail.
//! 4. Otherwise the increase is split proportionally to time: each completed second
//!    closes its slot, the remainder stays in the tail.
//!
//! Departure: a cumulative value that *decreases* (a restarted thread slot) is taken as a
//! new starting point for the value (no negative amount is recorded); YDB records the
//! negative difference.

/// Microseconds in one second: the history's time unit is the microsecond.
const SECOND_US: u64 = 1_000_000;

/// A per-second history of a cumulative value over the last `N` seconds.
///
/// Fed with [`register`](Self::register) (an instant in microseconds and the cumulative
/// value, e.g. seconds of CPU used so far), it answers averages per second.
///
/// # Examples
///
/// ```
/// use agentbox::harmonizer::ValueHistory;
///
/// let mut cpu = ValueHistory::<8>::new();
/// cpu.register(0, 0.0);
/// // 0.5 s of CPU in each of the next 4 seconds.
/// cpu.register(4_000_000, 2.0);
/// assert!((cpu.avg_last_second() - 0.5).abs() < 1e-9);
/// assert!((cpu.max() - 0.5).abs() < 1e-9);
/// // The 8-second average counts the 4 empty seconds before.
/// assert!((cpu.avg() - 0.25).abs() < 1e-9);
/// ```
#[derive(Debug, Clone)]
pub struct ValueHistory<const N: usize> {
    slots: [f64; N],
    next: usize,
    last_ts: Option<u64>,
    last_value: f64,
    tail_value: f64,
    tail_us: u64,
    /// Time covered since the starting point, capped at `N` seconds.
    covered_us: u64,
}

impl<const N: usize> Default for ValueHistory<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> ValueHistory<N> {
    /// An empty history (every second 0, no starting point yet).
    ///
    /// # Panics
    ///
    /// If `N` is 0 (checked at compile time when the constant is evaluated).
    pub const fn new() -> Self {
        const { assert!(N > 0, "a ValueHistory needs at least one slot") };
        Self {
            slots: [0.0; N],
            next: 0,
            last_ts: None,
            last_value: 0.0,
            tail_value: 0.0,
            tail_us: 0,
            covered_us: 0,
        }
    }

    /// Records the cumulative `value` read at `ts_us` (microseconds, any fixed origin).
    pub fn register(&mut self, ts_us: u64, value: f64) {
        let last_ts = match self.last_ts {
            Some(last) if ts_us >= last => last,
            _ => {
                // First reading, or time went backwards: start again from here.
                *self = Self::new();
                self.last_ts = Some(ts_us);
                self.last_value = value;
                return;
            }
        };
        self.last_ts = Some(ts_us);
        let last_value = std::mem::replace(&mut self.last_value, value);
        // A decreasing cumulative value is a new origin, not a negative amount.
        let mut d_value = (value - last_value).max(0.0);
        let mut d_ts = ts_us - last_ts;
        self.covered_us = self
            .covered_us
            .saturating_add(d_ts)
            .min(N as u64 * SECOND_US);
        if d_ts > N as u64 * SECOND_US {
            let per_second = d_value * SECOND_US as f64 / d_ts as f64;
            self.slots = [per_second; N];
            self.tail_value = 0.0;
            self.tail_us = 0;
            return;
        }
        if d_ts == 0 {
            self.tail_value += d_value;
            return;
        }
        while d_ts > 0 {
            if self.tail_us + d_ts < SECOND_US {
                self.tail_us += d_ts;
                self.tail_value += d_value;
                break;
            }
            let to_close = SECOND_US - self.tail_us;
            let part = d_value * to_close as f64 / d_ts as f64;
            d_ts -= to_close;
            d_value -= part;
            self.slots[self.next] = self.tail_value + part;
            self.next = (self.next + 1) % N;
            self.tail_value = 0.0;
            self.tail_us = 0;
        }
    }

    /// The last cumulative value registered (0 before the first).
    pub(crate) fn last_value(&self) -> f64 {
        self.last_value
    }

    /// The slot `back` whole seconds ago (1 = the last completed second).
    fn slot(&self, back: usize) -> f64 {
        self.slots[(self.next + N - back % N) % N]
    }

    /// The mean per second over the last `seconds` seconds *including* the partial second:
    /// the tail, the whole seconds before it, and the part of the oldest second that the
    /// tail has not yet replaced. `seconds` is capped at `N`; 0 gives the tail alone.
    pub fn avg_with_tail(&self, seconds: usize) -> f64 {
        let seconds = seconds.min(N);
        if seconds == 0 {
            return self.tail_value;
        }
        let mut sum = self.tail_value;
        for back in 1..seconds {
            sum += self.slot(back);
        }
        let uncovered = (SECOND_US - self.tail_us) as f64 / SECOND_US as f64;
        sum += self.slot(seconds) * uncovered;
        sum / seconds as f64
    }

    /// The mean per second over the last `seconds` *whole* seconds (capped at `N`).
    pub fn avg_whole(&self, seconds: usize) -> f64 {
        let seconds = seconds.clamp(1, N);
        (1..=seconds).map(|b| self.slot(b)).sum::<f64>() / seconds as f64
    }

    /// The mean per second over the whole window (`N` seconds, tail included): YDB's
    /// `GetAvgPart`.
    pub fn avg(&self) -> f64 {
        self.avg_with_tail(N)
    }

    /// The last second, tail included: YDB's `GetAvgPartForLastSeconds<true>(1)` ("LS").
    pub fn avg_last_second(&self) -> f64 {
        self.avg_with_tail(1)
    }

    /// Like [`avg_with_tail`](Self::avg_with_tail), but over the time covered since the
    /// starting point when that is shorter than the window: a history started 300 ms ago
    /// averages over those 300 ms, not over a window padded with seconds it never saw
    /// (which [`avg_with_tail`](Self::avg_with_tail) counts as 0). 0 before any time is
    /// covered. Equal to [`avg_with_tail`](Self::avg_with_tail) once the window is covered.
    ///
    /// ```
    /// use agentbox::harmonizer::ValueHistory;
    ///
    /// let mut busy = ValueHistory::<8>::new();
    /// busy.register(0, 0.0);
    /// busy.register(300_000, 0.3); // busy all of the first 300 ms
    /// assert!((busy.avg_last_second() - 0.3).abs() < 1e-9);
    /// assert!((busy.avg_covered(1) - 1.0).abs() < 1e-9);
    /// assert!((busy.avg_covered(8) - 1.0).abs() < 1e-9);
    /// ```
    pub fn avg_covered(&self, seconds: usize) -> f64 {
        let seconds = seconds.clamp(1, N);
        let window_us = seconds as u64 * SECOND_US;
        if self.covered_us >= window_us {
            return self.avg_with_tail(seconds);
        }
        if self.covered_us == 0 {
            return 0.0;
        }
        self.avg_with_tail(seconds) * window_us as f64 / self.covered_us as f64
    }

    /// The time covered since the starting point, in microseconds, capped at `N` seconds.
    pub fn covered_us(&self) -> u64 {
        self.covered_us
    }

    /// The largest whole second of the window.
    pub fn max(&self) -> f64 {
        (1..=N).map(|b| self.slot(b)).fold(f64::MIN, f64::max)
    }

    /// The smallest whole second of the window.
    pub fn min(&self) -> f64 {
        (1..=N).map(|b| self.slot(b)).fold(f64::MAX, f64::min)
    }
}
