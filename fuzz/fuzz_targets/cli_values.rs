//! libFuzzer target `cli_values`: see [`iosched_fuzz::cli_values`] for the input and what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iosched_fuzz::cli_values(data));
