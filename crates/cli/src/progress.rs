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
    /// A bar of runs, or nothing when `quiet` or when standard error is not a terminal.
    pub fn new(quiet: bool) -> Bar {
        Bar::counting(quiet, "runs")
    }

    /// A bar counting `unit` (`runs`, `points`), or nothing when `quiet` or when standard
    /// error is not a terminal.
    pub fn counting(quiet: bool, unit: &str) -> Bar {
        let shown = !quiet && std::io::stderr().is_terminal();
        Bar {
            bar: shown.then(|| {
                let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::hidden());
                bar.set_style(
                    ProgressStyle::with_template(&format!(
                        "{{spinner}} [{{elapsed_precise}}] {{bar:30}} {{pos}}/{{len}} {unit}, ETA {{eta}} {{wide_msg}}"
                    ))
                    .expect("a valid template"),
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

/// A bar of time for one run: the simulated time reached (or wall time on the real engine)
/// against the time the jobs will take, when the job file says (`runtime=` on every job),
/// with an ETA; else, when the engine reports the share of the work done (jobs that end by
/// size), a bar of that share with an ETA, as fio's; a spinner with the time reached
/// otherwise. Like [`Bar`], it appears after [`SHOW_AFTER`], on a terminal, and never when
/// quiet. It goes away when dropped.
pub struct TimeBar {
    bar: Option<ProgressBar>,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// Parts of the work in [`TimeBar::with_work`]'s share: a million.
const WORK_PARTS: u64 = 1_000_000;

impl TimeBar {
    /// Follows `reached` (ns), towards `total` (ns) if known.
    pub fn new(
        quiet: bool,
        total: Option<u64>,
        reached: impl Fn() -> u64 + Send + 'static,
    ) -> TimeBar {
        TimeBar::with_work(quiet, total, reached, None)
    }

    /// Follows `reached` (ns), towards `total` (ns) if known; else follows `work`, the share
    /// of the work done in parts per million, if given.
    pub fn with_work(
        quiet: bool,
        total: Option<u64>,
        reached: impl Fn() -> u64 + Send + 'static,
        work: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>,
    ) -> TimeBar {
        if total.is_none() {
            if let Some(work) = work {
                return TimeBar::of_work(quiet, reached, work);
            }
        }
        if quiet || !std::io::stderr().is_terminal() {
            return TimeBar::hidden();
        }
        let ms = |ns: u64| ns / 1_000_000;
        let (bar, template) = match total {
            Some(total) => (
                ProgressBar::with_draw_target(Some(ms(total).max(1)), ProgressDrawTarget::hidden()),
                "{spinner} [{elapsed_precise}] {bar:30} {msg}, ETA {eta}",
            ),
            None => (
                ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden()),
                "{spinner} [{elapsed_precise}] {msg}",
            ),
        };
        bar.set_style(ProgressStyle::with_template(template).expect("a static template"));
        TimeBar::follow(bar, move |shown| {
            let now = reached();
            shown.set_position(ms(now));
            let of = total
                .map(|t| format!(" of {:.1} s", t as f64 / 1e9))
                .unwrap_or_default();
            shown.set_message(format!("{:.1} s{of} of the jobs' time", now as f64 / 1e9));
        })
    }
}

impl TimeBar {
    fn of_work(
        quiet: bool,
        reached: impl Fn() -> u64 + Send + 'static,
        work: std::sync::Arc<std::sync::atomic::AtomicU64>,
    ) -> TimeBar {
        if quiet || !std::io::stderr().is_terminal() {
            return TimeBar::hidden();
        }
        let bar = ProgressBar::with_draw_target(Some(WORK_PARTS), ProgressDrawTarget::hidden());
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {percent}% {msg}, ETA {eta}",
            )
            .expect("a static template"),
        );
        TimeBar::follow(bar, move |shown| {
            shown.set_position(work.load(Ordering::Relaxed).min(WORK_PARTS));
            shown.set_message(format!(
                "of the jobs' work, {:.1} s of their time",
                reached() as f64 / 1e9
            ));
        })
    }

    fn hidden() -> TimeBar {
        TimeBar {
            bar: None,
            done: std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
        }
    }

    /// Shows `bar` on standard error after [`SHOW_AFTER`] unless dropped before, and has
    /// `update` refresh it five times a second until dropped.
    fn follow(bar: ProgressBar, update: impl Fn(&ProgressBar) + Send + 'static) -> TimeBar {
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (shown, stop) = (bar.clone(), done.clone());
        std::thread::spawn(move || {
            std::thread::sleep(SHOW_AFTER);
            if stop.load(Ordering::Relaxed) {
                return;
            }
            shown.set_draw_target(ProgressDrawTarget::stderr());
            while !stop.load(Ordering::Relaxed) {
                update(&shown);
                shown.tick();
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        TimeBar {
            bar: Some(bar),
            done,
        }
    }
}

impl Drop for TimeBar {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// How long the jobs of `file` run, if every job says (`runtime=`): each stonewalled phase
/// lasts as long as its longest job (start delay, ramp and runtime), phases one after another.
pub fn jobs_time(file: &iosched_fio::JobFile) -> Option<u64> {
    let mut total = 0u64;
    let mut phase = 0u64;
    for (index, job) in file.jobs.iter().enumerate() {
        if index > 0 && job.stonewall {
            total = total.saturating_add(phase);
            phase = 0;
        }
        let runtime = job.runtime?;
        let length = job
            .startdelay
            .1
            .saturating_add(job.ramp_time)
            .saturating_add(runtime);
        phase = phase.max(length);
    }
    Some(total.saturating_add(phase)).filter(|t| *t > 0)
}
