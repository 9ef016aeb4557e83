//! Every bound on what a user may ask of iosched, in one place.
//!
//! A job file, a groups file or a command line is checked against these before any work starts,
//! and an input beyond one is refused with an error naming the option, the value and the limit.
//! They exist so that no input can exhaust memory, overflow simulated time or run for ever: with
//! every time in a job file below [`JOB_TIME_MAX`] and every size below [`SIZE_BYTES_MAX`], sums
//! of a few of them stay far inside `u64` nanoseconds and bytes, so arithmetic on them cannot
//! wrap. Each is far beyond any real use; where fio or Linux has a limit of its own, ours is
//! that one.
//!
//! [`table`] lists them for `iosched --help` and the README.

use crate::time::{Nanos, SECOND};

/// Jobs in one run, counting `numjobs` clones (fio's `REAL_MAX_JOBS`).
pub const JOBS_MAX: usize = 4096;
/// File names of one job, over all its clones.
pub const FILES_PER_JOB_MAX: usize = 1 << 16;
/// A job's `iodepth`, and the real engine's `--device-depth`.
pub const IODEPTH_MAX: u32 = 65_536;

/// Groups (cgroups) in one run, the root included.
pub const GROUPS_MAX: usize = 4096;
/// Levels below the root of a group path (`/a/b` is 2).
pub const GROUP_DEPTH_MAX: usize = 64;
/// Bytes of a group path (Linux's `PATH_MAX`).
pub const GROUP_PATH_BYTES_MAX: usize = 4096;

/// Bytes of one job file, one included file, or one groups file, read at most.
pub const INPUT_FILE_BYTES_MAX: usize = 4 << 20;
/// Bytes of a job file with everything it includes.
pub const JOB_TEXT_BYTES_MAX: usize = 16 << 20;
/// Bytes of one line of a job file or groups file (fio's `OPT_LEN_MAX`), also after `${VAR}`
/// expansion.
pub const LINE_BYTES_MAX: usize = 8192;
/// Includes nested inside one another.
pub const INCLUDE_DEPTH_MAX: usize = 32;
/// `include` lines followed while reading one job file, counting a file included twice twice:
/// this bounds fan-out, where each file includes the next several times.
pub const INCLUDES_MAX: usize = 1024;

/// Any time in a job file (`runtime`, `ramp_time`, `startdelay`, `thinktime`, ...): one year.
pub const JOB_TIME_MAX: Nanos = 365 * 24 * 3600 * SECOND;
/// Simulated time of one run: seven days. A run whose jobs are set to go on past it
/// (`startdelay + ramp_time + runtime`, along a chain of stonewalls) is refused before it
/// starts; one that reaches it anyway (a size that takes longer than this to transfer) is
/// stopped there with an error.
pub const SIMULATED_TIME_MAX: Nanos = 7 * 24 * 3600 * SECOND;
/// Any size, offset or byte count in a job file or a setting: 1 EiB.
pub const SIZE_BYTES_MAX: u64 = 1 << 60;

/// Bytes of a user's value quoted back in an error; a longer value is cut and its length said.
pub const QUOTED_BYTES_MAX: usize = 64;

/// One row of [`table`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    /// What is limited.
    pub what: &'static str,
    /// The limit, as a person reads it.
    pub value: &'static str,
}

/// Every limit, for `iosched --help` and the README. A test keeps the values in step with the
/// constants.
pub const fn table() -> &'static [Limit] {
    &[
        Limit {
            what: "jobs in one run, counting numjobs clones",
            value: "4096",
        },
        Limit {
            what: "file names of one job, over its clones",
            value: "65536",
        },
        Limit {
            what: "iodepth of a job; --device-depth",
            value: "65536",
        },
        Limit {
            what: "groups (cgroups) in one run, the root included",
            value: "4096",
        },
        Limit {
            what: "levels of a group path below the root",
            value: "64",
        },
        Limit {
            what: "bytes of a group path",
            value: "4096",
        },
        Limit {
            what: "bytes of a job file, an included file or a groups file",
            value: "4 MiB",
        },
        Limit {
            what: "bytes of a job file with everything it includes",
            value: "16 MiB",
        },
        Limit {
            what: "bytes of one line (also after ${VAR} expansion)",
            value: "8192",
        },
        Limit {
            what: "includes nested inside one another",
            value: "32",
        },
        Limit {
            what: "includes followed in one job file (fan-out)",
            value: "1024",
        },
        Limit {
            what: "any time in a job file (runtime, thinktime, ...)",
            value: "365 days",
        },
        Limit {
            what: "simulated time of one run (startdelay + ramp_time + runtime)",
            value: "7 days",
        },
        Limit {
            what: "any size, offset or rate in bytes",
            value: "1 EiB (2^60)",
        },
    ]
}

/// The table as aligned text, one limit a line.
pub fn text() -> String {
    let width = table().iter().map(|l| l.what.len()).max().unwrap_or(0);
    let mut out = String::new();
    for limit in table() {
        out.push_str(&format!("  {:width$}  {}\n", limit.what, limit.value));
    }
    out
}

