//! # iosched (the command's library)
//!
//! Argument parsing and printing only: each subcommand's options (clap) and what it prints,
//! over the library crates that do the work (`iosched-lab` runs studies, `iosched-report`
//! draws them, `iosched-sim` and `iosched-uring` run jobs). Kept as a library so that tests
//! call the commands without a process.

pub mod bench;
pub mod calibrate;
pub mod catalog;
pub mod compare;
pub mod experiment;
pub mod frontier;
pub mod hints;
pub mod mount;
pub mod progress;
pub mod run;
pub mod sweep;
pub mod trace;
