//! libFuzzer target `trace_formats`: see [`iosched_fuzz::trace_formats`] for the input and what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iosched_fuzz::trace_formats(data));
