//! How much simulated time a run needs at the least, checked against the simulator's limit
//! before the run starts.
//!
//! A run is refused up front when its jobs are set to go on past
//! [`iosched_core::limits::SIMULATED_TIME_MAX`], with the job and the options that take it there, rather than
//! simulated for minutes of wall time up to the limit and refused then. Every figure here is a
//! lower bound, so a run that could finish in time is never refused:
//!
//! - a job starts no earlier than the low end of its `startdelay`, after every job before its
//!   stonewall has ended;
//! - a `time_based` job runs `ramp_time + runtime`;
//! - a job with a size runs at least as long as its think time takes (a `thinktime` stall after
//!   each `thinktime_blocks` I/Os, counting I/Os at the largest block size) and as its `rate`
//!   or `rate_iops` cap takes when it moves data in one direction only, and no longer than
//!   `ramp_time + runtime` when a runtime is set.

use crate::SimError;
use iosched_core::{time::SECOND, Nanos};
use iosched_fio::{DataDir, JobSpec, RwMode};

/// The least time job `spec` runs for, from its start, moving `bytes_limit` bytes (`None` for a
/// time-based job), and which options set it.
pub(crate) fn least_duration(spec: &JobSpec, bytes_limit: Option<u64>) -> (Nanos, String) {
    let ramp_and_runtime = spec
        .runtime
        .map(|runtime| spec.ramp_time.saturating_add(runtime));
    let Some(bytes) = bytes_limit else {
        return match ramp_and_runtime {
            Some(time) => (time, format!("ramp_time + runtime = {}", seconds(time))),
            None => (0, String::new()),
        };
    };
    let largest_bs = spec.bs.iter().map(|bs| bs.max()).max().unwrap_or(1).max(1);
    let ios = bytes.div_ceil(largest_bs);
    let mut least = (0, String::new());
    if spec.thinktime > 0 && ios > 1 {
        let stalls = (ios - 1) / u64::from(spec.thinktime_blocks.max(1));
        let time = stalls.saturating_mul(spec.thinktime);
        if time > least.0 {
            least = (
                time,
                format!(
                    "thinktime={} after every {} I/O(s), {stalls} times over {ios} I/Os of at \
                     most {largest_bs} bytes = {}",
                    seconds(spec.thinktime),
                    spec.thinktime_blocks.max(1),
                    seconds(time)
                ),
            );
        }
    }
    if let Some(dir) = only_direction(spec.rw) {
        let index = dir as usize;
        let by_rate = [
            (spec.rate[index], bytes, "rate", "bytes/s"),
            (spec.rate_iops[index], ios, "rate_iops", "IOPS"),
        ];
        for (rate, amount, option, unit) in by_rate {
            if rate == 0 {
                continue;
            }
            let time = u64::try_from(u128::from(amount) * u128::from(SECOND) / u128::from(rate))
                .unwrap_or(u64::MAX);
            if time > least.0 {
                least = (
                    time,
                    format!("{amount} at {option}={rate} {unit} = {}", seconds(time)),
                );
            }
        }
    }
    match ramp_and_runtime {
        Some(cap) if cap < least.0 => (cap, format!("ramp_time + runtime = {}", seconds(cap))),
        _ => least,
    }
}

/// The one direction a mode moves data in, if it moves data in one only.
fn only_direction(rw: RwMode) -> Option<DataDir> {
    match rw {
        RwMode::Read | RwMode::RandRead => Some(DataDir::Read),
        RwMode::Write | RwMode::RandWrite => Some(DataDir::Write),
        RwMode::Trim | RwMode::RandTrim => Some(DataDir::Trim),
        _ => None,
    }
}

/// Refuses a run whose jobs (each with the bytes it moves, `None` when time-based) need more
/// than `limit` of simulated time, naming the job and the options that take it there.
pub(crate) fn check(jobs: &[(&JobSpec, Option<u64>)], limit: Nanos) -> Result<(), SimError> {
    // Each segment between stonewalls starts when the one before it has ended.
    let mut segment_start: Nanos = 0;
    let mut segment_end: Nanos = 0;
    for (index, (spec, bytes_limit)) in jobs.iter().enumerate() {
        if index > 0 && spec.stonewall {
            segment_start = segment_end;
        }
        let (duration, why) = least_duration(spec, *bytes_limit);
        let start = segment_start.saturating_add(spec.startdelay.0);
        let end = start.saturating_add(duration);
        segment_end = segment_end.max(end);
        if end >= limit {
            let mut parts = Vec::new();
            if segment_start > 0 {
                parts.push(format!(
                    "it starts after the jobs before its stonewall, {} in",
                    seconds(segment_start)
                ));
            }
            if spec.startdelay.0 > 0 {
                parts.push(format!("startdelay={}", seconds(spec.startdelay.0)));
            }
            if !why.is_empty() {
                parts.push(why);
            }
            return Err(SimError::job(
                spec,
                &format!(
                    "needs at least {} of simulated time ({}), and the simulator's limit is {} \
                     ({} s); shorten the options named, or set a runtime= below the limit",
                    seconds(end),
                    parts.join("; "),
                    seconds(limit),
                    limit / SECOND
                ),
            ));
        }
    }
    Ok(())
}

