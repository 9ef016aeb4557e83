//! Applying option lines to a section's settings, as fio applies them to a `thread_options`.
//!
//! A `[global]` section applies its lines to the defaults; a job starts from a copy of the
//! defaults as they stand at its header and applies its own lines. Each value is read when its
//! line is applied, with the `kb_base` then in force, as fio does; within a section fio applies
//! `kb_base` first and `filename` last (`parse_priority`). Per-direction values and file lists
//! merge with what was inherited, as in fio (a job's `filename` adds to a global one).
//!
//! Applying a line also decides its disposition: refused options fail here, noted ones leave
//! a note. What depends on several options together is left to [`super::resolve`].

use super::disposition::{disposition, Disposition};
use super::table::{self, FioOption, Kind, TimeUnit};
use super::value::{self, Micros, Number};
use super::ParseError;
use crate::job::{RandomDistribution, RwMode};
use crate::{Location, Note};
use iosched_core::limits;
use std::collections::HashMap;

/// fio's limit on entries in a `bssplit` direction (`BSSPLIT_MAX`).
const BSSPLIT_ENTRIES_MAX: usize = 64;
/// fio's limit on zones in a zoned distribution (`ZONESPLIT_MAX`).
const ZONES_MAX: usize = 256;
/// fio's limit on `percentile_list` entries (`FIO_IO_U_LIST_MAX_LEN`).
pub(super) const PERCENTILES_MAX: usize = 20;

/// A size as fio's size options take it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Size {
    /// Bytes.
    Bytes(u64),
    /// Percent of the file or device (0 is fio's "not set").
    Percent(u32),
}

/// A value, read according to its option.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Value {
    /// Booleans and flags.
    Flag(bool),
    /// Integers (already multiplied by any suffix).
    Int(i128),
    /// Sizes that may be percentages.
    Size(Size),
    /// Durations.
    Time(Micros),
    /// `low-high` durations (`startdelay`).
    TimeRange(Micros, Micros),
    /// `low-high` sizes (`filesize`).
    SizeRange(u64, u64),
    /// Per-direction numbers; `None` is fio's default for that direction.
    Directions([Option<i128>; 3]),
    /// Per-direction ranges (`bsrange`).
    DirectionRanges([Option<(u64, u64)>; 3]),
    /// Per-direction weighted sizes (`bssplit`), percentages filled in.
    Split([Option<Vec<(u64, u32)>>; 3]),
    /// `cmdprio_bssplit` for reads and writes: block size, percentage, and the entry's own
    /// (class, level, hint) when it names one.
    PrioSplit([Option<Vec<PrioSplitEntry>>; 2]),
    /// Text: words, names, paths.
    Text(String),
    /// Float lists.
    Floats(Vec<f64>),
    /// Target files, directory applied, in order.
    Files(Vec<String>),
    /// `rw`: the mode and its postfix.
    Rw {
        /// The access pattern.
        mode: RwMode,
        /// For random modes, I/Os per random offset.
        random_run: u32,
        /// For sequential modes, bytes added to the offset after each I/O (negative: backwards).
        skip_bytes: i64,
    },
    /// `random_distribution`.
    Distribution(RandomDistribution),
}

/// One option's current value and where it was set.
#[derive(Clone, Debug)]
pub(super) struct Setting {
    /// The option.
    pub option: &'static FioOption,
    /// Its value.
    pub value: Value,
    /// Where it was last set.
    pub location: Location,
}

/// A section's options: fio's `thread_options` with its "is set" bits.
#[derive(Clone, Debug, Default)]
pub(super) struct Settings {
    values: HashMap<&'static str, Setting>,
}

/// An option line split into name and value, after expansion.
#[derive(Clone, Debug)]
pub(super) struct OptionLine {
    /// The option name as written.
    pub name: String,
    /// The value, `None` when the option is bare.
    pub value: Option<String>,
    /// Where it was written.
    pub location: Location,
    /// `${VAR}`s in the line that were not set.
    pub unset: Vec<String>,
}

impl OptionLine {
    /// Splits `name=value` at the first '=' (fio's `get_option`); blanks around both are
    /// dropped.
    pub(super) fn split(text: &str, location: Location, unset: Vec<String>) -> Self {
        let (name, value) = match text.split_once('=') {
            Some((name, value)) => (name.trim(), Some(value.trim().to_string())),
            None => (text.trim(), None),
        };
        OptionLine {
            name: name.to_string(),
            value,
            location,
            unset,
        }
    }
}

impl Settings {
    /// The setting of option `name` (its canonical name), if set.
    pub(super) fn get(&self, name: &str) -> Option<&Setting> {
        self.values.get(name)
    }

    /// The value of option `name`, if set.
    pub(super) fn value(&self, name: &str) -> Option<&Value> {
        self.values.get(name).map(|s| &s.value)
    }

