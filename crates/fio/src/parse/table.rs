//! The shape of fio's option table and lookups in it.
//!
//! The entries themselves are generated from fio's source into [`super::fio_options`]; this file
//! holds the types they use and the ways the parser finds an option: by name or alias (both
//! case-sensitive, as fio's `o_match` compares with `strcmp`), and, for an unknown name, the
//! nearest known one. iosched's own options ([`super::iosched_options`]) are found beside fio's.

use super::fio_options::FIO_OPTIONS;
use super::iosched_options::IOSCHED_OPTIONS;
use std::collections::HashMap;
use std::sync::OnceLock;

/// fio's option types (`enum fio_opt_type` in parse.h). The type decides how a value is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// One of a list of words (`choices`), maybe with a `:postfix`.
    Str,
    /// A word from a list, stored as a 64-bit value (only `bssplit` uses it, with a callback).
    StrUll,
    /// Several words from a list (`sync_file_range`, `verify_policy`).
    StrMulti,
    /// A number with size suffixes.
    StrVal,
    /// A number with time suffixes.
    StrValTime,
    /// Free text.
    StrStore,
    /// One to three `min-max` ranges.
    Range,
    /// A 32-bit number (size suffixes allowed, as fio reads it with `check_str_bytes`).
    Int,
    /// A 64-bit number.
    Ull,
    /// 0 or 1.
    Bool,
    /// Floats separated by ':'.
    FloatList,
    /// A flag: bare name sets it, or a number.
    StrSet,
    /// A size that may also be given in zones (`10z`).
    StrValZone,
    /// Removed from fio: fio refuses it.
    Deprecated,
    /// Removed from fio: fio accepts and ignores it.
    SoftDeprecated,
}

/// Which fio job files may use an option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Scope {
    /// Every job.
    General,
    /// Only a job whose `ioengine` is one of these (fio loads engine options with the engine).
    Engines(&'static [&'static str]),
    /// Only a job run with fio's `--profile=NAME`.
    Profile(&'static str),
}

/// The unit of a time value written without a suffix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TimeUnit {
    /// Seconds (fio's `.is_seconds`: runtime, ramp_time, startdelay, ...).
    Seconds,
    /// Microseconds (thinktime, latency_target, ...).
    Microseconds,
}

/// One option as fio defines it.
#[derive(Debug)]
pub(super) struct FioOption {
    /// The option's name, as fio lists it in its JSON "job options".
    pub name: &'static str,
    /// fio's one alternative name for it, if any.
    pub alias: Option<&'static str>,
    /// How its value is read.
    pub kind: Kind,
    /// fio's default, as text in fio's own syntax.
    pub default: Option<&'static str>,
    /// Smallest value fio accepts (fio skips the check when its `minval` is 0).
    pub min: Option<i64>,
    /// Largest value fio accepts.
    pub max: Option<i64>,
    /// Range of each float of a float list.
    pub float_range: Option<(f64, f64)>,
    /// For time values, the unit of a bare number.
    pub time_unit: Option<TimeUnit>,
    /// 3 for per-direction values (read,write,trim), 2 for two (low-high or read,write), else 1.
    pub directions: u8,
    /// The words a `Str` option accepts before any `:postfix`.
    pub choices: &'static [&'static str],
    /// Who may use it.
    pub scope: Scope,
}

fn by_name() -> &'static HashMap<&'static str, &'static FioOption> {
    static INDEX: OnceLock<HashMap<&'static str, &'static FioOption>> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut index = HashMap::with_capacity(FIO_OPTIONS.len() * 2);
        for option in every() {
            index.insert(option.name, option);
        }
        // Aliases second: an option's own name wins over another option's alias.
        for option in every() {
            if let Some(alias) = option.alias {
                index.entry(alias).or_insert(option);
            }
        }
        index
    })
}

/// The option called `name` (or aliased so), exactly as written: fio's names are case-sensitive.
pub(super) fn find(name: &str) -> Option<&'static FioOption> {
    by_name().get(name).copied()
}

/// Every option fio defines.
#[cfg(test)]
pub(super) fn all() -> &'static [FioOption] {
    FIO_OPTIONS
}

/// fio's options, then iosched's own.
fn every() -> impl Iterator<Item = &'static FioOption> {
    FIO_OPTIONS.iter().chain(IOSCHED_OPTIONS)
}

/// The known option nearest to an unknown `name`, if it is close enough to be a likely typo.
/// Same rule as fio's `show_closest_option`: Levenshtein distance at most half the length.
pub(super) fn nearest(name: &str) -> Option<&'static str> {
    // Long names are no typos of fio's (the longest is 40 characters); spare the comparison.
    if name.len() > NAME_BYTES_MAX {
        return None;
    }
    let mut best: Option<(usize, &'static str)> = None;
    for option in every() {
        for candidate in std::iter::once(option.name).chain(option.alias) {
            let distance = levenshtein(name, candidate);
            if best.is_none_or(|(best_distance, _)| distance < best_distance) {
                best = Some((distance, candidate));
            }
        }
    }
    let (distance, candidate) = best?;
    let threshold = name.chars().count().div_ceil(2);
    (distance <= threshold).then_some(candidate)
}

/// Longest name compared when looking for a suggestion.
const NAME_BYTES_MAX: usize = 64;

/// The order fio parses a section's options in: higher first (`.prio` in options.c), so that
/// `kb_base` applies to every size in its section and `directory` comes before `filename`.
pub(super) fn parse_priority(name: &str) -> i32 {
    match name {
        "kb_base" | "unit_base" | "lockfile" | "cpus_allowed_policy" => 1,
        "filename" | "filename_format" => -1,
        _ => 0,
    }
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        current[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    // Names and aliases resolve to the same entry; case matters, as in fio.
    #[test]
    fn finds_names_and_aliases() {
        assert_eq!(find("rw").unwrap().name, "rw");
        assert_eq!(find("readwrite").unwrap().name, "rw");
        assert_eq!(find("blocksize").unwrap().name, "bs");
        assert_eq!(find("io_limit").unwrap().name, "io_size");
        assert_eq!(find("timeout").unwrap().name, "runtime");
        assert_eq!(find("wait_for_previous").unwrap().name, "stonewall");
        assert!(find("RW").is_none());
        assert!(find("foo").is_none());
    }

    #[test]
    fn suggests_close_names_only() {
        assert_eq!(nearest("iodpeth"), Some("iodepth"));
        assert_eq!(nearest("blocksise"), Some("blocksize"));
        assert_eq!(nearest("zzzzzzzzzzzzzzzzzzzzzzzz"), None);
    }

    #[test]
    fn levenshtein_counts_edits() {
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(levenshtein("", "abc"), 3);
        assert_eq!(levenshtein("same", "same"), 0);
    }

    // The generated table has each name once and no alias shadowing another option's name.
    #[test]
    fn table_names_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for option in all() {
            assert!(seen.insert(option.name), "duplicate {}", option.name);
        }
        for option in all() {
            if let Some(alias) = option.alias {
                assert!(!seen.contains(alias), "alias {alias} shadows an option");
            }
        }
        for option in IOSCHED_OPTIONS {
            assert!(seen.insert(option.name), "{} is fio's too", option.name);
        }
    }
}
