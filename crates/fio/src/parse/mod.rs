//! fio job files into [`JobFile`]s.
//!
//! ```
//! use iosched_fio::parse::parse_str;
//! use iosched_fio::{BlockSize, RwMode};
//! use std::path::Path;
//!
//! let text = "[global]\nbs=4k\ndirect=1\n\n[reader]\nrw=randread\nsize=1g\nnumjobs=2\n";
//! let file = parse_str(text, "example.fio", Path::new("."), &|_| None).unwrap();
//! assert_eq!(file.jobs.len(), 2);
//! assert_eq!(file.jobs[1].clone, 1);
//! assert_eq!(file.jobs[0].rw, RwMode::RandRead);
//! assert_eq!(file.jobs[0].bs[0], BlockSize::Fixed(4096));
//! assert_eq!(file.jobs[1].filenames, vec!["reader.1.0".to_string()]);
//! ```
//!
//! # How a job file is read
//!
//! Parse, then resolve, as fio does:
//!
//! 1. `ini` splits the file into `[sections]` of option lines, following `include`s and
//!    dropping comments.
//! 2. `expand` substitutes `${VAR}` and fio's `$ncpus`, `$pagesize`, `$mb_memory`.
//! 3. `settings` applies each line to its section's settings: a `[global]` section changes
//!    the defaults of the jobs below it, a job starts from those defaults. Values are read by
//!    `value` with fio's suffix rules. Every option fio defines is in `table` (generated
//!    from fio's source, see `tools/gen_fio_options.py`), and `disposition` says whether
//!    iosched honours it, accepts it with a [`Note`], or refuses it.
//! 4. `resolve` turns each job into one [`JobSpec`](crate::JobSpec) per clone (`numjobs`),
//!    applying what fio decides from several options together, and this module numbers the
//!    reporting groups.
//!
//! Every error is a [`ParseError`] naming the file and line. No input makes the parser panic
//! (a property test feeds it arbitrary text).
//!
//! # Where iosched reads a job file differently from fio
//!
//! Only where fio would silently run something other than what the file says:
//!
//! - values fio misreads are refused with an explanation (`4q`, `1.5g`, `10sec`, `4ki`; see
//!   `value`);
//! - blanks after `=` are ignored: `bs = 4k` is 4 KiB (fio's parser reads 4 bytes);
//! - an `include` path is relative to the including file only (fio tries its working directory
//!   first), and an include loop is an error (fio recurses until it fails);
//! - a malformed header `[job` is an error (fio names the job `jo`);
//! - `numjobs=0`, negative sizes and other values fio accepts with undefined results are
//!   refused;
//! - ':' and '-' do not separate values (`bs=4k-8k` is read 4k, write 8k to fio; `iodepth=4:8`
//!   is 4): only ',' separates read, write and trim values;
//! - `bssplit` percentages must add up to 100 (fio hands a shortfall or excess to some entry).
//!
//! Some fio behaviours that surprise are kept, because a job file must mean what it means to
//! fio: a job's `filename` adds to a `[global]` one instead of replacing it; a section whose
//! name merely starts with `global` is global; `bssplit=4k/0` means "fill in", like a blank
//! percentage; `size=0` means no size.
//!
//! # Bounds
//!
//! Every input is bounded, so that a hostile job file fails with an error instead of
//! exhausting memory or time, at the limits of [`iosched_core::limits`]: 4 MiB per file (read
//! at most that far, so `/dev/zero` is refused, not read for ever), 16 MiB with everything it
//! includes, 8192 bytes per line (fio's own line limit), includes 32 deep and 1024 in all (so
//! an include tree cannot fan out to millions of lines), 4096 jobs counting clones (fio's
//! limit), 65536 file names per job, 64 levels of parentheses in an arithmetic value, and every
//! time and size within a year and an exbibyte.
//!
//! A section named after a device (`[/dev/sdb]`) is that device when it has no `filename`;
//! fio checks the file system for this, the parser only looks at the `/dev/` prefix, so that
//! parsing does no I/O besides reading job files.

mod disposition;
mod expand;
mod fio_options;
mod ini;
mod iosched_options;
mod resolve;
mod settings;
mod table;
mod value;

use crate::{JobFile, Location, Note};
use expand::Machine;
use iosched_core::limits;
use settings::{OptionLine, Settings, Value};
use std::fmt;
use std::path::Path;

