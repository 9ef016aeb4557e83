//! fio's number formatting, rewritten from its documented behaviour: `num2str`'s unit scaling
//! and rounding, the latency unit choice of "clat (usec)" lines, and the precision of percentile
//! labels. Every function here is pure and exact, so text output is deterministic.

/// The unit suffix `num2str` appends (fio's `enum n2s_unit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// A bare number: `14.0k`.
    None,
    /// A count per second: `14.0k/s`.
    PerSecond,
    /// Bytes: `164MiB`.
    Byte,
    /// Bits (the number is multiplied by 8): `1312Mibit`.
    Bit,
    /// Bytes per second: `54.6MiB/s`.
    BytePerSecond,
    /// Bits per second (the number is multiplied by 8): `437Mibit/s`.
    BitPerSecond,
}

impl Unit {
    fn suffix(self) -> &'static str {
        match self {
            Unit::None => "",
            Unit::PerSecond => "/s",
            Unit::Byte => "B",
            Unit::Bit => "bit",
            Unit::BytePerSecond => "B/s",
            Unit::BitPerSecond => "bit/s",
        }
    }
}

const PREFIXES_SI: [&str; 7] = ["", "k", "M", "G", "T", "P", "E"];
const PREFIXES_IEC: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

/// Number of decimal digits of `n` (1 for 0).
fn decimal_digits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |log| log as usize + 1)
}

/// Formats `num` as fio's `num2str` does: divide by 1000 (or 1024 when `binary`) until at most
/// `digits_max` digits remain, then fill the remaining width with rounded decimals. `base` is
/// the multiplier `num` is already in (1 for plain units, 1024 for KiB). Examples with fio's
/// default four significant figures: 13986 → `14.0k`, 57_266_012 B/s → `54.6MiB/s`
/// (binary) or `57.3MB/s` (decimal).
pub fn num2str(num: u64, digits_max: usize, base: u64, binary: bool, unit: Unit) -> String {
    assert!(digits_max >= 1, "num2str needs room for one digit");
    let thousand: u64 = if binary { 1024 } else { 1000 };
    let prefixes = if binary { &PREFIXES_IEC } else { &PREFIXES_SI };

    let mut prefix_index = 0;
    let mut base = base;
    while base > 1 {
        base /= thousand;
        prefix_index += 1;
    }
    let mut num = match unit {
        Unit::Bit | Unit::BitPerSecond => num.saturating_mul(8),
        _ => num,
    };

    // Divide until the integer part fits, remembering the last remainder for the decimals.
    let mut remainder: Option<u64> = None;
    let mut carry = false;
    while prefix_index < prefixes.len() {
        if decimal_digits(num) <= digits_max {
            break;
        }
        let modulo = num % thousand;
        num /= thousand;
        carry = modulo >= thousand / 2;
        remainder = Some(modulo);
        prefix_index += 1;
    }
    if prefix_index >= prefixes.len() {
        prefix_index = 0;
    }
    let prefix = prefixes[prefix_index];
    let suffix = unit.suffix();

    let Some(modulo) = remainder else {
        return format!("{num}{prefix}{suffix}");
    };
    let integer_digits = decimal_digits(num);
    if digits_max <= integer_digits + 1 {
        // No room for decimals: round the integer part.
        if carry {
            num += 1;
        }
        return format!("{num}{prefix}{suffix}");
    }
    let decimals = digits_max - integer_digits - 1;
    let fraction = format!("{:.*}", decimals, modulo as f64 / thousand as f64);
    if fraction.starts_with('1') {
        // The decimals rounded up to a whole unit ("1.0").
        num += 1;
    }
    format!("{num}.{}{prefix}{suffix}", &fraction[2..])
}

/// fio's default `significant_figures`.
pub const SIGNIFICANT_FIGURES: usize = 4;

/// The unit a latency line is printed in, chosen from its spread as fio's `display_lat` does:
/// msec when min > 2 ms, max > 100 ms and stdev > 1 ms; usec when min > 2 us, max > 100 us
/// and stdev > 1 us; nsec otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeUnit {
    /// Nanoseconds.
    Nsec,
    /// Microseconds.
    Usec,
    /// Milliseconds.
    Msec,
}

impl TimeUnit {
    /// fio's label: `nsec`, `usec` or `msec`.
    pub fn name(self) -> &'static str {
        match self {
            TimeUnit::Nsec => "nsec",
            TimeUnit::Usec => "usec",
            TimeUnit::Msec => "msec",
        }
    }

    /// Nanoseconds in one unit.
    pub fn nanos(self) -> u64 {
        match self {
            TimeUnit::Nsec => 1,
            TimeUnit::Usec => 1_000,
            TimeUnit::Msec => 1_000_000,
        }
    }

    /// The unit for a latency summary line (min, max and standard deviation in ns).
    pub fn for_summary(min_ns: u64, max_ns: u64, stddev_ns: f64) -> TimeUnit {
        if min_ns > 2_000_000 && max_ns > 99_999_999 && stddev_ns > 1_000_000.0 {
            TimeUnit::Msec
        } else if min_ns > 2_000 && max_ns > 99_999 && stddev_ns > 1_000.0 {
            TimeUnit::Usec
        } else {
            TimeUnit::Nsec
        }
    }

    /// The unit for a percentile block, from its smallest and largest reported value in ns.
    pub fn for_percentiles(min_ns: u64, max_ns: u64) -> TimeUnit {
        if min_ns > 2_000_000 && max_ns > 99_999_999 {
            TimeUnit::Msec
        } else if min_ns > 2_000 && max_ns > 99_999 {
            TimeUnit::Usec
        } else {
            TimeUnit::Nsec
        }
    }
}

