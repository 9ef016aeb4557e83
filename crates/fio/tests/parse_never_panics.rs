//! Proves that no input makes the parser panic: arbitrary text, and text assembled from
//! fio's own vocabulary so that deep paths (values, ranges, includes, expressions) are reached.

use iosched_fio::parse::parse_str;
use proptest::prelude::*;
use std::path::Path;

fn env(name: &str) -> Option<String> {
    (name == "X").then(|| "4k".to_string())
}

const NAMES: &[&str] = &[
    "rw",
    "bs",
    "bsrange",
    "bssplit",
    "size",
    "io_size",
    "offset",
    "offset_increment",
    "runtime",
    "time_based",
    "startdelay",
    "thinktime",
    "rate",
    "rate_iops",
    "iodepth",
    "ioengine",
    "numjobs",
    "nrfiles",
    "filename",
    "directory",
    "filename_format",
    "prio",
    "prioclass",
    "random_distribution",
    "percentile_list",
    "kb_base",
    "stonewall",
    "new_group",
    "verify",
    "direct",
    "buffered",
    "rwmixwrite",
    "blockalign",
    "filesize",
    "fill_device",
    "zonemode",
    "cpus_allowed",
    "hipri",
    "include",
    "name",
    "write_lat_log",
    "randseed",
    "loops",
];

const VALUES: &[&str] = &[
    "",
    "0",
    "1",
    "-1",
    "4k",
    "4q",
    "1.5g",
    "0x10",
    "(4k*2)",
    "(1/0)",
    "((((",
    "20%",
    "200%",
    "1k-4k",
    "4k,64k",
    ",8k,",
    "4k/50:8k/",
    "randread:8",
    "write:4k",
    "zipf:1.2",
    "zoned:50/50",
    "libaio",
    "mmap",
    "10sec",
    "1m",
    "2h",
    "a:b\\:c",
    "${X}",
    "${Y}",
    "$ncpus*2",
    "9",
    "101",
    "1,2,3,4",
    "99999999999999999999999999999999999",
    "4ki",
    "\u{e9}",
    "$jobnum.$filenum",
];

fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        (prop::sample::select(NAMES), prop::sample::select(VALUES))
            .prop_map(|(name, value)| format!("{name}={value}")),
        prop::sample::select(NAMES).prop_map(str::to_string),
        "[a-z/]{0,6}".prop_map(|name| format!("[{name}]")),
        Just("[global]".to_string()),
        Just("; comment".to_string()),
        ".{0,40}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_text(text in ".{0,400}") {
        let _ = parse_str(&text, "p.fio", Path::new("/nonexistent"), &env);
    }

    #[test]
    fn text_from_fio_vocabulary(lines in prop::collection::vec(line(), 0..24)) {
        let text = lines.join("\n");
        let _ = parse_str(&text, "p.fio", Path::new("/nonexistent"), &env);
    }
}