/// A job file fio would not run, or that the simulator cannot run faithfully: where and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// The file and line at fault, when there is one.
    pub location: Option<Location>,
    /// What is wrong, naming the option and value.
    pub message: String,
}

impl ParseError {
    pub(crate) fn at(location: &Location, message: impl Into<String>) -> Self {
        ParseError {
            location: Some(location.clone()),
            message: message.into(),
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // What the user wrote is quoted back at most QUOTED_BYTES_MAX bytes long.
        let message = limits::shorten_quoted(&self.message);
        match &self.location {
            Some(location) => write!(f, "{location}: {message}"),
            None => write!(f, "{message}"),
        }
    }
}

impl std::error::Error for ParseError {}

/// A size in bytes in fio's syntax (`200g`, `512k`, `1m`: powers of 1024, as kb_base=1024),
/// for settings outside a job file that take fio's sizes. The error names the problem.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    value::bytes(text, 1024)
}

/// Reads a text file of at most `bytes_max` bytes (`what` names it in errors: "job file",
/// "groups file"). The limit is enforced while reading, so `/dev/zero`, a FIFO or a growing
/// file is refused at the limit instead of read without end; a directory is refused by name;
/// invalid UTF-8 is refused with the line and column of the first bad byte.
pub fn read_text_file(path: &Path, what: &str, bytes_max: usize) -> Result<String, ParseError> {
    use std::io::Read;
    let error = |message: String| ParseError {
        location: None,
        message: format!("cannot read {what} \"{}\": {message}", path.display()),
    };
    let file = std::fs::File::open(path).map_err(|e| error(e.to_string()))?;
    if file.metadata().is_ok_and(|m| m.is_dir()) {
        return Err(error("it is a directory".into()));
    }
    let mut bytes = Vec::new();
    file.take(bytes_max as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| error(e.to_string()))?;
    if bytes.len() > bytes_max {
        return Err(ParseError {
            location: None,
            message: format!(
                "{what} \"{}\" is larger than {bytes_max} bytes (iosched's limit)",
                path.display()
            ),
        });
    }
    text_from_bytes(bytes, &path.display().to_string())
}

/// `bytes` as text, or an error at the line and column of the first byte that is not UTF-8.
fn text_from_bytes(bytes: Vec<u8>, origin: &str) -> Result<String, ParseError> {
    String::from_utf8(bytes).map_err(|error| {
        let bytes = error.as_bytes();
        let at = error.utf8_error().valid_up_to();
        let line_start = bytes[..at]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        ParseError {
            location: Some(Location {
                file: origin.to_string(),
                line: u32::try_from(line).unwrap_or(u32::MAX),
            }),
            message: format!(
                "byte 0x{:02x} at column {} is not UTF-8; job files are UTF-8 text",
                bytes[at],
                at - line_start + 1
            ),
        }
    })
}

/// Reads the job file at `path`, with variables from the environment. Locations name the file
/// as given; includes are found next to it.
pub fn parse_file(path: &Path) -> Result<JobFile, ParseError> {
    let text = read_text_file(path, "job file", limits::INPUT_FILE_BYTES_MAX)?;
    let base_dir = path.parent().unwrap_or(Path::new(""));
    parse_str(&text, &path.display().to_string(), base_dir, &|name| {
        std::env::var(name).ok()
    })
}

