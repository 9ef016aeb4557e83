//! libFuzzer target `groups_file`: see [`iosched_fuzz::groups_file`] for the input and what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iosched_fuzz::groups_file(data));
