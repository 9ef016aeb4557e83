//! Progress on standard error, as the lab's studies report it: a bar with the runs done and an
//! ETA ([`Bar`]) that appears once a study has taken two wall seconds, only on a terminal and
//! never with `--quiet`; or a line per run ([`Log`]) for the long real-device studies, whose log
//! is worth keeping.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use iosched_lab::progress::Progress;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// How long a study runs before its bar appears: shorter ones finish before it would be read.
pub const SHOW_AFTER: Duration = Duration::from_secs(2);

/// A bar of runs done with an ETA on standard error.
pub struct Bar {
    bar: Option<ProgressBar>,
}

impl Bar {
    /// A bar, or nothing when `quiet` or when standard error is not a terminal.
    pub fn new(quiet: bool) -> Bar {
        let shown = !quiet && std::io::stderr().is_terminal();
        Bar {
            bar: shown.then(|| {
                let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::hidden());
                bar.set_style(
                    ProgressStyle::with_template(
                        "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} runs, ETA {eta} {wide_msg}",
                    )
                    .expect("a static template"),
                );
                let delayed = bar.clone();
                std::thread::spawn(move || {
                    std::thread::sleep(SHOW_AFTER);
                    if !delayed.is_finished() {
                        delayed.set_draw_target(ProgressDrawTarget::stderr());
                        // Keeps the clock moving while a long run goes on.
                        delayed.enable_steady_tick(Duration::from_millis(250));
                    }
                });
                bar
            }),
        }
    }
}

impl Progress for Bar {
    fn begin(&self, total: usize) {
        if let Some(bar) = &self.bar {
            bar.set_length(total as u64);
        }
    }

    fn started(&self, what: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(format!("running {what}"));
        }
    }

    fn finished(&self, _what: &str, _outcome: &str) {
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
    }

    fn end(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }

    fn note(&self, text: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("iosched: {text}")),
            None => eprintln!("iosched: {text}"),
        }
    }
}

/// One line per run on standard error: `[3/27] what ... outcome`, each with the command's name
/// in its notes.
pub struct Log {
    command: &'static str,
    total: AtomicUsize,
    done: AtomicUsize,
    line: Mutex<()>,
}

impl Log {
    /// A log whose notes start with `command`.
    pub fn new(command: &'static str) -> Log {
        Log {
            command,
            total: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            line: Mutex::new(()),
        }
    }
}

impl Progress for Log {
    fn begin(&self, total: usize) {
        self.total.store(total, Ordering::Relaxed);
    }

    fn started(&self, what: &str) {
        let _line = self.line.lock();
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        let total = self.total.load(Ordering::Relaxed);
        eprint!("[{done}/{total}] {what} ... ");
        let _ = std::io::stderr().flush();
    }

    fn finished(&self, _what: &str, outcome: &str) {
        let _line = self.line.lock();
        eprintln!("{outcome}");
    }

    fn note(&self, text: &str) {
        let _line = self.line.lock();
        eprintln!("{}: {text}", self.command);
    }
}
