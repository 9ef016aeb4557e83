//! Writing results to a path the user named, the way fio and coreutils do, and never touching
//! anything else.
//!
//! What the path is decides how it is written:
//!
//! - `-`, `/dev/stdout` (and `/dev/fd/1`, `/proc/self/fd/1`): this process's standard output;
//!   `/dev/stderr` and its aliases: standard error. Written through the open descriptor, so a
//!   pipe, a terminal or a `>>` redirection behaves as the shell set it up.
//! - A regular file, or a name that does not exist yet: written to a new temporary file beside
//!   it (a unique name, created exclusively) and renamed over it only when complete
//!   ([`OutputFile::commit`]), so a failed run or a full disk never leaves half a file and the
//!   previous contents survive. The replacement keeps the old file's permission bits and, when
//!   we may, its owner. When the directory does not let us create the temporary file but the
//!   file itself is writable, it is written in place, as the shell's `>` would.
//! - A symbolic link is followed, never replaced: the file it points to is written as above
//!   (a link that points nowhere creates its target, as `>` does).
//! - A character or block device, a FIFO: opened for writing and written in place; nothing is
//!   created, truncated, renamed or removed. (`/dev/null` stays `/dev/null`.)
//! - A directory, a socket, or a path whose directory does not exist: a clear error naming it.
//!
//! Nothing else is ever created, renamed or deleted: the temporary file is the only file made
//! besides the target, and it is removed if the output is dropped without a commit.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Symbolic links followed at most while resolving a path (Linux's `MAXSYMLINKS`).
const SYMLINKS_MAX: usize = 40;

/// An output that could not be opened, written or committed: which path and why.
#[derive(Debug)]
pub struct OutputError {
    /// The path as the user named it.
    pub path: PathBuf,
    /// What went wrong.
    pub message: String,
}

impl fmt::Display for OutputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot write {:?}: {}", self.path, self.message)
    }
}

impl std::error::Error for OutputError {}

enum Sink {
    Stdout,
    Stderr,
    /// Written in place: a device, a FIFO, or a regular file we could not replace.
    InPlace(File),
    /// Written to a temporary file that replaces `target` on commit.
    Replace {
        temporary: tempfile::NamedTempFile,
        target: PathBuf,
    },
}

/// An output being written to a path the user named. Write to it, then [`commit`](Self::commit);
/// dropped without a commit, it leaves the target as it was (a device or FIFO keeps whatever was
/// already written to it).
pub struct OutputFile {
    named: PathBuf,
    sink: io::BufWriter<SinkWriter>,
}

struct SinkWriter(Sink);

impl Write for SinkWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match &mut self.0 {
            Sink::Stdout => io::stdout().lock().write(bytes),
            Sink::Stderr => io::stderr().lock().write(bytes),
            Sink::InPlace(file) => file.write(bytes),
            Sink::Replace { temporary, .. } => temporary.write(bytes),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.0 {
            Sink::Stdout => io::stdout().lock().flush(),
            Sink::Stderr => io::stderr().lock().flush(),
            Sink::InPlace(file) => file.flush(),
            Sink::Replace { temporary, .. } => temporary.flush(),
        }
    }
}

impl fmt::Debug for OutputFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutputFile")
            .field("named", &self.named)
            .finish_non_exhaustive()
    }
}

impl OutputFile {
    /// Opens the output `path` for writing, deciding from what it is how to write it (see the
    /// module documentation). Fails, creating nothing, when it cannot be written.
    pub fn create(path: &Path) -> Result<OutputFile, OutputError> {
        let error = |message: String| OutputError {
            path: path.to_path_buf(),
            message,
        };
        let sink = open(path).map_err(error)?;
        Ok(OutputFile {
            named: path.to_path_buf(),
            sink: io::BufWriter::with_capacity(64 << 10, SinkWriter(sink)),
        })
    }

    /// The path as the user named it.
    pub fn path(&self) -> &Path {
        &self.named
    }

    /// Finishes the output: flushes it and, for a regular file, moves the complete file into
    /// place.
    pub fn commit(self) -> Result<(), OutputError> {
        let named = self.named.clone();
        let error = |message: String| OutputError {
            path: named.clone(),
            message,
        };
        let writer = self
            .sink
            .into_inner()
            .map_err(|e| error(e.error().to_string()))?;
        match writer.0 {
            Sink::Stdout | Sink::Stderr => Ok(()),
            Sink::InPlace(mut file) => file.flush().map_err(|e| error(e.to_string())),
            Sink::Replace { temporary, target } => {
                // The data must be on disk before the name points at it, or a crash could leave
                // an empty file where the old one was.
                temporary
                    .as_file()
                    .sync_all()
                    .map_err(|e| error(e.to_string()))?;
                temporary
                    .persist(&target)
                    .map(|_| ())
                    .map_err(|e| error(format!("cannot rename into place: {}", e.error)))
            }
        }
    }
}

