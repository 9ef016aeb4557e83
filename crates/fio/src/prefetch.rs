//! Cache hints: asking the CPU to start loading memory that is about to be read.
//!
//! With a thousand jobs, a job's state (its counters, its workload generator, its statistics)
//! has left the CPU's caches by the time its next I/O completes. Recording the completion and
//! drawing the next I/O read some twenty cache lines of it, and their misses, taken one after
//! the other as the code reaches them, stall the simulation. The simulator knows whose I/O it
//! is earlier, when the device completes it, before the completion is delivered and recorded;
//! there it asks for those lines all at once ([`crate::driver::JobState::prefetch`]), so that
//! their misses overlap. A hint changes no result; off x86-64 it does nothing.

/// Asks the CPU to bring the cache line that holds `value` into its first-level cache.
#[inline(always)]
pub(crate) fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch changes nothing the program can see and never faults, whatever the
    // address; this one is a live reference's.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            (value as *const T).cast::<i8>(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}
