//! fio's value syntax: numbers with size and time suffixes, percentages, hex, parenthesised
//! arithmetic, booleans, floats, ranges, per-direction lists and split lists.
//!
//! The rules follow fio's parse.c (`str_to_decimal`, `get_mult_bytes`, `get_mult_time`,
//! `handle_option`) and options.c (`str_split_parse`, `split_parse_ddir`). Where fio's parser
//! silently reads a value differently from what its documentation (and the writer) means, we
//! refuse the value and say so, rather than pick one reading:
//!
//! - a fraction (`1.5g`, `2.5s`): fio stops at the '.', reading `1.5g` as 1 byte;
//! - an unknown suffix (`4q`): fio ignores it, reading `4q` as 4 bytes;
//! - `ki`, `mi`, ... without a final `b`: fio's documentation reads `1mi` as an IEC/SI prefix,
//!   its parser as plain `m`;
//! - `sec` and `min`: documented as seconds and minutes, read by fio's parser as microseconds.
//!
//! Every value this module accepts, fio reads the same way.

use super::table::TimeUnit;

/// Microseconds, the unit fio's parser works in for times.
pub(super) type Micros = u64;

/// A number and the unit it came with.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Number {
    /// A plain number (bytes for sizes, microseconds for times).
    Value(i128),
    /// A percentage, `20%`.
    Percent(i128),
}

/// What a number is read as, which decides its suffixes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Context {
    /// A quantity of data: k/m/g/t/p with kb_base, and `%` where the option allows it.
    Size {
        /// 1024 (fio's default) or 1000.
        kb_base: u64,
    },
    /// A duration: us/ms/s/m/h/d; a bare number is in `unit`.
    Time {
        /// Unit of a bare number.
        unit: TimeUnit,
    },
}

/// Reads a number with fio's suffix rules. Percentages are returned as such; the caller refuses
/// them where they mean nothing.
pub(super) fn number(text: &str, context: Context) -> Result<Number, String> {
    let text = text.trim();
    let what = match context {
        Context::Size { .. } => "size",
        Context::Time { .. } => "time",
    };
    number_inner(text, context).map_err(|why| format!("bad {what} \"{text}\": {why}"))
}

fn number_inner(text: &str, context: Context) -> Result<Number, String> {
    if text.is_empty() {
        return Err("empty value".into());
    }
    if text.starts_with('(') {
        return expression_number(text, context);
    }
    let (negative, unsigned) = match text.as_bytes()[0] {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let sign: i128 = if negative { -1 } else { 1 };
    if let Some(hex) = unsigned
        .strip_prefix("0x")
        .or_else(|| unsigned.strip_prefix("0X"))
    {
        if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err("hex values are digits 0-9 and a-f only, without a unit suffix".into());
        }
        if hex.len() > 30 {
            return Err("value is too large".into());
        }
        let value = i128::from_str_radix(hex, 16).map_err(|e| e.to_string())?;
        return Ok(Number::Value(sign * value));
    }
    let digits = unsigned.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Err("not a number".into());
    }
    if digits > 30 {
        return Err("value is too large".into());
    }
    let value: i128 = unsigned[..digits].parse().map_err(|_| "not a number")?;
    let suffix = &unsigned[digits..];
    if suffix.starts_with('.') {
        return Err(format!(
            "fractions are not accepted (fio would read \"{text}\" as {}{})",
            if negative { "-" } else { "" },
            &unsigned[..digits]
        ));
    }
    match context {
        Context::Size { kb_base } => {
            if suffix == "%" {
                return Ok(Number::Percent(sign * value));
            }
            let multiplier = size_multiplier(suffix, kb_base)?;
            value
                .checked_mul(multiplier)
                .map(|v| Number::Value(sign * v))
                .ok_or_else(|| "value is too large".into())
        }
        Context::Time { unit } => {
            let multiplier = time_multiplier(suffix, unit)?;
            value
                .checked_mul(multiplier)
                .map(|v| Number::Value(sign * v))
                .ok_or_else(|| "value is too large".into())
        }
    }
}

