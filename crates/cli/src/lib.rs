//! # iosched (the command's library)
//!
//! The `iosched` binary is thin: each subcommand lives in a module here, so that tests can call
//! them and the HTML report can be rendered without a process.

pub mod bench;
pub mod calibrate;
pub mod catalog;
pub mod compare;
pub mod experiment;
pub mod figures;
pub mod frontier;
pub mod matrix;
pub mod report;
pub mod run;
pub mod study;
pub mod table;
