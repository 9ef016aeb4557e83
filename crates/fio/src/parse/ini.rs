//! Reading a job file into sections of option lines, as fio's `__parse_jobs_ini` (init.c) does.
//!
//! - A line whose first non-blank character is ';' or '#' is a comment; elsewhere, everything
//!   from the first ';' or '#' on is cut off (fio's `strip_blank_end`), so `bs=4k ; note` is
//!   `bs=4k`. Blanks around a line are ignored.
//! - `[name]` starts a section. A name beginning with `global` is a global section (fio compares
//!   only those six letters). Every other section is a job.
//! - `include FILE` inserts FILE's lines into the current section. A relative FILE is found in
//!   the including file's directory (fio first tries its working directory; we do not, so that
//!   a job file means the same from anywhere). Included files may include others but may not
//!   start sections, as in fio. An include loop is an error naming every step of the loop.
//! - Anything before the first section is an error, as in fio.

use super::ParseError;
use crate::Location;
use std::path::{Path, PathBuf};

use iosched_core::limits::{
    INCLUDES_MAX, INCLUDE_DEPTH_MAX, INPUT_FILE_BYTES_MAX, JOB_TEXT_BYTES_MAX,
};

/// One `[section]` and its option lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Section {
    /// The name between the brackets.
    pub name: String,
    /// Whether fio treats it as a `[global]` section.
    pub global: bool,
    /// Where the header is.
    pub location: Location,
    /// Its option lines, includes expanded, in order.
    pub lines: Vec<Line>,
}

/// One option line, comments and surrounding blanks removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Line {
    /// `name`, `name=value` (not yet expanded).
    pub text: String,
    /// Where it was written.
    pub location: Location,
}

/// Reads files for `include`; an error without a location is placed at the include line.
pub(super) type Loader<'a> = &'a dyn Fn(&Path) -> Result<String, ParseError>;

struct Reader<'a> {
    loader: Loader<'a>,
    sections: Vec<Section>,
    /// The include chain: (identity of the file, name as written, line of its include).
    chain: Vec<(PathBuf, String, u32)>,
    /// Includes followed so far, repeats counted.
    includes: usize,
    /// Bytes read so far, the main file and every include.
    bytes: usize,
}

/// Reads `text` (named `origin`, in `base_dir`) into sections.
pub(super) fn read(
    text: &str,
    origin: &str,
    base_dir: &Path,
    loader: Loader<'_>,
) -> Result<Vec<Section>, ParseError> {
    let mut reader = Reader {
        loader,
        sections: Vec::new(),
        chain: Vec::new(),
        includes: 0,
        bytes: text.len(),
    };
    // The file sits in base_dir, whatever directories its name carries.
    let path = base_dir.join(Path::new(origin).file_name().unwrap_or(origin.as_ref()));
    reader.chain.push((identity(&path), origin.to_string(), 0));
    reader.file(text, origin, &path, false)?;
    Ok(reader.sections)
}

/// The name used to recognise a file met twice on an include chain.
fn identity(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| normalise(path))
}

/// `a/./b/../c` as `a/c`, for files that do not exist (parse_str on text).
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// Whether a raw line is blank or a whole-line comment (fio's `is_empty_or_comment`).
fn is_blank_or_comment(line: &str) -> bool {
    match line
        .trim_start_matches(|c: char| c.is_whitespace() || c.is_control())
        .chars()
        .next()
    {
        None | Some(';') | Some('#') => true,
        Some(_) => false,
    }
}

/// The line without comments and surrounding blanks (fio's `strip_blank_front`/`_end`).
fn strip(line: &str) -> &str {
    let line = line.trim_start();
    let end = line.find([';', '#']).unwrap_or(line.len());
    line[..end].trim_end_matches(|c: char| c.is_whitespace() || c.is_control())
}

