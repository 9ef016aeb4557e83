//! Errors, as a user wants them: what failed, in which job and file, and what to do about it.

use iosched_fio::JobSpec;
use std::fmt;

/// A run could not be set up or could not go on: a missing file, a refused option, a failing
/// `io_uring_enter`. Job-level failures during a run are [`JobError`]s instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UringError {
    message: String,
}

impl UringError {
    /// An error with `message`.
    pub fn new(message: impl Into<String>) -> Self {
        UringError {
            message: message.into(),
        }
    }

    /// An error about `job`, prefixed with its location and name.
    pub fn job(job: &JobSpec, message: impl fmt::Display) -> Self {
        UringError {
            message: format!("{}{message}", job_prefix(job)),
        }
    }
}

/// `FILE:LINE: job "NAME": ` (clone number added when the job has clones).
pub(crate) fn job_prefix(job: &JobSpec) -> String {
    if job.location.line > 0 {
        format!("{}: {}: ", job.location, job_label(job))
    } else {
        format!("{}: ", job_label(job))
    }
}

/// `job "NAME"`, with ` (clone N)` when the job has clones.
pub(crate) fn job_label(job: &JobSpec) -> String {
    if job.numjobs > 1 {
        format!("job {:?} (clone {})", job.name, job.clone)
    } else {
        format!("job {:?}", job.name)
    }
}

impl fmt::Display for UringError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for UringError {}

/// An error one job met while running: an I/O the device failed, or data that did not verify.
/// The job's `error` in the report holds `errno`, as fio's does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobError {
    /// Index of the job (clone) in the job file's order.
    pub job: usize,
    /// `FILE:LINE: job "NAME": `, as errors name jobs.
    pub job_name: String,
    /// The file the I/O addressed.
    pub file: String,
    /// Byte offset in that file where the problem lies, when there is one.
    pub offset: Option<u64>,
    /// The errno fio would report (`EIO`, `EILSEQ` for a verify failure, ...).
    pub errno: i32,
    /// What happened.
    pub message: String,
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}: {}", self.job_name, self.file, self.message)
    }
}

impl std::error::Error for JobError {}

/// The text of an errno without the "(os error N)" suffix.
pub(crate) fn errno_text(errno: i32) -> String {
    let text = std::io::Error::from_raw_os_error(errno).to_string();
    match text.find(" (os error") {
        Some(end) => text[..end].to_string(),
        None => text,
    }
}