/// Reads job file `text`, called `origin` in locations, whose includes are relative to
/// `base_dir`; `env` supplies `${VAR}` values (`None` for an unset variable).
pub fn parse_str(
    text: &str,
    origin: &str,
    base_dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<JobFile, ParseError> {
    let loader = |path: &Path| read_text_file(path, "included file", limits::INPUT_FILE_BYTES_MAX);
    parse_with(text, origin, base_dir, env, &Machine::Real, &loader)
}

/// [`parse_str`] with the files that `include` names read by `loader` instead of from the
/// file system (for fuzzing, and for tools that keep job files elsewhere). An error `loader`
/// returns without a location is placed at the include line.
pub fn parse_str_with_loader(
    text: &str,
    origin: &str,
    base_dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    loader: &dyn Fn(&Path) -> Result<String, ParseError>,
) -> Result<JobFile, ParseError> {
    parse_with(text, origin, base_dir, env, &Machine::Real, loader)
}

fn parse_with(
    text: &str,
    origin: &str,
    base_dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    machine: &Machine,
    loader: ini::Loader<'_>,
) -> Result<JobFile, ParseError> {
    if text.len() > limits::INPUT_FILE_BYTES_MAX {
        return Err(ParseError {
            location: None,
            message: format!(
                "{origin}: larger than {} bytes (iosched's limit)",
                limits::INPUT_FILE_BYTES_MAX
            ),
        });
    }
    let sections = ini::read(text, origin, base_dir, loader)?;

    let mut defaults = Settings::default();
    let mut file = JobFile::default();
    let mut group_id: u32 = 0;
    let mut jobs_in_group: usize = 0;
    for section in &sections {
        let lines = expand_lines(section, env, machine)?;
        if section.global {
            for line in &lines {
                let option = defaults.apply(line, &mut file.notes)?;
                file.global_options.push(written(option.name, line));
            }
            continue;
        }
        let mut settings = defaults.clone();
        let mut own_options = Vec::with_capacity(lines.len());
        let mut own_name = None;
        for line in &lines {
            let option = settings.apply(line, &mut file.notes)?;
            own_options.push(written(option.name, line));
            if option.name == "name" {
                own_name = line.value.clone();
            }
        }
        let job = resolve::Job {
            section_name: &section.name,
            location: &section.location,
            settings: &settings,
            own_options: &own_options,
            own_name: own_name.as_deref(),
        };
        let clones = resolve::resolve(&job, file.jobs.len(), &mut file.notes)?;

        // fio's add_job: a stonewall or new_group job starts a new reporting group, unless no
        // job is in the current one yet. Clones never do.
        let new_group = matches!(settings.value("new_group"), Some(Value::Flag(true)));
        if (clones[0].stonewall || new_group) && jobs_in_group > 0 {
            group_id += 1;
            jobs_in_group = 0;
        }
        for mut clone in clones {
            clone.group_id = group_id;
            jobs_in_group += 1;
            file.jobs.push(clone);
        }
    }
    if file.jobs.is_empty() {
        return Err(ParseError {
            location: None,
            message: format!("{origin}: no jobs defined (fio needs at least one job section)"),
        });
    }
    check_wait_for(&mut file)?;
    dedup_notes(&mut file.notes);
    Ok(file)
}

/// `wait_for` names: a job waiting for its own name would never start (refused); a name no
/// job has is waited for by no one, as in fio's `waitee_running` (noted).
fn check_wait_for(file: &mut JobFile) -> Result<(), ParseError> {
    for job in &file.jobs {
        let Some(waitee) = &job.wait_for else {
            continue;
        };
        if *waitee == job.name {
            return Err(ParseError::at(
                &job.location,
                format!(
                    "wait_for={waitee}: job \"{}\" would wait for itself and never start",
                    job.name
                ),
            ));
        }
        if !file.jobs.iter().any(|other| other.name == *waitee) {
            file.notes.push(Note {
                location: job.location.clone(),
                option: "wait_for".into(),
                message: format!(
                    "no job is named {waitee:?}: the job starts without waiting, as fio's"
                ),
            });
        }
    }
    Ok(())
}

/// A section's lines, expanded, split into name and value, in the order fio applies them.
fn expand_lines(
    section: &ini::Section,
    env: &dyn Fn(&str) -> Option<String>,
    machine: &Machine,
) -> Result<Vec<OptionLine>, ParseError> {
    let mut lines = Vec::with_capacity(section.lines.len());
    for line in &section.lines {
        let expanded = expand::expand(&line.text, env, machine)
            .map_err(|why| ParseError::at(&line.location, why))?;
        lines.push(OptionLine::split(
            &expanded.text,
            line.location.clone(),
            expanded.unset,
        ));
    }
    // fio sorts a section's options by priority (stable), so kb_base comes first.
    lines.sort_by_key(|line| {
        let name = table::find(&line.name).map_or("", |option| option.name);
        -table::parse_priority(name)
    });
    Ok(lines)
}

/// An option as fio's JSON lists it: canonical name, value as written (empty when bare).
fn written(name: &str, line: &OptionLine) -> (String, String) {
    (name.to_string(), line.value.clone().unwrap_or_default())
}

/// A `[global]` option's note is made once per job that inherits it; keep the first.
fn dedup_notes(notes: &mut Vec<Note>) {
    let mut seen = std::collections::HashSet::new();
    notes.retain(|note| {
        seen.insert((
            note.location.clone(),
            note.option.clone(),
            note.message.clone(),
        ))
    });
}

#[cfg(test)]
mod tests;
