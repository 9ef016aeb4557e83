//! libFuzzer target `policy_ops`: see [`iosched_fuzz::policy_ops`] for the input and what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iosched_fuzz::policy_ops(data));