impl Reader<'_> {
    fn file(
        &mut self,
        text: &str,
        name: &str,
        path: &Path,
        nested: bool,
    ) -> Result<(), ParseError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        for (index, raw) in text.split('\n').enumerate() {
            let location = Location {
                file: name.to_string(),
                line: u32::try_from(index + 1).unwrap_or(u32::MAX),
            };
            if raw.len() > super::expand::LINE_BYTES_MAX {
                return Err(ParseError::at(
                    &location,
                    format!(
                        "line is {} bytes long; the limit is {} (fio's and iosched's)",
                        raw.len(),
                        super::expand::LINE_BYTES_MAX
                    ),
                ));
            }
            if is_blank_or_comment(raw) {
                continue;
            }
            let line = strip(raw);
            if line.is_empty() {
                continue;
            }
            if line.starts_with('[') {
                if nested {
                    return Err(ParseError::at(
                        &location,
                        format!(
                            "included files may not start sections (fio refuses them): \"{line}\""
                        ),
                    ));
                }
                self.header(line, location)?;
                continue;
            }
            let Some(section) = self.sections.last_mut() else {
                return Err(ParseError::at(
                    &location,
                    format!("\"{line}\" is outside any [section]; start the file with [global] or a [job]"),
                ));
            };
            if let Some(target) = include_target(line) {
                self.include(target, path, &location)?;
                continue;
            }
            section.lines.push(Line {
                text: line.to_string(),
                location,
            });
        }
        Ok(())
    }

    fn header(&mut self, line: &str, location: Location) -> Result<(), ParseError> {
        let name = line
            .strip_prefix('[')
            .and_then(|rest| rest.strip_suffix(']'))
            .ok_or_else(|| {
                ParseError::at(
                    &location,
                    format!("malformed section header \"{line}\": expected [name]"),
                )
            })?;
        if name.trim().is_empty() {
            return Err(ParseError::at(&location, "empty section name \"[]\""));
        }
        self.sections.push(Section {
            name: name.to_string(),
            global: name.starts_with("global"),
            location,
            lines: Vec::new(),
        });
        Ok(())
    }

    fn include(
        &mut self,
        target: &str,
        from: &Path,
        location: &Location,
    ) -> Result<(), ParseError> {
        if target.is_empty() {
            return Err(ParseError::at(location, "include needs a file name"));
        }
        let directory = from.parent().unwrap_or(Path::new(""));
        let path = directory.join(target);
        let id = identity(&path);
        if let Some(start) = self.chain.iter().position(|(known, _, _)| *known == id) {
            let mut steps: Vec<String> = Vec::new();
            for pair in self.chain[start..].windows(2) {
                steps.push(format!(
                    "{}:{} includes {}",
                    pair[0].1, pair[1].2, pair[1].1
                ));
            }
            let last = &self.chain[self.chain.len() - 1];
            steps.push(format!("{}:{} includes {}", last.1, location.line, target));
            return Err(ParseError::at(
                location,
                format!("include loop: {}", steps.join(", ")),
            ));
        }
        if self.chain.len() > INCLUDE_DEPTH_MAX {
            return Err(ParseError::at(
                location,
                format!("includes are nested more than {INCLUDE_DEPTH_MAX} deep (iosched's limit)"),
            ));
        }
        self.includes += 1;
        if self.includes > INCLUDES_MAX {
            return Err(ParseError::at(
                location,
                format!(
                    "more than {INCLUDES_MAX} includes in all (iosched's limit; a file included \
                     twice counts twice)"
                ),
            ));
        }
        let text = (self.loader)(&path).map_err(|error| match error.location {
            Some(_) => error,
            None => ParseError::at(location, error.message),
        })?;
        if text.len() > INPUT_FILE_BYTES_MAX {
            return Err(ParseError::at(
                location,
                format!(
                    "included file \"{}\" is larger than {INPUT_FILE_BYTES_MAX} bytes (iosched's limit)",
                    path.display()
                ),
            ));
        }
        self.bytes += text.len();
        if self.bytes > JOB_TEXT_BYTES_MAX {
            return Err(ParseError::at(
                location,
                format!(
                    "the job file and its includes pass {JOB_TEXT_BYTES_MAX} bytes in all \
                     (iosched's limit)"
                ),
            ));
        }
        self.chain.push((id, target.to_string(), location.line));
        let result = self.file(&text, target, &path, true);
        self.chain.pop();
        result
    }
}