    /// Every set option.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Setting> {
        self.values.values()
    }

    /// The `kb_base` in force: 1024 unless set to 1000.
    pub(super) fn kb_base(&self) -> u64 {
        match self.value("kb_base") {
            Some(Value::Text(text)) if text == "1000" => 1000,
            _ => 1024,
        }
    }

    /// Applies one option line: finds the option, reads the value, applies the option's
    /// disposition, and stores the value. Returns the option.
    pub(super) fn apply(
        &mut self,
        line: &OptionLine,
        notes: &mut Vec<Note>,
    ) -> Result<&'static FioOption, ParseError> {
        let Some(option) = table::find(&line.name) else {
            return Err(unknown_option(line));
        };
        let value = self
            .read(option, line)
            .and_then(|value| within_limits(option, value))
            .map_err(|why| value_error(line, option, why))?;
        self.store(option, value, &line.location);

        let shown = match &line.value {
            Some(text) => format!("{}={}", line.name, text),
            None => line.name.clone(),
        };
        match disposition(option) {
            Disposition::Honoured => {}
            Disposition::Noted(_)
                if option.name == "exec_prerun"
                    && line
                        .value
                        .as_deref()
                        .and_then(super::resolve::drop_caches)
                        .is_some() =>
            {
                notes.push(Note {
                    location: line.location.clone(),
                    option: option.name.to_string(),
                    message: "the simulator drops the clean pages of its page cache as the job \
                              starts; the real engine does not run commands"
                        .into(),
                })
            }
            Disposition::Noted(reason) => notes.push(Note {
                location: line.location.clone(),
                option: option.name.to_string(),
                message: reason.to_string(),
            }),
            Disposition::Refused(reason) => {
                return Err(ParseError::at(
                    &line.location,
                    format!("{shown}: refused: {reason}"),
                ));
            }
            Disposition::RefusedUnlessDefault(reason) => {
                let current = self.value(option.name);
                if !current.is_some_and(|value| is_inert(option, value)) {
                    return Err(ParseError::at(
                        &line.location,
                        format!("{shown}: refused: {reason}"),
                    ));
                }
            }
        }
        Ok(option)
    }

    fn store(&mut self, option: &'static FioOption, value: Value, location: &Location) {
        // fio's callbacks make these pairs two views of one setting.
        let (option, value) = match (option.name, value) {
            ("rwmixwrite", Value::Int(write)) => (find("rwmixread"), Value::Int(100 - write)),
            ("buffered", Value::Flag(buffered)) => (find("direct"), Value::Flag(!buffered)),
            (_, value) => (option, value),
        };
        let merged = match (self.values.get(option.name).map(|s| &s.value), value) {
            (Some(Value::Directions(old)), Value::Directions(new)) => {
                Value::Directions(merge(old, &new))
            }
            (Some(Value::DirectionRanges(old)), Value::DirectionRanges(new)) => {
                Value::DirectionRanges(merge(old, &new))
            }
            (Some(Value::Split(old)), Value::Split(new)) => Value::Split(merge(old, &new)),
            (Some(Value::Files(old)), Value::Files(new)) => {
                Value::Files(old.iter().chain(new.iter()).cloned().collect())
            }
            (_, value) => value,
        };
        self.values.insert(
            option.name,
            Setting {
                option,
                value: merged,
                location: location.clone(),
            },
        );
    }

    /// Reads a line's value as its option takes it.
    fn read(&self, option: &'static FioOption, line: &OptionLine) -> Result<Value, String> {
        let kb_base = self.kb_base();
        let text = line.value.as_deref();
        match option.name {
            "rw" => return read_rw(option, required(text)?, kb_base),
            "bsrange" => {
                let mut ranges = [None; 3];
                for (direction, part) in value::per_direction(required(text)?)? {
                    let (low, high) = value::size_range(part, kb_base, true)?;
                    check_min(option, i128::from(low))?;
                    ranges[direction] = Some((low, high));
                }
                return Ok(Value::DirectionRanges(ranges));
            }
            "bssplit" => return read_bssplit(required(text)?, kb_base),
            "cmdprio_bssplit" => return read_cmdprio_bssplit(required(text)?, kb_base),
            "filesize" => {
                let (low, high) = value::size_range(required(text)?, kb_base, false)?;
                check_min(option, i128::from(low))?;
                return Ok(Value::SizeRange(low, high));
            }
            "startdelay" => return read_time_range(required(text)?),
            "filename" => return Ok(Value::Files(self.read_filenames(required(text)?)?)),
            "random_distribution" => return read_distribution(option, required(text)?),
            "percentile_list" => {
                let floats = read_floats(option, required(text)?)?;
                if floats.len() > PERCENTILES_MAX {
                    return Err(format!("at most {PERCENTILES_MAX} percentiles"));
                }
                return Ok(Value::Floats(floats));
            }
            _ => {}
        }
        match option.kind {
            Kind::Bool => Ok(Value::Flag(value::boolean(required(text)?)?)),
            Kind::StrSet => match text {
                None => Ok(Value::Flag(true)),
                Some(text) => Ok(Value::Flag(value::integer(text, kb_base)? != 0)),
            },
            Kind::Int | Kind::Ull if option.directions >= 2 => {
                let mut values = [None; 3];
                for (direction, part) in value::per_direction(required(text)?)? {
                    // fio has no third slot for two-direction options and drops its value.
                    if direction < usize::from(option.directions) {
                        if single(part).is_err() {
                            let range = if option.name == "bs" {
                                "; for a range of sizes use bsrange"
                            } else {
                                ""
                            };
                            return Err(format!(
                                "\"{part}\": separate the read, write and trim values with ',' \
                                 (fio would take ':' and '-' as separators too){range}"
                            ));
                        }
                        values[direction] = Some(read_number(option, part, kb_base)?);
                    }
                }
                Ok(Value::Directions(values))
            }
            Kind::Int | Kind::Ull | Kind::StrVal | Kind::StrValTime | Kind::StrValZone => {
                let text = required(text)?;
                single(text)?;
                if option.kind == Kind::StrValZone && text.trim().ends_with(['z', 'Z']) {
                    return Err(format!(
                        "\"{text}\": zone units apply only to zoned I/O, which is not modelled"
                    ));
                }
                match option.time_unit {
                    Some(unit) => Ok(Value::Time(value::micros(text, unit)?)),
                    None if option.kind == Kind::StrValZone || option.kind == Kind::StrVal => {
                        read_size(option, text, kb_base)
                    }
                    None => Ok(Value::Int(read_number(option, text, kb_base)?)),
                }
            }
            Kind::Str | Kind::StrUll | Kind::StrMulti => {
                if option.choices.is_empty() {
                    return Ok(Value::Text(text.unwrap_or_default().to_string()));
                }
                let text = required(text)?;
                check_choice(option, text)?;
                Ok(Value::Text(text.to_string()))
            }
            Kind::StrStore => {
                let text = required(text)?;
                if text.is_empty() {
                    return Err("empty value".into());
                }
                Ok(Value::Text(text.to_string()))
            }
            Kind::FloatList => Ok(Value::Floats(read_floats(option, required(text)?)?)),
            Kind::Range => unreachable!("bsrange is fio's only range option"),
            Kind::Deprecated | Kind::SoftDeprecated => {
                Ok(Value::Text(text.unwrap_or_default().to_string()))
            }
        }
    }

    /// fio's `str_filename_cb`: names separated by ':' (a '\:' is a literal colon), each under
    /// the first `directory` if one is set.
    fn read_filenames(&self, text: &str) -> Result<Vec<String>, String> {
        let directory = match self.value("directory") {
            Some(Value::Text(directories)) => split_colon_list(directories).into_iter().next(),
            _ => None,
        };
        let names: Vec<String> = split_colon_list(text)
            .into_iter()
            .map(|name| match &directory {
                Some(directory) => format!("{directory}/{name}"),
                None => name,
            })
            .collect();
        if names.is_empty() {
            return Err("no file name".into());
        }
        Ok(names)
    }
}

