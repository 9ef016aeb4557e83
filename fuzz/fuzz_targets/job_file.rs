//! libFuzzer target `job_file`: see [`iosched_fuzz::job_file`] for the input and what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iosched_fuzz::job_file(data));