impl Write for OutputFile {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.sink.write(bytes)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.sink.flush()
    }
}

/// Writes `bytes` to the output `path` and commits it.
pub fn write_output(path: &Path, bytes: &[u8]) -> Result<(), OutputError> {
    let mut output = OutputFile::create(path)?;
    output.write_all(bytes).map_err(|e| OutputError {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    output.commit()
}

/// The standard stream a path names, if it names one.
fn standard_stream(path: &Path) -> Option<Sink> {
    match path.to_str()? {
        "-" | "/dev/stdout" | "/dev/fd/1" | "/proc/self/fd/1" => Some(Sink::Stdout),
        "/dev/stderr" | "/dev/fd/2" | "/proc/self/fd/2" => Some(Sink::Stderr),
        _ => None,
    }
}

fn open(path: &Path) -> Result<Sink, String> {
    if path.as_os_str().is_empty() {
        return Err("the name is empty".into());
    }
    if let Some(stream) = standard_stream(path) {
        return Ok(stream);
    }
    let target = resolve_links(path)?;
    match std::fs::metadata(&target) {
        Ok(metadata) => {
            let kind = metadata.file_type();
            if kind.is_dir() {
                Err("it is a directory; name a file".into())
            } else if kind.is_socket() {
                Err("it is a socket, which cannot be opened for writing".into())
            } else if kind.is_file() && !through_proc(path, &target) {
                replace(&target, Some(&metadata))
            } else {
                // A device, a FIFO, or a file reached through /proc's links to open
                // descriptors: written where it is, never replaced.
                let mut options = OpenOptions::new();
                options.write(true);
                if kind.is_file() {
                    options.truncate(true);
                }
                options
                    .open(&target)
                    .map(Sink::InPlace)
                    .map_err(|e| e.to_string())
            }
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => replace(&target, None),
        Err(error) => Err(error.to_string()),
    }
}

/// Whether the path goes through /proc or /dev/fd, whose links name open descriptors rather
/// than files: renaming over what they resolve to would leave the descriptor's owner writing
/// to a deleted file.
fn through_proc(named: &Path, resolved: &Path) -> bool {
    [named, resolved]
        .iter()
        .any(|p| p.starts_with("/proc") || p.starts_with("/dev/fd"))
}

/// `path` with every symbolic link in its last component followed (a link to a link is
/// followed again), so that a link is written through and never replaced. A link that points
/// nowhere resolves to the name it points at.
fn resolve_links(path: &Path) -> Result<PathBuf, String> {
    let mut current = path.to_path_buf();
    for _ in 0..SYMLINKS_MAX {
        match std::fs::symlink_metadata(&current) {
            Ok(metadata) if metadata.file_type().is_symlink() => {
                let link = std::fs::read_link(&current).map_err(|e| e.to_string())?;
                current = match current.parent() {
                    Some(parent) if link.is_relative() => parent.join(link),
                    _ => link,
                };
            }
            Ok(_) => return Ok(current),
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(current),
            Err(error) => return Err(error.to_string()),
        }
    }
    Err(format!("more than {SYMLINKS_MAX} symbolic links to follow"))
}

/// A temporary file beside `target`, to be renamed over it; `existing` is the file it
/// replaces, whose permissions and owner the new one keeps.
fn replace(target: &Path, existing: Option<&std::fs::Metadata>) -> Result<Sink, String> {
    let directory = match target.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    match std::fs::metadata(directory) {
        Ok(metadata) if metadata.is_dir() => {}
        Ok(_) => return Err(format!("{directory:?} is not a directory")),
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            return Err(format!("directory {directory:?} does not exist"))
        }
        Err(error) => return Err(format!("directory {directory:?}: {error}")),
    }
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // A new file gets the mode `>` would give it (0666 less the umask); a replaced one its own.
    let mode = existing.map_or(0o666, |m| m.permissions().mode() & 0o7777);
    let created = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".iosched-tmp")
        .permissions(std::fs::Permissions::from_mode(mode))
        .tempfile_in(directory);
    let temporary = match created {
        Ok(temporary) => temporary,
        Err(error) => {
            // The directory refuses new files; a file that exists and is writable is then
            // written in place, as the shell's `>` would.
            if existing.is_some() {
                if let Ok(file) = OpenOptions::new().write(true).truncate(true).open(target) {
                    return Ok(Sink::InPlace(file));
                }
            }
            return Err(error.to_string());
        }
    };
    if let Some(metadata) = existing {
        // The umask applied at creation; the replacement must have exactly the old bits.
        let file = temporary.as_file();
        file.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(|e| e.to_string())?;
        // Only root may give a file away; anyone else gets a file of their own, as with
        // `sed -i`.
        let _ = std::os::unix::fs::fchown(file, Some(metadata.uid()), Some(metadata.gid()));
    }
    Ok(Sink::Replace {
        temporary,
        target: target.to_path_buf(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn scratch() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    // Proves a regular file is replaced whole, keeps its mode, and leaves no temporary behind.
    #[test]
    fn regular_files_are_replaced_atomically_with_their_mode() {
        let dir = scratch();
        let path = dir.path().join("out.txt");
        std::fs::write(&path, "old contents that are longer").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_output(&path, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o640);
        assert_eq!(entries(dir.path()), vec!["out.txt"]);
    }

    // Proves an output dropped before its commit leaves the old file and no temporary.
    #[test]
    fn an_uncommitted_output_changes_nothing() {
        let dir = scratch();
        let path = dir.path().join("out.txt");
        std::fs::write(&path, "old").unwrap();
        let mut output = OutputFile::create(&path).unwrap();
        output.write_all(b"half").unwrap();
        drop(output);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        assert_eq!(entries(dir.path()), vec!["out.txt"]);
    }

    // Regression (issue 11, item 1): a symlink is written through, never replaced.
    #[test]
    fn symlinks_are_followed_not_replaced() {
        let dir = scratch();
        let real = dir.path().join("real.txt");
        let link = dir.path().join("link.txt");
        std::fs::write(&real, "old").unwrap();
        symlink("real.txt", &link).unwrap();
        write_output(&link, b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
        // A link to nowhere creates its target, as the shell's `>` does.
        let dangling = dir.path().join("dangling");
        symlink("made.txt", &dangling).unwrap();
        write_output(&dangling, b"made").unwrap();
        assert!(std::fs::symlink_metadata(&dangling)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("made.txt")).unwrap(),
            "made"
        );
    }

    // Regression (issue 11, item 1): a device node is written in place and stays a device.
    #[test]
    fn devices_are_written_in_place() {
        write_output(Path::new("/dev/null"), b"discarded").unwrap();
        let kind = std::fs::metadata("/dev/null").unwrap().file_type();
        assert!(kind.is_char_device(), "/dev/null is still a device");
        // Through a symlink too.
        let dir = scratch();
        let link = dir.path().join("null");
        symlink("/dev/null", &link).unwrap();
        write_output(&link, b"discarded").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert!(std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
    }

    // Proves directories, sockets and missing directories are refused by name, creating nothing.
    #[test]
    fn what_cannot_be_written_is_refused_clearly() {
        let dir = scratch();
        let error = write_output(dir.path(), b"x").unwrap_err();
        assert!(error.to_string().contains("is a directory"), "{error}");
        let missing = dir.path().join("no/such/dir/out.txt");
        let error = write_output(&missing, b"x").unwrap_err();
        assert!(error.to_string().contains("does not exist"), "{error}");
        assert!(error.to_string().contains("out.txt"), "{error}");
        let socket = dir.path().join("socket");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let error = write_output(&socket, b"x").unwrap_err();
        assert!(error.to_string().contains("socket"), "{error}");
        assert!(std::fs::symlink_metadata(&socket)
            .unwrap()
            .file_type()
            .is_socket());
        assert_eq!(entries(dir.path()), vec!["socket"]);
        assert!(write_output(Path::new(""), b"x").is_err());
    }

    // Regression (issue 11, item 1): a FIFO is opened and written, not replaced by a file.
    #[test]
    fn fifos_are_written_in_place() {
        let dir = scratch();
        let fifo = dir.path().join("fifo");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo runs");
        assert!(status.success());
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
        };
        write_output(&fifo, b"through the pipe").unwrap();
        assert_eq!(reader.join().unwrap(), "through the pipe");
        assert!(std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo());
        assert_eq!(entries(dir.path()), vec!["fifo"]);
    }
}