/// `text` as it may be quoted back in an error: whole when short, else its first
/// [`QUOTED_BYTES_MAX`] bytes (cut at a character boundary) and its length.
pub fn quote(text: &str) -> String {
    if text.len() <= QUOTED_BYTES_MAX {
        return format!("{text:?}");
    }
    let mut end = QUOTED_BYTES_MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}... ({} bytes)", &text[..end], text.len())
}

/// `text` as it may appear unquoted in an error (a file or group name): whole when short,
/// else cut and quoted as [`quote`] cuts it.
pub fn cut(text: &str) -> std::borrow::Cow<'_, str> {
    if text.len() <= QUOTED_BYTES_MAX {
        std::borrow::Cow::Borrowed(text)
    } else {
        std::borrow::Cow::Owned(quote(text))
    }
}

/// `message` with every double-quoted span longer than [`QUOTED_BYTES_MAX`] cut as [`quote`]
/// cuts it: a net under every error that quotes what the user wrote, so that a megabyte of
/// value is never echoed back whole. An escaped quote (`\"`) does not end a span.
pub fn shorten_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(4096));
    let mut rest = message;
    while let Some(open) = rest.find('"') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let mut close = None;
        let mut escaped = false;
        for (index, c) in after.char_indices() {
            match c {
                '\\' if !escaped => escaped = true,
                '"' if !escaped => {
                    close = Some(index);
                    break;
                }
                _ => escaped = false,
            }
        }
        let Some(close) = close else {
            out.push('"');
            rest = after;
            continue;
        };
        let inner = &after[..close];
        if inner.len() <= QUOTED_BYTES_MAX {
            out.push('"');
            out.push_str(inner);
            out.push('"');
        } else {
            let mut end = QUOTED_BYTES_MAX;
            while !inner.is_char_boundary(end) {
                end -= 1;
            }
            out.push_str(&format!("\"{}\"... ({} bytes)", &inner[..end], inner.len()));
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the printed table says what the constants are.
    #[test]
    fn table_matches_the_constants() {
        let value = |what: &str| {
            table()
                .iter()
                .find(|l| l.what.starts_with(what))
                .unwrap_or_else(|| panic!("no row {what:?}"))
                .value
        };
        assert_eq!(value("jobs in one run"), JOBS_MAX.to_string());
        assert_eq!(value("file names"), FILES_PER_JOB_MAX.to_string());
        assert_eq!(value("iodepth"), IODEPTH_MAX.to_string());
        assert_eq!(value("groups"), GROUPS_MAX.to_string());
        assert_eq!(value("levels"), GROUP_DEPTH_MAX.to_string());
        assert_eq!(
            value("bytes of a group path"),
            GROUP_PATH_BYTES_MAX.to_string()
        );
        assert_eq!(
            value("bytes of a job file, an"),
            format!("{} MiB", INPUT_FILE_BYTES_MAX >> 20)
        );
        assert_eq!(
            value("bytes of a job file with"),
            format!("{} MiB", JOB_TEXT_BYTES_MAX >> 20)
        );
        assert_eq!(value("bytes of one line"), LINE_BYTES_MAX.to_string());
        assert_eq!(value("includes nested"), INCLUDE_DEPTH_MAX.to_string());
        assert_eq!(value("includes followed"), INCLUDES_MAX.to_string());
        let days = |nanos: Nanos| format!("{} days", nanos / (24 * 3600 * SECOND));
        assert_eq!(value("any time"), days(JOB_TIME_MAX));
        assert_eq!(value("simulated time"), days(SIMULATED_TIME_MAX));
        assert_eq!(value("any size"), "1 EiB (2^60)");
        assert_eq!(SIZE_BYTES_MAX, 1 << 60);
    }

    // Proves a sum of many limits stays inside u64: the reason arithmetic on checked inputs
    // cannot wrap.
    #[test]
    fn sums_of_limits_do_not_wrap() {
        assert!(JOB_TIME_MAX.checked_mul(256).is_some());
        assert!(SIZE_BYTES_MAX.checked_mul(8).is_some());
    }

    // Proves quoted spans in a message are cut, short ones and the rest of the text kept.
    #[test]
    fn long_quoted_spans_are_shortened() {
        let long = "9".repeat(5000);
        let message = format!("job.fio:4: bs: bad size \"{long}\": value is too large");
        let short = shorten_quoted(&message);
        assert_eq!(
            short,
            format!(
                "job.fio:4: bs: bad size \"{}\"... (5000 bytes): value is too large",
                &long[..QUOTED_BYTES_MAX]
            )
        );
        assert_eq!(shorten_quoted("a \"b\" c"), "a \"b\" c");
        assert_eq!(shorten_quoted("unpaired \" quote"), "unpaired \" quote");
        assert_eq!(shorten_quoted("esc \"a\\\"b\" end"), "esc \"a\\\"b\" end");
    }

    // Proves long values are cut at a character boundary and their length said.
    #[test]
    fn quotes_are_bounded() {
        assert_eq!(quote("4k"), "\"4k\"");
        let long = "é".repeat(100);
        let quoted = quote(&long);
        assert!(quoted.len() < QUOTED_BYTES_MAX + 32, "{quoted}");
        assert!(quoted.ends_with("... (200 bytes)"), "{quoted}");
    }
}