/// A duration as a person reads it: `1.5 s`, `2 h 30 m`, `7 d`.
pub(crate) fn seconds(nanos: Nanos) -> String {
    let total = nanos / SECOND;
    if total >= 365 * 86_400 {
        return format!("{} years", trim(total as f64 / (365.0 * 86_400.0)));
    }
    if total >= 86_400 {
        let (days, rest) = (total / 86_400, total % 86_400);
        return match rest / 3_600 {
            0 => format!("{days} d"),
            hours => format!("{days} d {hours} h"),
        };
    }
    if total >= 3_600 {
        return match (total % 3_600) / 60 {
            0 => format!("{} h", total / 3_600),
            minutes => format!("{} h {minutes} m", total / 3_600),
        };
    }
    if nanos >= SECOND {
        return format!("{} s", trim(nanos as f64 / SECOND as f64));
    }
    format!("{} ms", trim(nanos as f64 / 1e6))
}

fn trim(value: f64) -> String {
    let text = format!("{value:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use iosched_core::limits;
    use iosched_fio::BlockSize;

    fn job(name: &str) -> JobSpec {
        let mut spec = JobSpec::new(name);
        spec.bs = std::array::from_fn(|_| BlockSize::Fixed(4096));
        spec
    }

    // Regression (issue 11, item 5): runtime=7d is refused before any simulation, naming the
    // job, the options and the limit.
    #[test]
    fn a_runtime_at_the_limit_is_refused_up_front() {
        let mut spec = job("long");
        spec.runtime = Some(7 * 86_400 * SECOND);
        spec.time_based = true;
        let error = check(&[(&spec, None)], limits::SIMULATED_TIME_MAX).unwrap_err();
        let text = error.to_string();
        assert!(text.contains("job \"long\""), "{text}");
        assert!(text.contains("ramp_time + runtime = 7 d"), "{text}");
        assert!(text.contains("limit is 7 d (604800 s)"), "{text}");
        spec.runtime = Some(6 * 86_400 * SECOND);
        assert!(check(&[(&spec, None)], limits::SIMULATED_TIME_MAX).is_ok());
    }

    // Regression (issue 11, item 6): a think time that cannot finish in time names thinktime,
    // not size or runtime alone.
    #[test]
    fn think_time_is_named_when_it_is_the_reason() {
        let mut spec = job("thinker");
        spec.thinktime = 27 * 3_600 * SECOND;
        let error = check(&[(&spec, Some(64 << 20))], limits::SIMULATED_TIME_MAX).unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("thinktime=1 d 3 h after every 1 I/O(s)"),
            "{text}"
        );
        assert!(text.contains("needs at least 50.496 years"), "{text}");
        assert!(text.contains("16384 I/Os"), "{text}");
        // A runtime below the limit caps the job: then it fits.
        spec.runtime = Some(60 * SECOND);
        assert!(check(&[(&spec, Some(64 << 20))], limits::SIMULATED_TIME_MAX).is_ok());
    }

    // Proves stonewalled jobs add up and a rate cap counts, while jobs side by side do not add.
    #[test]
    fn stonewalls_add_and_rates_count() {
        let mut first = job("first");
        first.runtime = Some(4 * 86_400 * SECOND);
        first.time_based = true;
        let mut beside = first.clone();
        beside.name = "beside".into();
        assert!(check(
            &[(&first, None), (&beside, None)],
            limits::SIMULATED_TIME_MAX
        )
        .is_ok());
        let mut after = first.clone();
        after.name = "after".into();
        after.stonewall = true;
        let error = check(
            &[(&first, None), (&after, None)],
            limits::SIMULATED_TIME_MAX,
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("job \"after\""), "{error}");
        assert!(
            error.contains("after the jobs before its stonewall, 4 d in"),
            "{error}"
        );

        let mut slow = job("slow");
        slow.rw = RwMode::Write;
        slow.rate[DataDir::Write as usize] = 1;
        let error = check(&[(&slow, Some(1 << 30))], limits::SIMULATED_TIME_MAX)
            .unwrap_err()
            .to_string();
        assert!(error.contains("at rate=1 bytes/s"), "{error}");
    }

    // Proves the durations read as a person writes them.
    #[test]
    fn durations_read_well() {
        assert_eq!(seconds(1_500_000_000), "1.5 s");
        assert_eq!(seconds(2 * 3_600 * SECOND + 30 * 60 * SECOND), "2 h 30 m");
        assert_eq!(seconds(7 * 86_400 * SECOND), "7 d");
        assert_eq!(seconds(250_000), "0.25 ms");
    }
}