/// Bytes per unit of a size suffix, honouring kb_base as fio's `__get_mult_bytes` does: with
/// kb_base=1024 (the default) `k` is 1024 and `kib` is 1000 (fio's compatibility mode); with
/// kb_base=1000, `k` is 1000 and `kib` is 1024. A final `b` is optional; case is ignored.
pub(super) fn size_multiplier(suffix: &str, kb_base: u64) -> Result<i128, String> {
    let lower = suffix.to_ascii_lowercase();
    if lower.is_empty() || lower == "b" {
        return Ok(1);
    }
    let mut chars = lower.chars();
    let prefix = chars.next().unwrap_or(' ');
    let rest = chars.as_str();
    let power = match prefix {
        'k' => 1,
        'm' => 2,
        'g' => 3,
        't' => 4,
        'p' => 5,
        _ => return Err(format!("unknown suffix \"{suffix}\"")),
    };
    let base: i128 = match rest {
        "" | "b" => i128::from(kb_base),
        "ib" => {
            if kb_base == 1000 {
                1024
            } else {
                1000
            }
        }
        "i" => {
            return Err(format!(
                "ambiguous suffix \"{suffix}\": fio's documentation reads it as \"{suffix}b\" \
                 but its parser as \"{prefix}\"; write \"{prefix}\" or \"{suffix}b\""
            ))
        }
        _ => return Err(format!("unknown suffix \"{suffix}\"")),
    };
    Ok(base.pow(power))
}

/// Microseconds per unit of a time suffix.
fn time_multiplier(suffix: &str, unit: TimeUnit) -> Result<i128, String> {
    let lower = suffix.to_ascii_lowercase();
    Ok(match lower.as_str() {
        "" => match unit {
            TimeUnit::Seconds => 1_000_000,
            TimeUnit::Microseconds => 1,
        },
        "us" | "usec" => 1,
        "ms" | "msec" => 1_000,
        "s" => 1_000_000,
        "m" => 60 * 1_000_000,
        "h" => 3_600 * 1_000_000,
        "d" => 86_400 * 1_000_000,
        "sec" | "min" => {
            let short = &lower[..1];
            return Err(format!(
                "fio's parser reads the suffix \"{suffix}\" as microseconds (its documentation \
                 says otherwise); write \"{short}\""
            ));
        }
        _ => {
            return Err(format!(
                "unknown suffix \"{suffix}\" (use us, ms, s, m, h or d)"
            ))
        }
    })
}

/// A size in bytes: not negative, no percentage.
pub(super) fn bytes(text: &str, kb_base: u64) -> Result<u64, String> {
    match number(text, Context::Size { kb_base })? {
        Number::Value(v) if v < 0 => Err(format!("bad size \"{}\": negative", text.trim())),
        Number::Value(v) => u64::try_from(v)
            .map_err(|_| format!("bad size \"{}\": value is too large", text.trim())),
        Number::Percent(_) => Err(format!(
            "bad size \"{}\": a percentage is not accepted here",
            text.trim()
        )),
    }
}

/// A duration in microseconds: not negative.
pub(super) fn micros(text: &str, unit: TimeUnit) -> Result<Micros, String> {
    match number(text, Context::Time { unit })? {
        Number::Value(v) if v < 0 => Err(format!("bad time \"{}\": negative", text.trim())),
        Number::Value(v) => u64::try_from(v)
            .map_err(|_| format!("bad time \"{}\": value is too large", text.trim())),
        Number::Percent(_) => unreachable!("time values have no percent"),
    }
}

/// An integer option's value. fio reads integers with the size parser, so `iodepth=1k` is 1024.
pub(super) fn integer(text: &str, kb_base: u64) -> Result<i128, String> {
    let text = text.trim();
    match number_inner(text, Context::Size { kb_base }) {
        Ok(Number::Value(v)) => Ok(v),
        Ok(Number::Percent(_)) => Err(format!(
            "bad number \"{text}\": a percentage is not accepted here"
        )),
        Err(why) => Err(format!("bad number \"{text}\": {why}")),
    }
}