/// The file named by an `include FILE` line.
fn include_target(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("include")?;
    if rest.is_empty() {
        return Some("");
    }
    rest.starts_with(|c: char| c.is_whitespace())
        .then(|| rest.trim())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read_with(files: &[(&str, &str)], main: &str) -> Result<Vec<Section>, ParseError> {
        let files: HashMap<PathBuf, String> = files
            .iter()
            .map(|(name, text)| (Path::new("/jobs").join(name), text.to_string()))
            .collect();
        let loader = move |path: &Path| {
            files
                .get(&normalise(path))
                .cloned()
                .ok_or_else(|| ParseError {
                    location: None,
                    message: format!(
                        "cannot read included file \"{}\": not found",
                        path.display()
                    ),
                })
        };
        read(main, "main.fio", Path::new("/jobs"), &loader)
    }

    #[test]
    fn sections_comments_and_blanks() {
        let text = "; header comment\n[global]\n  bs=4k ; trailing\n# comment\n\n[job1]\r\nrw=read#x\n[ job 2 ]\n";
        let sections = read_with(&[], text).unwrap();
        assert_eq!(sections.len(), 3);
        assert!(sections[0].global);
        assert_eq!(sections[0].lines[0].text, "bs=4k");
        assert_eq!(sections[0].lines[0].location.line, 3);
        assert_eq!(sections[1].name, "job1");
        assert_eq!(sections[1].lines[0].text, "rw=read");
        assert_eq!(sections[2].name, " job 2 ");
        assert!(!sections[2].global);
    }

    // fio treats any section whose name begins with "global" as global.
    #[test]
    fn global_prefix() {
        let sections = read_with(&[], "[global-settings]\n[job]\n").unwrap();
        assert!(sections[0].global);
        assert!(!sections[1].global);
    }

    #[test]
    fn malformed_headers_and_stray_options() {
        let error = read_with(&[], "[job\nbs=4k\n").unwrap_err();
        assert_eq!(error.location.as_ref().unwrap().line, 1);
        assert!(
            error.message.contains("malformed section header"),
            "{error}"
        );
        let error = read_with(&[], "bs=4k\n[job]\n").unwrap_err();
        assert!(error.to_string().starts_with("main.fio:1: "), "{error}");
        assert!(error.message.contains("outside any [section]"));
        assert!(read_with(&[], "[]\n").is_err());
    }

    #[test]
    fn includes_are_inlined_with_their_own_locations() {
        let files = [
            ("common.fio", "ioengine=libaio\ninclude deeper.fio\n"),
            ("deeper.fio", "iodepth=4\n"),
        ];
        let sections = read_with(&files, "[job]\nrw=read\ninclude common.fio\nbs=8k\n").unwrap();
        let lines: Vec<(&str, &str, u32)> = sections[0]
            .lines
            .iter()
            .map(|l| (l.text.as_str(), l.location.file.as_str(), l.location.line))
            .collect();
        assert_eq!(
            lines,
            vec![
                ("rw=read", "main.fio", 2),
                ("ioengine=libaio", "common.fio", 1),
                ("iodepth=4", "deeper.fio", 1),
                ("bs=8k", "main.fio", 4),
            ]
        );
    }

    #[test]
    fn include_errors() {
        let error = read_with(&[], "[job]\ninclude missing.fio\n").unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("main.fio:2: cannot read included file"),
            "{error}"
        );
        assert!(error.message.contains("missing.fio"));

        let files = [("a.fio", "include b.fio\n"), ("b.fio", "\ninclude a.fio\n")];
        let error = read_with(&files, "[job]\ninclude a.fio\n").unwrap_err();
        assert_eq!(
            error.to_string(),
            "b.fio:2: include loop: a.fio:1 includes b.fio, b.fio:2 includes a.fio"
        );

        let files = [("s.fio", "[other]\n")];
        let error = read_with(&files, "[job]\ninclude s.fio\n").unwrap_err();
        assert!(error
            .to_string()
            .starts_with("s.fio:1: included files may not start sections"));

        let error = read_with(&[], "include x.fio\n[job]\n").unwrap_err();
        assert!(error.message.contains("outside any [section]"));
    }

    #[test]
    fn self_include_of_the_main_file() {
        let error = read_with(&[], "[job]\ninclude main.fio\n").unwrap_err();
        assert_eq!(
            error.to_string(),
            "main.fio:2: include loop: main.fio:2 includes main.fio"
        );
    }
}