fn find(name: &str) -> &'static FioOption {
    table::find(name).expect("option in fio's table")
}

fn merge<T: Clone>(old: &[Option<T>; 3], new: &[Option<T>; 3]) -> [Option<T>; 3] {
    std::array::from_fn(|i| new[i].clone().or_else(|| old[i].clone()))
}

fn required(text: Option<&str>) -> Result<&str, String> {
    text.ok_or_else(|| "needs a value (name=value)".to_string())
}

/// fio splits a number option's value at ',', ':' and '-' into per-direction values and
/// silently keeps only the first for options that have one direction; refuse such values.
/// (A leading '-' is a sign, and parentheses hold arithmetic.)
fn single(text: &str) -> Result<(), String> {
    let body = text.trim();
    let body = body.strip_prefix('-').unwrap_or(body);
    if body.starts_with('(') {
        return Ok(());
    }
    if body.contains([',', ':', '-']) {
        return Err(format!("\"{text}\": takes a single value"));
    }
    Ok(())
}

/// The parts of a ':'-separated list, where '\:' is a ':' inside a part (fio's `get_next_str`).
pub(super) fn split_colon_list(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&':') => {
                current.push(':');
                chars.next();
            }
            ':' => {
                if !current.is_empty() {
                    parts.push(std::mem::take(&mut current));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
}

fn read_number(option: &FioOption, text: &str, kb_base: u64) -> Result<i128, String> {
    let number = match (option.time_unit, option.kind) {
        (Some(unit), _) => i128::from(value::micros(text, unit)?),
        // fio's 64-bit options are quantities of data (bs, rate, ...).
        (None, Kind::Ull) => i128::from(value::bytes(text, kb_base)?),
        (None, _) => value::integer(text, kb_base)?,
    };
    check_min(option, number)?;
    check_max(option, number)?;
    Ok(number)
}

fn read_size(option: &FioOption, text: &str, kb_base: u64) -> Result<Value, String> {
    match value::number(text, value::Context::Size { kb_base })? {
        Number::Value(v) if v < 0 => Err(format!("bad size \"{}\": negative", text.trim())),
        Number::Value(v) => {
            check_min(option, v)?;
            check_max(option, v)?;
            let bytes = u64::try_from(v)
                .map_err(|_| format!("bad size \"{}\": value is too large", text.trim()))?;
            Ok(Value::Size(Size::Bytes(bytes)))
        }
        Number::Percent(p) if (0..=100).contains(&p) => match option.name {
            "size" | "io_size" | "offset" | "offset_increment" => {
                Ok(Value::Size(Size::Percent(p as u32)))
            }
            _ => Err(format!(
                "bad size \"{}\": a percentage is not accepted here",
                text.trim()
            )),
        },
        Number::Percent(_) => Err(format!(
            "bad size \"{}\": a percentage must be between 0 and 100",
            text.trim()
        )),
    }
}

fn check_min(option: &FioOption, value: i128) -> Result<(), String> {
    match option.min {
        Some(min) if value < i128::from(min) => Err(match option.max {
            Some(max) => format!("{value} is out of range ({min} to {max})"),
            None => format!("{value} is out of range (minimum {min})"),
        }),
        _ => Ok(()),
    }
}

fn check_max(option: &FioOption, value: i128) -> Result<(), String> {
    let max = match (option.max, option.kind) {
        (Some(max), _) => i128::from(max),
        // fio caps an int option with no stated maximum at UINT_MAX.
        (None, Kind::Int) => i128::from(u32::MAX),
        (None, _) => i128::from(u64::MAX),
    };
    if value > max {
        return Err(match option.min {
            Some(min) => format!("{value} is out of range ({min} to {max})"),
            None => format!("{value} is out of range (maximum {max})"),
        });
    }
    Ok(())
}

/// fio matches a word against the choices exactly, up to any ':' or ',' (`str_match_len`).
fn check_choice<'t>(option: &FioOption, text: &'t str) -> Result<&'t str, String> {
    let word = text.split([':', ',']).next().unwrap_or("").trim();
    if option.choices.contains(&word) {
        return Ok(word);
    }
    Err(format!(
        "bad value \"{text}\" (valid: {})",
        option.choices.join(", ")
    ))
}

