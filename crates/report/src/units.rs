//! Numbers as a reader reads them: three significant digits and a unit chosen so the number
//! stays between 1 and 1000 (`812 us`, `12.3 ms`, `95.4 MiB/s`, `12.3k`).

/// Nanoseconds in each latency unit, smallest first.
const TIME_UNITS: [(&str, f64); 4] = [("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("s", 1e9)];

/// Bytes in each binary size unit, smallest first.
const BYTE_UNITS: [(&str, f64); 5] = [
    ("B", 1.0),
    ("KiB", 1024.0),
    ("MiB", 1024.0 * 1024.0),
    ("GiB", 1024.0 * 1024.0 * 1024.0),
    ("TiB", 1024.0 * 1024.0 * 1024.0 * 1024.0),
];

/// A latency unit: its symbol and nanoseconds per unit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimeUnit {
    /// `ns`, `us`, `ms` or `s`.
    pub symbol: &'static str,
    /// Nanoseconds in one unit.
    pub nanos: f64,
}

/// The largest time unit in which `nanos` is at least 1 (ns for anything smaller).
pub fn time_unit(nanos: f64) -> TimeUnit {
    let (symbol, size) = TIME_UNITS
        .iter()
        .rev()
        .find(|(_, size)| nanos >= *size)
        .copied()
        .unwrap_or(TIME_UNITS[0]);
    TimeUnit {
        symbol,
        nanos: size,
    }
}

/// A bandwidth unit: its symbol and bytes per second in one unit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateUnit {
    /// `B/s`, `KiB/s`, `MiB/s`, ...
    pub symbol: &'static str,
    /// Bytes per second in one unit.
    pub bytes: f64,
}

/// The largest binary unit in which `bytes_per_second` is at least 1.
pub fn rate_unit(bytes_per_second: f64) -> RateUnit {
    let (symbol, size) = BYTE_UNITS
        .iter()
        .rev()
        .find(|(_, size)| bytes_per_second >= *size)
        .copied()
        .unwrap_or(BYTE_UNITS[0]);
    let symbol = match symbol {
        "B" => "B/s",
        "KiB" => "KiB/s",
        "MiB" => "MiB/s",
        "GiB" => "GiB/s",
        _ => "TiB/s",
    };
    RateUnit {
        symbol,
        bytes: size,
    }
}

/// `value` with three significant digits (no exponent; integers of four or more digits are
/// printed whole): 0.0123, 1.23, 12.3, 123, 1234.
pub fn significant(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let decimals = |magnitude: i32| (2 - magnitude).max(0) as usize;
    let mut magnitude = value.abs().log10().floor() as i32;
    // Rounding may carry into a new digit (9.996 -> 10.00): then keep one decimal less.
    let rounded: f64 = format!("{value:.*}", decimals(magnitude))
        .parse()
        .unwrap_or(value);
    if rounded.abs() >= 10f64.powi(magnitude + 1) {
        magnitude += 1;
    }
    format!("{value:.*}", decimals(magnitude))
}

/// A value printed on a chart: whole numbers whole (`59`, `12.3k` from 10 000), others with
/// three significant digits (`4.83`).
pub fn value(value: f64) -> String {
    if value.fract() == 0.0 {
        iops(value)
    } else {
        significant(value)
    }
}

/// A latency in nanoseconds, e.g. `850 ns`, `812 us`, `12.3 ms`, `1.20 s`.
pub fn latency(nanos: f64) -> String {
    let unit = time_unit(nanos);
    format!("{} {}", significant(nanos / unit.nanos), unit.symbol)
}

/// A bandwidth in bytes per second, e.g. `512 KiB/s`, `95.4 MiB/s`.
pub fn bandwidth(bytes_per_second: f64) -> String {
    let unit = rate_unit(bytes_per_second);
    format!(
        "{} {}",
        significant(bytes_per_second / unit.bytes),
        unit.symbol
    )
}

/// A count per second, whole below 10 000, then with a k or M suffix: `87`, `9512`, `12.3k`.
pub fn iops(value: f64) -> String {
    if value < 10_000.0 {
        format!("{value:.0}")
    } else if value < 10_000_000.0 {
        format!("{}k", significant(value / 1e3))
    } else {
        format!("{}M", significant(value / 1e6))
    }
}

/// An axis tick: the shortest plain decimal for `value`, rounded to what `step` (the distance
/// between ticks) can tell apart, with a k or M suffix for large values.
pub fn tick(value: f64, step: f64) -> String {
    let magnitude = value.abs();
    if magnitude >= 1e6 && step >= 1e5 {
        return format!("{}M", trimmed(value / 1e6, step / 1e6));
    }
    if magnitude >= 1e4 && step >= 1e3 {
        return format!("{}k", trimmed(value / 1e3, step / 1e3));
    }
    trimmed(value, step)
}

fn trimmed(value: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize + 1
    };
    let mut text = format!("{value:.decimals$}");
    if text.contains('.') {
        text = text.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    if text == "-0" {
        text = "0".to_string();
    }
    text
}

/// `text` safe inside HTML elements and double-quoted attributes.
pub fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            other => escaped.push(other),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the units switch at 1000 of the smaller one and keep three significant digits.
    #[test]
    fn latencies_and_rates_read_naturally() {
        assert_eq!(latency(850.0), "850 ns");
        assert_eq!(latency(812_000.0), "812 us");
        assert_eq!(latency(12_345_678.0), "12.3 ms");
        assert_eq!(latency(1_200_000_000.0), "1.20 s");
        assert_eq!(latency(9_996_000.0), "10.0 ms");
        assert_eq!(bandwidth(512.0 * 1024.0), "512 KiB/s");
        assert_eq!(bandwidth(100.0 * 1024.0 * 1024.0), "100 MiB/s");
        assert_eq!(bandwidth(0.0), "0 B/s");
        assert_eq!(iops(87.4), "87");
        assert_eq!(iops(12_345.0), "12.3k");
        assert_eq!(significant(0.012345), "0.0123");
        assert_eq!(significant(1234.0), "1234");
        assert_eq!(value(59.0), "59");
        assert_eq!(value(4.8321), "4.83");
    }

    // Proves tick labels drop noise digits and use suffixes only where the step allows.
    #[test]
    fn ticks_are_short() {
        assert_eq!(tick(0.5, 0.5), "0.5");
        assert_eq!(tick(2.0, 0.5), "2");
        assert_eq!(tick(0.001, 0.001), "0.001");
        assert_eq!(tick(20_000.0, 5_000.0), "20k");
        assert_eq!(tick(2_500_000.0, 500_000.0), "2.5M");
        assert_eq!(tick(150.0, 50.0), "150");
    }
}
