//! fio's verify in the simulator: there is no data, so a job that would read back and check
//! what it wrote is refused, and verify on any other job is noted.

use iosched_fio::parse::parse_str;
use iosched_sim::{run, SimConfig};
use std::path::Path;

fn simulate(text: &str) -> Result<iosched_fio::RunReport, String> {
    let file = parse_str(text, "t.fio", Path::new("."), &|_| None).map_err(|e| e.to_string())?;
    let config = SimConfig {
        device: "fixed".into(),
        ..SimConfig::default()
    };
    run(&config, &file).map_err(|e| e.to_string())
}

#[test]
fn verify_read_back_is_refused_with_its_location() {
    let error = simulate("[j]\nrw=write\nsize=1m\nverify=crc32c\n").unwrap_err();
    assert!(
        error.starts_with("t.fio:4: verify=crc32c: refused"),
        "{error}"
    );
    assert!(error.contains("--engine real"), "{error}");
}

#[test]
fn verify_without_read_back_is_noted() {
    for text in [
        "[j]\nrw=write\nsize=1m\nverify=md5\ndo_verify=0\n",
        "[j]\nrw=randread\nsize=1m\nverify=crc32c\n",
    ] {
        let report = simulate(text).unwrap();
        assert!(
            report
                .notes
                .iter()
                .any(|n| n.contains("note: verify: no meaning in simulation")),
            "{:?}",
            report.notes
        );
    }
}
