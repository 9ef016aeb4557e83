//! Time as a plain number of nanoseconds.
//!
//! Policies never read a clock: every hook receives `now`. In the simulator `now` is virtual time
//! that starts at zero; in the real engine it is a monotonic wall-clock reading. Both are
//! nanoseconds since an arbitrary epoch, so the same policy code runs in either world.

/// A point in time or a duration, in nanoseconds.
pub type Nanos = u64;

/// One microsecond in nanoseconds.
pub const MICROSECOND: Nanos = 1_000;
/// One millisecond in nanoseconds.
pub const MILLISECOND: Nanos = 1_000_000;
/// One second in nanoseconds.
pub const SECOND: Nanos = 1_000_000_000;

/// Converts whole milliseconds to nanoseconds, saturating instead of overflowing.
pub const fn from_millis(milliseconds: u64) -> Nanos {
    milliseconds.saturating_mul(MILLISECOND)
}

/// Converts whole microseconds to nanoseconds, saturating instead of overflowing.
pub const fn from_micros(microseconds: u64) -> Nanos {
    microseconds.saturating_mul(MICROSECOND)
}
