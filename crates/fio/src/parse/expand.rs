//! Substitutions fio makes in an option line before reading it (`dup_and_sub_options` in
//! options.c):
//!
//! 1. `${VAR}` becomes the environment variable's value, or nothing when it is not set (fio's
//!    documented behaviour). The whole line is expanded, name and value.
//! 2. The keywords `$pagesize`, `$mb_memory` and `$ncpus` become the machine's values. When one
//!    was replaced and the line contains `+ - * /`, fio hands the value to `bc`; we evaluate it
//!    as `bc` would (integer arithmetic).
//!
//! The keywords describe the machine iosched runs on, as in fio: `$ncpus` is
//! [`std::thread::available_parallelism`], `$mb_memory` is `MemTotal` from `/proc/meminfo`
//! (Linux only; elsewhere using it is an error), and `$pagesize` is 4096, the page size of
//! every platform iosched targets (std has no portable query for it).

use super::value::{evaluate_integer, ArithUnits};

/// Longest option line fio reads (`OPT_LEN_MAX`), checked again after expansion.
pub(super) const LINE_BYTES_MAX: usize = iosched_core::limits::LINE_BYTES_MAX;

/// Where the keyword values come from.
#[derive(Clone, Debug)]
pub(super) enum Machine {
    /// The machine iosched runs on.
    Real,
    /// Fixed values, for tests.
    #[cfg(test)]
    Fixed {
        ncpus: u64,
        pagesize: u64,
        mb_memory: u64,
    },
}

impl Machine {
    fn ncpus(&self) -> Option<u64> {
        match self {
            Machine::Real => std::thread::available_parallelism()
                .ok()
                .map(|n| n.get() as u64),
            #[cfg(test)]
            Machine::Fixed { ncpus, .. } => Some(*ncpus),
        }
    }

    fn pagesize(&self) -> Option<u64> {
        match self {
            Machine::Real => Some(4096),
            #[cfg(test)]
            Machine::Fixed { pagesize, .. } => Some(*pagesize),
        }
    }

    fn mb_memory(&self) -> Option<u64> {
        match self {
            Machine::Real => {
                let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
                let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
                let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
                Some(kib / 1024)
            }
            #[cfg(test)]
            Machine::Fixed { mb_memory, .. } => Some(*mb_memory),
        }
    }
}

/// An option line after substitution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Expanded {
    /// The line.
    pub text: String,
    /// Variables that were referenced but not set (substituted by nothing).
    pub unset: Vec<String>,
}

/// Applies fio's substitutions to one option line.
pub(super) fn expand(
    line: &str,
    env: &dyn Fn(&str) -> Option<String>,
    machine: &Machine,
) -> Result<Expanded, String> {
    let mut text = String::with_capacity(line.len());
    let mut unset = Vec::new();
    let mut rest = line;
    while let Some(start) = rest.find("${") {
        let Some(length) = rest[start + 2..].find('}') else {
            break;
        };
        text.push_str(&rest[..start]);
        let name = &rest[start + 2..start + 2 + length];
        match env(name) {
            Some(value) => text.push_str(&value),
            None => unset.push(name.to_string()),
        }
        if text.len() > LINE_BYTES_MAX {
            return Err(too_long());
        }
        rest = &rest[start + 2 + length + 1..];
    }
    text.push_str(rest);
    if text.len() > LINE_BYTES_MAX {
        return Err(too_long());
    }

    let mut replaced = false;
    for (keyword, value) in [
        ("$pagesize", machine.pagesize()),
        ("$mb_memory", machine.mb_memory()),
        ("$ncpus", machine.ncpus()),
    ] {
        if !text.contains(keyword) {
            continue;
        }
        let value = value.ok_or_else(|| format!("{keyword} is not known on this machine"))?;
        text = text.replace(keyword, &value.to_string());
        replaced = true;
    }
    if replaced {
        text = keyword_arithmetic(text)?;
    }
    if text.len() > LINE_BYTES_MAX {
        return Err(too_long());
    }
    Ok(Expanded { text, unset })
}

fn too_long() -> String {
    format!("line is longer than {LINE_BYTES_MAX} bytes after expanding variables")
}

/// fio's `bc_calc`: after a keyword was replaced, a value with an operator is computed.
fn keyword_arithmetic(text: String) -> Result<String, String> {
    let has_operator = text.contains(['+', '-', '*', '/']);
    if !has_operator || text.contains('\'') {
        return Ok(text);
    }
    let Some((name, value)) = text.split_once('=') else {
        return Ok(text);
    };
    // fio leaves long values alone rather than risk its buffer.
    if text.len() >= 128 || value.len() > 100 {
        return Ok(text);
    }
    let result = evaluate_integer(value.trim(), ArithUnits::None).map_err(|why| {
        format!(
            "cannot compute \"{}\" ({why}); fio computes values that use $ncpus, $pagesize or \
             $mb_memory with an operator as integer arithmetic",
            value.trim()
        )
    })?;
    Ok(format!("{name}={result}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "SIZE" => Some("64m".into()),
            "N" => Some("4".into()),
            _ => None,
        }
    }

    const MACHINE: Machine = Machine::Fixed {
        ncpus: 8,
        pagesize: 4096,
        mb_memory: 16000,
    };

    #[test]
    fn expands_environment_variables() {
        let expanded = expand("size=${SIZE}", &env, &MACHINE).unwrap();
        assert_eq!(expanded.text, "size=64m");
        assert!(expanded.unset.is_empty());
        let expanded = expand("${N}${N}x", &env, &MACHINE).unwrap();
        assert_eq!(expanded.text, "44x");
    }

    // fio substitutes an empty string for an unset variable; we record the name for messages.
    #[test]
    fn unset_variables_become_empty() {
        let expanded = expand("size=${NOPE}", &env, &MACHINE).unwrap();
        assert_eq!(expanded.text, "size=");
        assert_eq!(expanded.unset, vec!["NOPE".to_string()]);
        assert_eq!(expand("a=${}", &env, &MACHINE).unwrap().text, "a=");
        assert_eq!(expand("a=${open", &env, &MACHINE).unwrap().text, "a=${open");
    }

    #[test]
    fn keywords_and_their_arithmetic() {
        assert_eq!(
            expand("numjobs=$ncpus", &env, &MACHINE).unwrap().text,
            "numjobs=8"
        );
        assert_eq!(
            expand("bs=$pagesize", &env, &MACHINE).unwrap().text,
            "bs=4096"
        );
        assert_eq!(
            expand("size=8*$mb_memory", &env, &MACHINE).unwrap().text,
            "size=128000"
        );
        assert_eq!(
            expand("numjobs=$ncpus/3", &env, &MACHINE).unwrap().text,
            "numjobs=2"
        );
        assert!(expand("filename=/tmp/$ncpus-x", &env, &MACHINE).is_err());
        // Without a keyword, operators are left for the value parser.
        assert_eq!(expand("bs=4k-8k", &env, &MACHINE).unwrap().text, "bs=4k-8k");
    }

    #[test]
    fn real_machine_values_are_available() {
        assert!(Machine::Real.ncpus().unwrap() >= 1);
        assert_eq!(Machine::Real.pagesize(), Some(4096));
    }

    #[test]
    fn bounds_expanded_length() {
        let big = |_: &str| Some("x".repeat(LINE_BYTES_MAX));
        assert!(expand("a=${X}${X}", &big, &MACHINE).is_err());
    }
}