/// fio's booleans are the numbers 0 and 1 (`check_int`); fio refuses `true`, `yes`, `on`.
pub(super) fn boolean(text: &str) -> Result<bool, String> {
    match text.trim() {
        "0" => Ok(false),
        "1" => Ok(true),
        other if other.bytes().all(|b| b.is_ascii_digit()) && !other.is_empty() => {
            Err(format!("bad boolean \"{other}\": must be 0 or 1"))
        }
        other => Err(format!(
            "bad boolean \"{other}\": must be 0 or 1 (fio does not accept words here)"
        )),
    }
}

/// A float, as in `percentile_list` and `random_distribution`.
pub(super) fn float(text: &str) -> Result<f64, String> {
    let text = text.trim();
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!("bad number \"{text}\"")),
    }
}

/// Which of the three directions (read, write, trim) each comma-separated part of a
/// per-direction value sets, as fio's `handle_option` assigns them: the i-th part sets
/// direction i; the last part, unless followed by a comma, also sets the directions after it;
/// an empty part leaves its direction as it was. So `4k` sets all three, `4k,64k` sets read to
/// 4k and write and trim to 64k, `,8k` leaves read alone, and `500k,` sets only read.
pub(super) fn per_direction(text: &str) -> Result<Vec<(usize, &str)>, String> {
    let parts: Vec<&str> = text.split(',').collect();
    if parts.len() > 4 || (parts.len() == 4 && !parts[3].trim().is_empty()) {
        return Err(format!(
            "\"{text}\": at most three values (read, write, trim) separated by ','"
        ));
    }
    let mut assignments = Vec::new();
    for (index, part) in parts.iter().enumerate() {
        let followed_by_comma = index + 1 < parts.len();
        if part.trim().is_empty() {
            continue;
        }
        assignments.push((index, *part));
        if !followed_by_comma {
            for later in index + 1..3 {
                assignments.push((later, *part));
            }
        }
    }
    Ok(assignments)
}

/// The parts of a split value (`bssplit`, `random_distribution=zoned`) for read, write and
/// trim, as fio's `str_split_parse` assigns them: one set applies to all three; `r,w` gives
/// trim the write set; `r,w,t` one each. An empty part leaves that direction unset.
pub(super) fn split_directions(text: &str) -> [Option<&str>; 3] {
    let non_empty = |s: &'_ str| -> bool { !s.trim().is_empty() };
    match text.split_once(',') {
        None => {
            let set = non_empty(text).then_some(text);
            [set, set, set]
        }
        Some((read, rest)) => {
            let (write, trim) = match rest.split_once(',') {
                Some((write, trim)) => (write, trim),
                None => (rest, rest),
            };
            [
                non_empty(read).then_some(read),
                non_empty(write).then_some(write),
                non_empty(trim).then_some(trim),
            ]
        }
    }
}

/// The entries of one direction of a split list: `value/percent` separated by ':', parsed as
/// fio's `split_parse_ddir` does (an empty or zero percentage is "fill in"). Returns the values
/// and the percentages (None when to be filled in).
pub(super) fn split_entries(
    text: &str,
    kb_base: u64,
    max_entries: usize,
) -> Result<Vec<(u64, Option<u32>)>, String> {
    let mut entries = Vec::new();
    for entry in text.split(':') {
        if entry.trim().is_empty() {
            // fio stops at the first empty entry.
            break;
        }
        if entries.len() == max_entries {
            return Err(format!("more than {max_entries} entries"));
        }
        let (value, percent) = match entry.split_once('/') {
            Some((value, percent)) => (value, Some(percent.trim())),
            None => (entry, None),
        };
        let value = bytes(value, kb_base)?;
        let percent = match percent {
            None | Some("") => None,
            Some(p) => {
                let parsed: u32 = p
                    .parse()
                    .map_err(|_| format!("bad percentage \"{p}\": a whole number is needed"))?;
                if parsed > 100 {
                    return Err(format!("percentage {parsed} is over 100"));
                }
                // fio treats 0% as "fill in", like an empty percentage.
                (parsed > 0).then_some(parsed)
            }
        };
        entries.push((value, percent));
    }
    Ok(entries)
}