fn read_floats(option: &FioOption, text: &str) -> Result<Vec<f64>, String> {
    let mut floats = Vec::new();
    for part in text.split(':') {
        let value = value::float(part)?;
        if let Some((min, max)) = option.float_range {
            if value < min || value > max {
                return Err(format!("{value} is out of range ({min} to {max})"));
            }
        }
        floats.push(value);
    }
    Ok(floats)
}

/// `rw=mode[:postfix]` (fio's `str_rw_cb`): for random modes the postfix counts I/Os per
/// random offset (1 to 2^32-1); for sequential modes it is a size skipped after each I/O.
fn read_rw(option: &FioOption, text: &str, kb_base: u64) -> Result<Value, String> {
    let word = check_choice(option, text)?;
    let mode = match word {
        "read" => RwMode::Read,
        "write" => RwMode::Write,
        "trim" => RwMode::Trim,
        "randread" => RwMode::RandRead,
        "randwrite" => RwMode::RandWrite,
        "randtrim" => RwMode::RandTrim,
        "rw" | "readwrite" => RwMode::ReadWrite,
        "randrw" => RwMode::RandReadWrite,
        "trimwrite" => RwMode::TrimWrite,
        _ => RwMode::RandTrimWrite,
    };
    let postfix = text.split_once(':').map(|(_, p)| p.trim());
    let (mut random_run, mut skip_bytes) = (1, 0);
    if let Some(postfix) = postfix {
        if mode.is_random() {
            let run = value::integer(postfix, kb_base)?;
            random_run = u32::try_from(run)
                .ok()
                .filter(|run| *run > 0)
                .ok_or_else(|| {
                    format!("\"{postfix}\": I/Os per random offset must be 1 to 4294967295")
                })?;
        } else {
            // fio's str_rw_cb: a leading '-' makes the offset go backwards (ddir_seq_add < 0).
            let (negative, size) = match postfix.strip_prefix('-') {
                Some(rest) => (true, rest.trim()),
                None => (false, postfix),
            };
            let bytes = value::bytes(size, kb_base).map_err(|why| {
                format!("{why} (the postfix of a sequential mode is the bytes to skip)")
            })?;
            let bytes = i64::try_from(bytes)
                .map_err(|_| format!("\"{postfix}\": more than 2^63 bytes to skip"))?;
            skip_bytes = if negative { -bytes } else { bytes };
        }
    }
    Ok(Value::Rw {
        mode,
        random_run,
        skip_bytes,
    })
}

/// `bssplit` (fio's `str_bssplit_cb`): per direction, sizes and percentages; blank ones share
/// what the others leave, and fio's rounding remainder goes to the largest share, as fio's
/// lookup effectively does, so that each direction sums to 100.
fn read_bssplit(text: &str, kb_base: u64) -> Result<Value, String> {
    let mut split: [Option<Vec<(u64, u32)>>; 3] = [None, None, None];
    for (direction, part) in value::split_directions(text).into_iter().enumerate() {
        let Some(part) = part else { continue };
        let entries = value::split_entries(part, kb_base, BSSPLIT_ENTRIES_MAX)?;
        if entries.is_empty() {
            continue;
        }
        if let Some((size, _)) = entries.iter().find(|(size, _)| *size == 0) {
            return Err(format!(
                "block size {size} in \"{part}\" must be at least 1"
            ));
        }
        split[direction] = Some(fill_percentages(&entries, part)?);
    }
    Ok(Value::Split(split))
}

/// One `cmdprio_bssplit` entry: block size, percentage, and its own (class, level, hint).
pub(super) type PrioSplitEntry = (u64, u32, Option<(u8, u8, u16)>);