/// Digits after the decimal point used for percentile labels: the most any listed percentile
/// has, as fio counts them when it parses `percentile_list` (2 for the default list, whose
/// finest entry is 99.95).
pub fn percentile_precision(percentiles: &[f64]) -> usize {
    percentiles
        .iter()
        .map(|p| {
            let text = p.to_string();
            text.split_once('.')
                .map_or(0, |(_, decimals)| decimals.len())
        })
        .max()
        .unwrap_or(0)
}

/// The percentile list as fio reports it: sorted ascending, duplicates and values outside
/// (0, 100] dropped (fio ends its list at the first zero).
pub fn sorted_percentiles(percentiles: &[f64]) -> Vec<f64> {
    let mut sorted: Vec<f64> = percentiles
        .iter()
        .copied()
        .filter(|p| *p > 0.0 && *p <= 100.0)
        .collect();
    sorted.sort_by(f64::total_cmp);
    sorted.dedup();
    sorted
}

/// fio's JSON key for a percentile: `%f`, e.g. `99.990000`.
pub fn percentile_key(percent: f64) -> String {
    format!("{percent:.6}")
}

/// Milliseconds as fio accounts a direction's runtime: whole microseconds, rounded up to
/// whole milliseconds.
pub fn runtime_ms_ceil(nanos: u64) -> u64 {
    (nanos / 1_000).div_ceil(1_000)
}

/// Milliseconds as fio accounts a job's total run time: rounded down.
pub fn runtime_ms_floor(nanos: u64) -> u64 {
    nanos / 1_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves num2str's scaling and rounding against values fio 3.33 printed for real runs.
    #[test]
    fn num2str_matches_fio_output() {
        // IOPS=14.0k from 41973 I/Os in 3001 ms.
        assert_eq!(
            num2str(41973 * 1000 / 3001, 4, 1, false, Unit::None),
            "14.0k"
        );
        // BW=54.6MiB/s (57.3MB/s) from 171_925_504 bytes in 3001 ms.
        let bw = 171_925_504u64 * 1000 / 3001;
        assert_eq!(num2str(bw, 4, 1, true, Unit::BytePerSecond), "54.6MiB/s");
        assert_eq!(num2str(bw, 4, 1, false, Unit::BytePerSecond), "57.3MB/s");
        // io=164MiB (172MB).
        assert_eq!(num2str(171_925_504, 4, 1, true, Unit::Byte), "164MiB");
        assert_eq!(num2str(171_925_504, 4, 1, false, Unit::Byte), "172MB");
        // clat max=3696.5k with six digits.
        assert_eq!(num2str(3_696_500, 6, 1, false, Unit::None), "3696.5k");
        assert_eq!(num2str(692, 6, 1, false, Unit::None), "692");
        // 121MiB/s: three integer digits leave no room for decimals.
        assert_eq!(
            num2str(127_199_000, 4, 1, true, Unit::BytePerSecond),
            "121MiB/s"
        );
        assert_eq!(num2str(0, 4, 1, true, Unit::Byte), "0B");
    }

    #[test]
    fn num2str_carries_when_decimals_round_up() {
        // 1023.999 KiB has no room for decimals and rounds its integer part up.
        assert_eq!(num2str(1_048_575, 4, 1, true, Unit::Byte), "1024KiB");
        // 19.999 Ki rounds its one decimal up into the integer part.
        assert_eq!(num2str(20_479, 4, 1, true, Unit::None), "20.0Ki");
        assert_eq!(num2str(19_999, 4, 1, false, Unit::None), "20.0k");
        // The base shifts the prefix: 2048 KiB is 2048KiB, not 2048B.
        assert_eq!(num2str(2048, 4, 1024, true, Unit::Byte), "2048KiB");
        assert_eq!(num2str(1000, 4, 1, false, Unit::Bit), "8000bit");
    }

    #[test]
    fn latency_units_follow_fio_thresholds() {
        assert_eq!(
            TimeUnit::for_summary(692, 3_696_500, 69_314.0),
            TimeUnit::Nsec
        );
        assert_eq!(
            TimeUnit::for_summary(3_000, 2_134_000, 20_330.0),
            TimeUnit::Usec
        );
        assert_eq!(
            TimeUnit::for_summary(3_000, 2_134_000, 900.0),
            TimeUnit::Nsec
        );
        assert_eq!(
            TimeUnit::for_summary(2_500_000, 200_000_000, 5_000_000.0),
            TimeUnit::Msec
        );
        assert_eq!(TimeUnit::for_percentiles(63_232, 2_023_424), TimeUnit::Usec);
        assert_eq!(TimeUnit::for_percentiles(1_000, 2_023_424), TimeUnit::Nsec);
    }

    #[test]
    fn percentile_labels() {
        assert_eq!(percentile_precision(&crate::job::DEFAULT_PERCENTILES), 2);
        assert_eq!(percentile_precision(&[50.0, 99.0]), 0);
        assert_eq!(percentile_precision(&[99.999]), 3);
        assert_eq!(percentile_key(99.99), "99.990000");
        assert_eq!(percentile_key(1.0), "1.000000");
        assert_eq!(
            sorted_percentiles(&[99.0, 50.0, 0.0, 50.0]),
            vec![50.0, 99.0]
        );
    }

    #[test]
    fn runtimes_round_as_fio_does() {
        assert_eq!(runtime_ms_ceil(3_000_000_000), 3000);
        assert_eq!(runtime_ms_ceil(3_000_400_000), 3001);
        assert_eq!(runtime_ms_ceil(999), 0);
        assert_eq!(runtime_ms_floor(3_000_400_000), 3000);
    }
}
