//! Issue 11: the simulator stays inside its limits whatever a job asks, refusing up front what
//! cannot finish and explaining a run that reaches its time limit anyway.

use iosched_core::time::SECOND;
use iosched_fio::parse::parse_str;
use iosched_fio::{JobFile, JobSpec};
use iosched_sim::SimConfig;
use std::path::Path;

fn file(text: &str) -> JobFile {
    parse_str(text, "job.fio", Path::new("."), &|_| None).unwrap_or_else(|e| panic!("{e}"))
}

// Regression (issue 11, item 2): a think time of 2^64 ns (built directly, as a library user
// could, past the parser's checks) is refused before the run, not a panic with "time went
// backwards" in the device model. Both device models.
#[test]
fn absurd_times_are_refused_not_panics() {
    for device in ["hdd", "ssd", "fixed"] {
        let mut file = file("[r]\nrw=randread\nsize=64m\ndirect=1\n");
        file.jobs[0].thinktime = u64::MAX;
        let config = SimConfig {
            device: device.into(),
            ..SimConfig::default()
        };
        let error = iosched_sim::run(&config, &file).unwrap_err().to_string();
        assert!(error.contains("thinktime="), "{device}: {error}");
        let mut spec: JobSpec = file.jobs[0].clone();
        spec.thinktime = 0;
        spec.startdelay = (u64::MAX - 5, u64::MAX);
        let error = iosched_sim::run(
            &config,
            &JobFile {
                jobs: vec![spec],
                ..JobFile::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("startdelay="), "{device}: {error}");
    }
}

// Regression (issue 11, item 6): a run that reaches the time limit (here lowered to one
// second) says what each unfinished job had done and what held it, instead of suggesting a
// fix that may be wrong.
#[test]
fn a_runaway_run_says_what_each_job_was_doing() {
    let file = file(
        "[reader]\nrw=randread\nsize=1g\ndirect=1\n\n[writer]\nrw=randwrite\nsize=1m\nbs=4k\n\
         direct=1\nthinktime=3900us\n",
    );
    let config = SimConfig {
        time_limit: SECOND,
        ..SimConfig::default()
    };
    let error = iosched_sim::run(&config, &file).unwrap_err().to_string();
    assert!(error.contains("limit of 1 s (1 s)"), "{error}");
    assert!(error.contains("job \"reader\": "), "{error}");
    assert!(error.contains("of 1073741824 bytes issued"), "{error}");
    assert!(
        error.contains("job \"writer\": ") && error.contains("thinktime=3.9 ms"),
        "{error}"
    );
}