/// `cmdprio_bssplit=bs/perc[/class/level[/hint]]:...[,...]` as fio's
/// `parse_cmdprio_bssplit_entry` reads it, per direction (trim ignored): entries of 0% are
/// dropped, the rest sorted by block size (a stable sort, so same-size entries keep their
/// order). Where fio clamps an out-of-range class, level, hint or percentage, this refuses it.
fn read_cmdprio_bssplit(text: &str, kb_base: u64) -> Result<Value, String> {
    let mut split: [Option<Vec<PrioSplitEntry>>; 2] = [None, None];
    let parts = value::split_directions(text);
    for (direction, part) in parts.into_iter().take(2).enumerate() {
        let Some(part) = part else { continue };
        let mut entries = Vec::new();
        for entry in part.split(':') {
            if entry.trim().is_empty() {
                break;
            }
            if entries.len() == BSSPLIT_ENTRIES_MAX {
                return Err(format!(
                    "more than {BSSPLIT_ENTRIES_MAX} entries in \"{part}\""
                ));
            }
            let fields: Vec<&str> = entry.split('/').map(str::trim).collect();
            let number = |what: &str, text: &str, max: u32| -> Result<u32, String> {
                let parsed: u32 = text.parse().map_err(|_| {
                    format!("bad {what} \"{text}\" in entry \"{entry}\": a whole number is needed")
                })?;
                if parsed > max {
                    return Err(format!(
                        "{what} {parsed} in entry \"{entry}\" is over {max}"
                    ));
                }
                Ok(parsed)
            };
            let size = value::bytes(fields[0], kb_base)?;
            let percent = match fields.get(1) {
                None | Some(&"") => 0,
                Some(text) => number("percentage", text, 100)?,
            };
            let prio = match fields.len() {
                1 | 2 => None,
                4 | 5 => {
                    let class = number("class", fields[2], 3)? as u8;
                    let level = number("level", fields[3], 7)? as u8;
                    let hint = match fields.get(4) {
                        Some(text) => number("hint", text, 1023)? as u16,
                        None => 0,
                    };
                    Some((class, level, hint))
                }
                _ => {
                    return Err(format!(
                        "entry \"{entry}\" is not bs/percentage, bs/percentage/class/level or \
                         bs/percentage/class/level/hint"
                    ))
                }
            };
            if percent > 0 {
                entries.push((size, percent, prio));
            }
        }
        entries.sort_by_key(|entry| entry.0);
        for size in entries.iter().map(|entry| entry.0) {
            let total: u32 = entries.iter().filter(|e| e.0 == size).map(|e| e.1).sum();
            if total > 100 {
                return Err(format!(
                    "the percentages for block size {size} add up to {total}, more than 100"
                ));
            }
        }
        if !entries.is_empty() {
            split[direction] = Some(entries);
        }
    }
    Ok(Value::PrioSplit(split))
}

fn fill_percentages(entries: &[(u64, Option<u32>)], text: &str) -> Result<Vec<(u64, u32)>, String> {
    let given: u32 = entries.iter().filter_map(|e| e.1).sum();
    let missing = entries.iter().filter(|e| e.1.is_none()).count() as u32;
    if given > 100 {
        return Err(format!(
            "percentages in \"{text}\" add up to {given}, more than 100"
        ));
    }
    if missing == 0 && given < 100 {
        return Err(format!(
            "percentages in \"{text}\" add up to {given}, not 100"
        ));
    }
    let share = (100 - given).checked_div(missing).unwrap_or(0);
    let mut filled: Vec<(u64, u32)> = entries
        .iter()
        .map(|(size, percent)| (*size, percent.unwrap_or(share)))
        .collect();
    let total: u32 = filled.iter().map(|e| e.1).sum();
    if total < 100 {
        let largest = (0..filled.len())
            .max_by_key(|&i| (filled[i].1, i))
            .expect("entries are not empty");
        filled[largest].1 += 100 - total;
    }
    Ok(filled)
}

/// `startdelay=low-high` (or a single value): seconds by default, swapped if reversed.
fn read_time_range(text: &str) -> Result<Value, String> {
    let body = text.trim();
    let separator = body
        .find(',')
        .or_else(|| body.find(':'))
        .or_else(|| body.get(1..).and_then(|rest| rest.find('-')).map(|i| i + 1));
    let (low, high) = match separator {
        Some(at) => (
            value::micros(&body[..at], TimeUnit::Seconds)?,
            value::micros(&body[at + 1..], TimeUnit::Seconds)?,
        ),
        None => {
            let value = value::micros(body, TimeUnit::Seconds)?;
            (value, value)
        }
    };
    Ok(Value::TimeRange(low.min(high), low.max(high)))
}

/// `random_distribution` (fio's `str_random_distribution_cb`), refusing the forms the
/// simulator cannot reproduce.
fn read_distribution(option: &FioOption, text: &str) -> Result<Value, String> {
    let word = check_choice(option, text)?;
    let postfix = text.split_once(':').map(|(_, p)| p.trim());
    let parameter = |default: f64| -> Result<f64, String> {
        match postfix {
            None | Some("") => Ok(default),
            Some(p) if p.contains(':') => {
                Err(format!("\"{text}\": a distribution centre is not modelled"))
            }
            Some(p) => value::float(p),
        }
    };
    let distribution = match word {
        "random" => RandomDistribution::Random,
        "zipf" => {
            let theta = parameter(1.1)?;
            if theta == 1.0 {
                return Err("zipf theta must be different from 1.0".into());
            }
            RandomDistribution::Zipf(theta)
        }
        "pareto" => {
            let power = parameter(0.2)?;
            if power <= 0.0 || power >= 1.0 {
                return Err(format!(
                    "pareto power {power} is out of range (0 < power < 1)"
                ));
            }
            RandomDistribution::Pareto(power)
        }
        "normal" => {
            let deviation = parameter(0.0)?;
            if !(0.0..100.0).contains(&deviation) {
                return Err(format!(
                    "normal deviation {deviation} is out of range (0 <= deviation < 100)"
                ));
            }
            RandomDistribution::Normal(deviation)
        }
        "zoned" => read_zoned(postfix.unwrap_or(""))?,
        other => {
            return Err(format!(
                "\"{other}\" distributions are not modelled (use random, zipf, pareto, normal \
                 or zoned)"
            ))
        }
    };
    Ok(Value::Distribution(distribution))
}