/// A `min-max` range of sizes (`bsrange`, `filesize`), also written `min:max`; swapped if
/// given high-low, as fio does. A single value is refused where `require_range`.
pub(super) fn size_range(
    text: &str,
    kb_base: u64,
    require_range: bool,
) -> Result<(u64, u64), String> {
    let text = text.trim();
    let separator = text.find('-').or_else(|| text.find(':'));
    match separator {
        Some(at) => {
            let low = bytes(&text[..at], kb_base)?;
            let high = bytes(&text[at + 1..], kb_base)?;
            Ok((low.min(high), low.max(high)))
        }
        None if require_range => Err(format!("bad range \"{text}\": expected min-max")),
        None => {
            let value = bytes(text, kb_base)?;
            Ok((value, value))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Arithmetic: fio evaluates a value that starts with '(' as an expression with + - * / % ^
// and parentheses. Numbers may carry suffixes; times in an expression are in microseconds unless
// suffixed. fio evaluates integers with integer division, and floats once a float appears.

/// Bound on expression nesting, so that hostile input cannot exhaust the stack.
const EXPRESSION_DEPTH_MAX: u32 = 64;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Arith {
    Int(i128),
    Float(f64),
}

impl Arith {
    fn as_float(self) -> f64 {
        match self {
            Arith::Int(i) => i as f64,
            Arith::Float(f) => f,
        }
    }
}

/// How suffixes inside an expression are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ArithUnits {
    /// No suffixes at all (the `bc` evaluation of `$ncpus` arithmetic).
    None,
    /// Size suffixes with this kb_base.
    Size(u64),
    /// Time suffixes; a bare number is microseconds.
    Time,
}

fn expression_number(text: &str, context: Context) -> Result<Number, String> {
    let units = match context {
        Context::Size { kb_base } => ArithUnits::Size(kb_base),
        Context::Time { .. } => ArithUnits::Time,
    };
    let value = evaluate(text, units)?;
    let value = match value {
        Arith::Int(i) => i,
        Arith::Float(f) => {
            if !f.is_finite() || f.abs() > 1e30 {
                return Err("expression result is out of range".into());
            }
            f.trunc() as i128
        }
    };
    match context {
        // fio turns an expression's microseconds into whole seconds for options in seconds.
        Context::Time {
            unit: TimeUnit::Seconds,
        } => Ok(Number::Value(value / 1_000_000 * 1_000_000)),
        _ => Ok(Number::Value(value)),
    }
}

/// Evaluates an arithmetic expression to an integer (truncating a float result).
pub(super) fn evaluate_integer(text: &str, units: ArithUnits) -> Result<i128, String> {
    match evaluate(text, units)? {
        Arith::Int(i) => Ok(i),
        Arith::Float(f) if f.is_finite() && f.abs() <= 1e30 => Ok(f.trunc() as i128),
        Arith::Float(_) => Err("expression result is out of range".into()),
    }
}

fn evaluate(text: &str, units: ArithUnits) -> Result<Arith, String> {
    let mut parser = Arithmetic {
        bytes: text.as_bytes(),
        position: 0,
        units,
        depth: 0,
    };
    let value = parser.sum()?;
    parser.skip_space();
    if parser.position != parser.bytes.len() {
        return Err(format!(
            "bad expression \"{text}\": unexpected \"{}\"",
            &text[parser.position..]
        ));
    }
    Ok(value)
}

struct Arithmetic<'a> {
    bytes: &'a [u8],
    position: usize,
    units: ArithUnits,
    depth: u32,
}

impl Arithmetic<'_> {
    fn skip_space(&mut self) {
        while self.position < self.bytes.len() && self.bytes[self.position].is_ascii_whitespace() {
            self.position += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.bytes.get(self.position).copied()
    }

    fn sum(&mut self) -> Result<Arith, String> {
        let mut value = self.product()?;
        while let Some(op @ (b'+' | b'-')) = self.peek() {
            self.position += 1;
            let right = self.product()?;
            value = apply(op, value, right)?;
        }
        Ok(value)
    }

    fn product(&mut self) -> Result<Arith, String> {
        let mut value = self.power()?;
        while let Some(op @ (b'*' | b'/' | b'%')) = self.peek() {
            self.position += 1;
            let right = self.power()?;
            value = apply(op, value, right)?;
        }
        Ok(value)
    }

    fn power(&mut self) -> Result<Arith, String> {
        let base = self.unary()?;
        if self.peek() == Some(b'^') {
            self.position += 1;
            let exponent = self.power()?;
            return apply(b'^', base, exponent);
        }
        Ok(base)
    }

    fn unary(&mut self) -> Result<Arith, String> {
        if self.peek() == Some(b'-') {
            self.position += 1;
            self.enter()?;
            let value = self.unary()?;
            self.depth -= 1;
            return apply(b'-', Arith::Int(0), value);
        }
        self.primary()
    }

    fn enter(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > EXPRESSION_DEPTH_MAX {
            return Err("expression is nested too deeply".into());
        }
        Ok(())
    }

    fn primary(&mut self) -> Result<Arith, String> {
        match self.peek() {
            Some(b'(') => {
                self.position += 1;
                self.enter()?;
                let value = self.sum()?;
                self.depth -= 1;
                if self.peek() != Some(b')') {
                    return Err("bad expression: missing ')'".into());
                }
                self.position += 1;
                Ok(value)
            }
            Some(c) if c.is_ascii_digit() || c == b'.' => self.literal(),
            Some(c) => Err(format!("bad expression: unexpected '{}'", c as char)),
            None => Err("bad expression: it ends too early".into()),
        }
    }

    fn literal(&mut self) -> Result<Arith, String> {
        let start = self.position;
        let rest = &self.bytes[start..];
        let value;
        if rest.len() > 2 && rest[0] == b'0' && (rest[1] == b'x' || rest[1] == b'X') {
            let digits = rest[2..]
                .iter()
                .take_while(|b| b.is_ascii_hexdigit())
                .count();
            if digits == 0 || digits > 30 {
                return Err("bad expression: bad hex number".into());
            }
            let text = std::str::from_utf8(&rest[2..2 + digits]).map_err(|e| e.to_string())?;
            value = Arith::Int(i128::from_str_radix(text, 16).map_err(|e| e.to_string())?);
            self.position += 2 + digits;
        } else {
            let mut end = 0;
            let mut is_float = false;
            while end < rest.len() && rest[end].is_ascii_digit() {
                end += 1;
            }
            if end < rest.len() && rest[end] == b'.' {
                is_float = true;
                end += 1;
                while end < rest.len() && rest[end].is_ascii_digit() {
                    end += 1;
                }
            }
            if end < rest.len()
                && (rest[end] == b'e' || rest[end] == b'E')
                && rest
                    .get(end + 1)
                    .is_some_and(|b| b.is_ascii_digit() || *b == b'-' || *b == b'+')
            {
                is_float = true;
                end += 1;
                if rest[end] == b'-' || rest[end] == b'+' {
                    end += 1;
                }
                while end < rest.len() && rest[end].is_ascii_digit() {
                    end += 1;
                }
            }
            let text = std::str::from_utf8(&rest[..end]).map_err(|e| e.to_string())?;
            if end > 40 {
                return Err("bad expression: number is too long".into());
            }
            value = if is_float {
                Arith::Float(text.parse().map_err(|_| format!("bad number \"{text}\""))?)
            } else {
                Arith::Int(text.parse().map_err(|_| format!("bad number \"{text}\""))?)
            };
            self.position += end;
        }
        let suffix_length = self.bytes[self.position..]
            .iter()
            .take_while(|b| b.is_ascii_alphabetic())
            .count();
        if suffix_length == 0 {
            return Ok(value);
        }
        let suffix = std::str::from_utf8(&self.bytes[self.position..self.position + suffix_length])
            .map_err(|e| e.to_string())?;
        self.position += suffix_length;
        let multiplier = match self.units {
            ArithUnits::None => return Err(format!("bad expression: unexpected \"{suffix}\"")),
            ArithUnits::Size(kb_base) => size_multiplier(suffix, kb_base)?,
            ArithUnits::Time => time_multiplier(suffix, TimeUnit::Microseconds)?,
        };
        apply(b'*', value, Arith::Int(multiplier))
    }
}

fn apply(op: u8, left: Arith, right: Arith) -> Result<Arith, String> {
    let overflow = || "expression result is out of range".to_string();
    if let (Arith::Int(a), Arith::Int(b)) = (left, right) {
        return match op {
            b'+' => a.checked_add(b).map(Arith::Int).ok_or_else(overflow),
            b'-' => a.checked_sub(b).map(Arith::Int).ok_or_else(overflow),
            b'*' => a.checked_mul(b).map(Arith::Int).ok_or_else(overflow),
            b'/' | b'%' if b == 0 => Err("bad expression: division by zero".into()),
            b'/' => a.checked_div(b).map(Arith::Int).ok_or_else(overflow),
            b'%' => a.checked_rem(b).map(Arith::Int).ok_or_else(overflow),
            _ => {
                let exponent = u32::try_from(b).map_err(|_| overflow())?;
                a.checked_pow(exponent).map(Arith::Int).ok_or_else(overflow)
            }
        };
    }
    let (a, b) = (left.as_float(), right.as_float());
    let result = match op {
        b'+' => a + b,
        b'-' => a - b,
        b'*' => a * b,
        b'/' | b'%' if b == 0.0 => return Err("bad expression: division by zero".into()),
        b'/' => a / b,
        b'%' => a % b,
        _ => a.powf(b),
    };
    if result.is_finite() {
        Ok(Arith::Float(result))
    } else {
        Err(overflow())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: u64 = 1024;
    const KB: u64 = 1000;
    const SECONDS: TimeUnit = TimeUnit::Seconds;
    const MICROS: TimeUnit = TimeUnit::Microseconds;

    // Sizes follow parse.c's kb_base rule, including the compatibility inversion of "kib".
    #[test]
    fn sizes_with_kb_base_1024() {
        assert_eq!(bytes("4096", KIB), Ok(4096));
        assert_eq!(bytes("4k", KIB), Ok(4096));
        assert_eq!(bytes("4K", KIB), Ok(4096));
        assert_eq!(bytes("4kb", KIB), Ok(4096));
        assert_eq!(bytes("4KB", KIB), Ok(4096));
        assert_eq!(bytes("4kib", KIB), Ok(4000));
        assert_eq!(bytes("1m", KIB), Ok(1 << 20));
        assert_eq!(bytes("1MiB", KIB), Ok(1_000_000));
        assert_eq!(bytes("1g", KIB), Ok(1 << 30));
        assert_eq!(bytes("1t", KIB), Ok(1 << 40));
        assert_eq!(bytes("1p", KIB), Ok(1 << 50));
        assert_eq!(bytes("512b", KIB), Ok(512));
        assert_eq!(bytes("512B", KIB), Ok(512));
        assert_eq!(bytes(" 8k ", KIB), Ok(8192));
    }

    #[test]
    fn sizes_with_kb_base_1000() {
        assert_eq!(bytes("4k", KB), Ok(4000));
        assert_eq!(bytes("4kB", KB), Ok(4000));
        assert_eq!(bytes("4KiB", KB), Ok(4096));
        assert_eq!(bytes("1m", KB), Ok(1_000_000));
        assert_eq!(bytes("1mib", KB), Ok(1 << 20));
        assert_eq!(bytes("1tib", KB), Ok(1 << 40));
        assert_eq!(bytes("1t", KB), Ok(1_000_000_000_000));
    }

    #[test]
    fn hex_and_expressions() {
        assert_eq!(bytes("0x1000", KIB), Ok(4096));
        assert_eq!(bytes("0X10", KIB), Ok(16));
        assert_eq!(bytes("(4k*2)", KIB), Ok(8192));
        assert_eq!(bytes("(1m + 512k)", KIB), Ok(1536 * 1024));
        assert_eq!(bytes("((2+3)*4)", KIB), Ok(20));
        assert_eq!(bytes("(2^10)", KIB), Ok(1024));
        assert_eq!(bytes("(7/2)", KIB), Ok(3));
        assert_eq!(bytes("(1.5*1k)", KIB), Ok(1536));
        assert!(bytes("(1/0)", KIB).is_err());
        // i128::MIN / -1 overflows: an error, not a panic.
        assert!(evaluate_integer("(0-2^126-2^126)/(0-1)", ArithUnits::None).is_err());
        assert!(bytes("(1+", KIB).is_err());
        assert!(bytes("(", KIB).is_err());
        let deep = format!("{}1{}", "(".repeat(200), ")".repeat(200));
        assert!(bytes(&deep, KIB).is_err());
    }

    // Values fio would misread are refused with the reason.
    #[test]
    fn refuses_misreadable_sizes() {
        let error = bytes("4q", KIB).unwrap_err();
        assert_eq!(error, "bad size \"4q\": unknown suffix \"q\"");
        assert!(bytes("1.5g", KIB).unwrap_err().contains("fractions"));
        assert!(bytes("4ki", KIB).unwrap_err().contains("ambiguous"));
        assert!(bytes("-1", KIB).unwrap_err().contains("negative"));
        assert!(bytes("", KIB).unwrap_err().contains("empty"));
        assert!(bytes("k", KIB).unwrap_err().contains("not a number"));
        assert!(bytes("0x", KIB).is_err());
        assert!(bytes("0x10k", KIB).is_err());
        assert!(bytes("20%", KIB).unwrap_err().contains("percentage"));
        assert!(bytes("99999999999999999999p", KIB)
            .unwrap_err()
            .contains("too large"));
    }

    #[test]
    fn percentages() {
        let size = Context::Size { kb_base: KIB };
        assert_eq!(number("20%", size), Ok(Number::Percent(20)));
        assert_eq!(number("100%", size), Ok(Number::Percent(100)));
    }

    // Each default unit: seconds for runtime-like options, microseconds for thinktime-like.
    #[test]
    fn times_with_each_default_unit() {
        assert_eq!(micros("10", SECONDS), Ok(10_000_000));
        assert_eq!(micros("10", MICROS), Ok(10));
        assert_eq!(micros("10s", MICROS), Ok(10_000_000));
        assert_eq!(micros("10S", MICROS), Ok(10_000_000));
        assert_eq!(micros("250ms", SECONDS), Ok(250_000));
        assert_eq!(micros("250msec", SECONDS), Ok(250_000));
        assert_eq!(micros("100us", SECONDS), Ok(100));
        assert_eq!(micros("100usec", SECONDS), Ok(100));
        assert_eq!(micros("2m", SECONDS), Ok(120_000_000));
        assert_eq!(micros("1h", SECONDS), Ok(3_600_000_000));
        assert_eq!(micros("1d", SECONDS), Ok(86_400_000_000));
        assert_eq!(micros("0", SECONDS), Ok(0));
    }

    #[test]
    fn time_expressions_are_in_microseconds() {
        assert_eq!(micros("(1m+30s)", SECONDS), Ok(90_000_000));
        assert_eq!(micros("(10)", SECONDS), Ok(0));
        assert_eq!(micros("(10)", MICROS), Ok(10));
        assert_eq!(micros("(1500ms)", SECONDS), Ok(1_000_000));
    }

    #[test]
    fn refuses_misreadable_times() {
        assert!(micros("10sec", SECONDS)
            .unwrap_err()
            .contains("write \"s\""));
        assert!(micros("10min", SECONDS)
            .unwrap_err()
            .contains("write \"m\""));
        assert!(micros("1.5s", SECONDS).unwrap_err().contains("fractions"));
        assert!(micros("10x", SECONDS)
            .unwrap_err()
            .contains("unknown suffix"));
        assert!(micros("1h30m", SECONDS).is_err());
        assert!(micros("-1", SECONDS).unwrap_err().contains("negative"));
    }

    #[test]
    fn integers_and_booleans() {
        assert_eq!(integer("32", KIB), Ok(32));
        assert_eq!(integer("1k", KIB), Ok(1024));
        assert_eq!(integer("-5", KIB), Ok(-5));
        assert_eq!(integer("0x10", KIB), Ok(16));
        assert!(integer("abc", KIB).is_err());
        assert_eq!(boolean("1"), Ok(true));
        assert_eq!(boolean(" 0 "), Ok(false));
        assert!(boolean("2").unwrap_err().contains("0 or 1"));
        assert!(boolean("true").unwrap_err().contains("words"));
        assert!(boolean("").is_err());
    }

    // Per-direction values fill as fio's HOWTO describes for bs.
    #[test]
    fn per_direction_lists() {
        assert_eq!(
            per_direction("256k").unwrap(),
            vec![(0, "256k"), (1, "256k"), (2, "256k")]
        );
        assert_eq!(
            per_direction("8k,32k").unwrap(),
            vec![(0, "8k"), (1, "32k"), (2, "32k")]
        );
        assert_eq!(
            per_direction("8k,32k,").unwrap(),
            vec![(0, "8k"), (1, "32k")]
        );
        assert_eq!(per_direction(",8k").unwrap(), vec![(1, "8k"), (2, "8k")]);
        assert_eq!(per_direction(",8k,").unwrap(), vec![(1, "8k")]);
        assert_eq!(per_direction("500k,").unwrap(), vec![(0, "500k")]);
        assert_eq!(
            per_direction("1,2,3").unwrap(),
            vec![(0, "1"), (1, "2"), (2, "3")]
        );
        assert_eq!(per_direction("1,,3").unwrap(), vec![(0, "1"), (2, "3")]);
        assert!(per_direction("1,2,3,4").is_err());
    }

    #[test]
    fn split_lists_by_direction() {
        assert_eq!(split_directions("a"), [Some("a"), Some("a"), Some("a")]);
        assert_eq!(split_directions("a,b"), [Some("a"), Some("b"), Some("b")]);
        assert_eq!(split_directions("a,b,c"), [Some("a"), Some("b"), Some("c")]);
        assert_eq!(split_directions(",b"), [None, Some("b"), Some("b")]);
        assert_eq!(split_directions("a,"), [Some("a"), None, None]);
    }

    #[test]
    fn split_entries_fill_in_blank_and_zero() {
        assert_eq!(
            split_entries("4k/10:64k/50:32k/40", KIB, 64).unwrap(),
            vec![(4096, Some(10)), (65536, Some(50)), (32768, Some(40))]
        );
        assert_eq!(
            split_entries("4k/50:1k/:32k", KIB, 64).unwrap(),
            vec![(4096, Some(50)), (1024, None), (32768, None)]
        );
        assert_eq!(split_entries("4k/0", KIB, 64).unwrap(), vec![(4096, None)]);
        assert!(split_entries("4k/101", KIB, 64).is_err());
        assert!(split_entries("4k/x", KIB, 64).is_err());
        assert!(split_entries("1:2:3", KIB, 2).is_err());
    }

    #[test]
    fn ranges() {
        assert_eq!(size_range("1k-4k", KIB, true), Ok((1024, 4096)));
        assert_eq!(size_range("4k:1k", KIB, true), Ok((1024, 4096)));
        assert!(size_range("4k", KIB, true).is_err());
        assert_eq!(size_range("4k", KIB, false), Ok((4096, 4096)));
    }

    #[test]
    fn plain_arithmetic() {
        assert_eq!(evaluate_integer("8*16000", ArithUnits::None), Ok(128_000));
        assert_eq!(evaluate_integer("(4+4)/3", ArithUnits::None), Ok(2));
        assert!(evaluate_integer("8*16000m", ArithUnits::None).is_err());
    }
}
