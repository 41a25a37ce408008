//! The OS's CPU time of the calling thread (`CLOCK_THREAD_CPUTIME_ID`).
//!
//! The one `unsafe` call of the elastic pools: std has no per-thread CPU clock, and
//! reading `/proc/thread-self/stat` costs a file open per read. 0 where there is no such
//! clock (non-unix targets, miri).
#![allow(unsafe_code)]

/// Nanoseconds of CPU the calling thread has used, or 0 if unknown.
#[cfg(all(unix, not(miri)))]
pub(crate) fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock_gettime` writes one `timespec` through the pointer, which points to
    // a live, writable, properly aligned local; the clock id is a constant the platform
    // defines. On failure it returns nonzero and `ts` is not read.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut ts) };
    if rc != 0 {
        return 0;
    }
    let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(ts.tv_nsec).unwrap_or(0);
    secs.saturating_mul(1_000_000_000).saturating_add(nanos)
}

/// Nanoseconds of CPU the calling thread has used, or 0 if unknown.
#[cfg(not(all(unix, not(miri))))]
pub(crate) fn thread_cpu_ns() -> u64 {
    0
}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg_attr(miri, ignore)]
    fn cpu_time_grows_while_the_thread_computes() {
        let before = super::thread_cpu_ns();
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(20) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let after = super::thread_cpu_ns();
        if cfg!(unix) {
            assert!(after > before, "{before} -> {after}");
        }
    }
}