/// `zoned:access/range:...` with one set of zones for every direction.
fn read_zoned(text: &str) -> Result<RandomDistribution, String> {
    let [read, write, trim] = value::split_directions(text);
    let sets: Vec<&str> = [read, write, trim].into_iter().flatten().collect();
    let Some(first) = sets.first() else {
        return Err("zoned distribution without zones".into());
    };
    if sets.iter().any(|set| set.trim() != first.trim()) {
        return Err("different zones per direction are not modelled".into());
    }
    // fio's zone_split_ddir: an empty or zero percentage is missing, and the missing ones
    // share what the others leave ("zoned:50/5:30/15:20/": the last zone is the other 80%).
    let mut zones: Vec<(Option<u32>, Option<u32>)> = Vec::new();
    let percentage = |text: &str, what: &str| -> Result<Option<u32>, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(None);
        }
        let value: u32 = text
            .parse()
            .map_err(|_| format!("bad {what} percentage \"{text}\""))?;
        Ok((value > 0).then_some(value.min(100)))
    };
    for entry in first.split(':') {
        if entry.trim().is_empty() {
            break;
        }
        if zones.len() == ZONES_MAX {
            return Err(format!("more than {ZONES_MAX} zones"));
        }
        let (access, range) = entry
            .split_once('/')
            .ok_or_else(|| format!("zone \"{entry}\" needs access%/range%"))?;
        zones.push((percentage(access, "access")?, percentage(range, "range")?));
    }
    let fill = |values: Vec<Option<u32>>, what: &str| -> Result<Vec<f64>, String> {
        let given: u32 = values.iter().flatten().sum();
        let missing = values.iter().filter(|v| v.is_none()).count() as u32;
        if given > 100 {
            return Err(format!(
                "zone {what} percentages add up to {given}, more than 100"
            ));
        }
        let share = if missing > 0 {
            f64::from(100 - given) / f64::from(missing)
        } else {
            0.0
        };
        Ok(values
            .into_iter()
            .map(|v| v.map_or(share, f64::from))
            .collect())
    };
    let access = fill(zones.iter().map(|z| z.0).collect(), "access")?;
    let range = fill(zones.iter().map(|z| z.1).collect(), "range")?;
    let access_total: f64 = access.iter().sum();
    if (access_total - 100.0).abs() > 1e-9 {
        return Err(format!(
            "zone access percentages add up to {access_total}, not 100"
        ));
    }
    let zones: Vec<(f64, f64)> = access.into_iter().zip(range).collect();
    Ok(RandomDistribution::Zoned(zones))
}

/// Whether a value leaves fio's behaviour as at its default, for options refused otherwise.
fn is_inert(option: &'static FioOption, value: &Value) -> bool {
    if let Some(default) = option.default {
        let line = OptionLine::split(
            &format!("{}={default}", option.name),
            Location {
                file: String::new(),
                line: 0,
            },
            Vec::new(),
        );
        if let Ok(default) = Settings::default().read(option, &line) {
            if default == *value {
                return true;
            }
        }
    }
    match value {
        Value::Flag(flag) => !flag,
        Value::Int(number) => *number == 0,
        Value::Size(Size::Bytes(bytes)) => *bytes == 0,
        Value::Time(time) => *time == 0,
        Value::Directions(values) => values.iter().all(|v| v.unwrap_or(0) == 0),
        Value::Text(text) => text.is_empty() || text == "0" || text == "none",
        _ => false,
    }
}

fn unknown_option(line: &OptionLine) -> ParseError {
    let mut message = format!("unknown option \"{}\"", line.name);
    if let Some(suggestion) = table::nearest(&line.name) {
        message.push_str(&format!(" (did you mean \"{suggestion}\"?)"));
    }
    ParseError::at(&line.location, with_unset_hint(message, &line.unset))
}

/// `value` when every time in it is within [`limits::JOB_TIME_MAX`] and every size within
/// [`limits::SIZE_BYTES_MAX`]: bounds far past any real job, which keep every sum the engines
/// make of them inside `u64` (a `thinktime` of 2^64 ns wrapped simulated time backwards).
fn within_limits(option: &FioOption, value: Value) -> Result<Value, String> {
    // Seeds are the one kind of number that may be any 64-bit value.
    if option.name == "randseed" {
        return Ok(value);
    }
    let time_max_us = limits::JOB_TIME_MAX / 1_000;
    let time = |micros: Micros| {
        if micros > time_max_us {
            Err(format!(
                "{} is more than iosched's limit for any time in a job file, {} days ({} s)",
                human_micros(micros),
                limits::JOB_TIME_MAX / (86_400 * 1_000_000_000),
                limits::JOB_TIME_MAX / 1_000_000_000
            ))
        } else {
            Ok(())
        }
    };
    let size = |bytes: u64| {
        if bytes > limits::SIZE_BYTES_MAX {
            Err(format!(
                "{bytes} bytes is more than iosched's limit for any size, 1 EiB (2^60 bytes)"
            ))
        } else {
            Ok(())
        }
    };
    match &value {
        Value::Time(micros) => time(*micros)?,
        Value::TimeRange(low, high) => {
            time(*low)?;
            time(*high)?;
        }
        Value::Size(Size::Bytes(bytes)) => size(*bytes)?,
        Value::SizeRange(low, high) => {
            size(*low)?;
            size(*high)?;
        }
        Value::DirectionRanges(ranges) => {
            for (low, high) in ranges.iter().flatten() {
                size(*low)?;
                size(*high)?;
            }
        }
        Value::Split(splits) => {
            for (bytes, _) in splits.iter().flatten().flatten() {
                size(*bytes)?;
            }
        }
        Value::Rw { skip_bytes, .. } => size(skip_bytes.unsigned_abs())?,
        Value::Int(int) if option.name == "iodepth" && *int > i128::from(limits::IODEPTH_MAX) => {
            return Err(format!(
                "{int} is more than iosched's limit, {}",
                limits::IODEPTH_MAX
            ))
        }
        // Every other number in a job file is a size, a rate or a count, and none means
        // anything past 2^60; seeds are the one kind of number that is any 64-bit value.
        Value::Int(int)
            if option.name != "randseed"
                && int.unsigned_abs() > u128::from(limits::SIZE_BYTES_MAX) =>
        {
            return Err(format!(
                "{int} is more than iosched's limit for any number, 2^60"
            ))
        }
        Value::Directions(values) => {
            for int in values.iter().flatten() {
                if int.unsigned_abs() > u128::from(limits::SIZE_BYTES_MAX) {
                    return Err(format!(
                        "{int} is more than iosched's limit for any size or rate, 1 EiB (2^60)"
                    ));
                }
            }
        }
        _ => {}
    }
    Ok(value)
}

/// Microseconds as a person reads them, in the largest unit that divides them.
fn human_micros(micros: Micros) -> String {
    for (unit, per) in [
        ("d", 86_400_000_000),
        ("h", 3_600_000_000),
        ("m", 60_000_000),
        ("s", 1_000_000),
        ("ms", 1_000),
    ] {
        if micros >= per && micros.is_multiple_of(per) {
            return format!("{}{unit}", micros / per);
        }
    }
    format!("{micros}us")
}

fn value_error(line: &OptionLine, option: &FioOption, why: String) -> ParseError {
    let name = if line.name == option.name {
        line.name.clone()
    } else {
        format!("{} ({})", line.name, option.name)
    };
    ParseError::at(
        &line.location,
        with_unset_hint(format!("{name}: {why}"), &line.unset),
    )
}

/// Appends a hint naming variables that expanded to nothing.
pub(super) fn with_unset_hint(message: String, unset: &[String]) -> String {
    if unset.is_empty() {
        return message;
    }
    let names: Vec<String> = unset.iter().map(|n| format!("${{{n}}}")).collect();
    format!(
        "{message} ({} not set; fio substitutes an empty string)",
        names.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn location(line: u32) -> Location {
        Location {
            file: "t.fio".into(),
            line,
        }
    }

    fn apply(settings: &mut Settings, text: &str) -> Result<(), ParseError> {
        let mut notes = Vec::new();
        settings
            .apply(
                &OptionLine::split(text, location(1), Vec::new()),
                &mut notes,
            )
            .map(|_| ())
    }

    #[test]
    fn per_direction_values_merge_with_inherited_ones() {
        let mut settings = Settings::default();
        apply(&mut settings, "bs=16k").unwrap();
        apply(&mut settings, "bs=,8k,").unwrap();
        assert_eq!(
            settings.value("bs"),
            Some(&Value::Directions([Some(16384), Some(8192), Some(16384)]))
        );
    }

    #[test]
    fn kb_base_applies_to_later_values() {
        let mut settings = Settings::default();
        apply(&mut settings, "kb_base=1000").unwrap();
        apply(&mut settings, "size=1m").unwrap();
        assert_eq!(
            settings.value("size"),
            Some(&Value::Size(Size::Bytes(1_000_000)))
        );
    }

    #[test]
    fn paired_options_share_a_setting() {
        let mut settings = Settings::default();
        apply(&mut settings, "rwmixwrite=30").unwrap();
        assert_eq!(settings.value("rwmixread"), Some(&Value::Int(70)));
        apply(&mut settings, "buffered=0").unwrap();
        assert_eq!(settings.value("direct"), Some(&Value::Flag(true)));
    }

    #[test]
    fn bssplit_fills_blank_percentages() {
        let mut settings = Settings::default();
        apply(&mut settings, "bssplit=4k/50:1k/:32k/").unwrap();
        let expected = Some(vec![(4096, 50), (1024, 25), (32768, 25)]);
        assert_eq!(
            settings.value("bssplit"),
            Some(&Value::Split([
                expected.clone(),
                expected.clone(),
                expected
            ]))
        );
        apply(&mut settings, "bssplit=1k:2k:4k").unwrap();
        let Some(Value::Split([Some(read), _, _])) = settings.value("bssplit") else {
            panic!("bssplit not stored");
        };
        assert_eq!(read, &vec![(1024, 33), (2048, 33), (4096, 34)]);
        assert!(apply(&mut settings, "bssplit=4k/60:8k/60").is_err());
        assert!(apply(&mut settings, "bssplit=4k/60:8k/30").is_err());
    }

    #[test]
    fn bssplit_per_direction() {
        let mut settings = Settings::default();
        apply(&mut settings, "bssplit=2k/50:4k/50,4k/90:8k/10").unwrap();
        let Some(Value::Split([read, write, trim])) = settings.value("bssplit") else {
            panic!("bssplit not stored");
        };
        assert_eq!(read.as_deref(), Some(&[(2048, 50), (4096, 50)][..]));
        assert_eq!(write.as_deref(), Some(&[(4096, 90), (8192, 10)][..]));
        assert_eq!(trim, write);
    }

    #[test]
    fn filenames_split_on_unescaped_colons() {
        assert_eq!(split_colon_list("a:b"), vec!["a", "b"]);
        assert_eq!(split_colon_list("c\\:d:e"), vec!["c:d", "e"]);
        assert_eq!(split_colon_list(":a::b:"), vec!["a", "b"]);
        let mut settings = Settings::default();
        apply(&mut settings, "directory=/mnt/x:/mnt/y").unwrap();
        apply(&mut settings, "filename=f1:f2").unwrap();
        apply(&mut settings, "filename=f3").unwrap();
        assert_eq!(
            settings.value("filename"),
            Some(&Value::Files(vec![
                "/mnt/x/f1".into(),
                "/mnt/x/f2".into(),
                "/mnt/x/f3".into()
            ]))
        );
    }

    #[test]
    fn rw_postfixes() {
        let mut settings = Settings::default();
        apply(&mut settings, "rw=randread:8").unwrap();
        assert_eq!(
            settings.value("rw"),
            Some(&Value::Rw {
                mode: RwMode::RandRead,
                random_run: 8,
                skip_bytes: 0
            })
        );
        apply(&mut settings, "readwrite=write:4k").unwrap();
        assert_eq!(
            settings.value("rw"),
            Some(&Value::Rw {
                mode: RwMode::Write,
                random_run: 1,
                skip_bytes: 4096
            })
        );
        assert!(apply(&mut settings, "rw=randread:0").is_err());
        apply(&mut settings, "rw=read:-8k").unwrap();
        assert_eq!(
            settings.value("rw"),
            Some(&Value::Rw {
                mode: RwMode::Read,
                random_run: 1,
                skip_bytes: -8192
            })
        );
        assert!(apply(&mut settings, "rw=write:-x").is_err());
        assert!(apply(&mut settings, "rw=sideways").is_err());
        assert!(apply(&mut settings, "rw=READ").is_err());
    }

    #[test]
    fn distributions() {
        let mut settings = Settings::default();
        apply(&mut settings, "random_distribution=zipf:1.2").unwrap();
        assert_eq!(
            settings.value("random_distribution"),
            Some(&Value::Distribution(RandomDistribution::Zipf(1.2)))
        );
        apply(&mut settings, "random_distribution=pareto").unwrap();
        assert_eq!(
            settings.value("random_distribution"),
            Some(&Value::Distribution(RandomDistribution::Pareto(0.2)))
        );
        apply(
            &mut settings,
            "random_distribution=zoned:60/10:30/20:8/30:2/40",
        )
        .unwrap();
        assert_eq!(
            settings.value("random_distribution"),
            Some(&Value::Distribution(RandomDistribution::Zoned(vec![
                (60.0, 10.0),
                (30.0, 20.0),
                (8.0, 30.0),
                (2.0, 40.0)
            ])))
        );
        // fio's rand-zones.fio: a zone without a range percentage takes what is left.
        apply(&mut settings, "random_distribution=zoned:50/5:30/15:20/").unwrap();
        assert_eq!(
            settings.value("random_distribution"),
            Some(&Value::Distribution(RandomDistribution::Zoned(vec![
                (50.0, 5.0),
                (30.0, 15.0),
                (20.0, 80.0)
            ])))
        );
        assert!(apply(&mut settings, "random_distribution=zoned:50/60:50/50").is_err());
        assert!(apply(&mut settings, "random_distribution=zipf:1").is_err());
        assert!(apply(&mut settings, "random_distribution=zipf:1.2:0.25").is_err());
        assert!(apply(&mut settings, "random_distribution=zoned:50/50").is_err());
        assert!(apply(
            &mut settings,
            "random_distribution=zoned_abs:60/20G:40/100G"
        )
        .is_err());
        assert!(apply(
            &mut settings,
            "random_distribution=zoned:60/10:40/90,50/50:50/50"
        )
        .is_err());
    }

    #[test]
    fn startdelay_ranges() {
        assert_eq!(
            read_time_range("1-5"),
            Ok(Value::TimeRange(1_000_000, 5_000_000))
        );
        assert_eq!(
            read_time_range("5:1"),
            Ok(Value::TimeRange(1_000_000, 5_000_000))
        );
        assert_eq!(
            read_time_range("500ms"),
            Ok(Value::TimeRange(500_000, 500_000))
        );
        assert!(read_time_range("-1").is_err());
    }

    // Refused-unless-default options pass at fio's default and fail otherwise.
    #[test]
    fn refused_unless_default() {
        let mut settings = Settings::default();
        apply(&mut settings, "fdp=0").unwrap();
        apply(&mut settings, "io_submit_mode=inline").unwrap();
        apply(&mut settings, "percentage_random=100").unwrap();
        apply(&mut settings, "exitall=0").unwrap();
        let error = apply(&mut settings, "fdp=1").unwrap_err();
        assert!(
            error.message.starts_with("fdp=1: refused: data placement"),
            "{error}"
        );
        assert!(apply(&mut settings, "percentage_random=50").is_err());
    }

    #[test]
    fn bare_bool_needs_a_value_like_fio() {
        let mut settings = Settings::default();
        let error = apply(&mut settings, "direct").unwrap_err();
        assert!(error.message.contains("needs a value"), "{error}");
        apply(&mut settings, "time_based").unwrap();
        assert_eq!(settings.value("time_based"), Some(&Value::Flag(true)));
        apply(&mut settings, "time_based=0").unwrap();
        assert_eq!(settings.value("time_based"), Some(&Value::Flag(false)));
    }

    #[test]
    fn single_value_options_refuse_lists() {
        let mut settings = Settings::default();
        assert!(apply(&mut settings, "iodepth=4:8").is_err());
        assert!(apply(&mut settings, "nice=-5").is_ok());
        assert!(apply(&mut settings, "iodepth=(2*16)").is_ok());
        assert_eq!(settings.value("iodepth"), Some(&Value::Int(32)));
        let error = apply(&mut settings, "bs=4k-8k").unwrap_err();
        assert!(error.message.contains("use bsrange"), "{error}");
        assert!(apply(&mut settings, "rate=1m:2m").is_err());
    }
}
