//! # iosched-fuzz
//!
//! What each fuzz target checks, as plain functions of the input bytes, so that one body
//! serves both `cargo fuzz` (libFuzzer, nightly, the `fuzz/` folder at the top of the
//! repository) and the corpus replay in this crate's tests (stable, in `cargo test`).
//!
//! Every target must return normally for every input: a panic is a finding, whether it comes
//! from the code under test (an overflow, an index out of range, a `RefCell` borrowed twice) or
//! from the target's own checks of what the code promised (an error longer than the limits
//! allow, a request completed twice, a policy that never empties).
//!
//! | target        | input                                  | what it checks                     |
//! |---------------|----------------------------------------|------------------------------------|
//! | `job_file`    | a job file; NUL bytes separate the     | parse or a located, short error;   |
//! |               | files `include 1.fio`, `2.fio`... name | a parsed file sets up a simulation |
//! |               |                                        | or is refused, on every device     |
//! | `groups_file` | a `--groups` file                      | parse, apply to groups and stages  |
//! | `cli_values`  | a selector byte and a value            | `--set`, `--group`, `--device-set`,|
//! |               |                                        | `--policy`, `--output-format`      |
//! | `policy_ops`  | a policy, a stage, queue settings, and | every request dispatched once,     |
//! |               | insert/dispatch/complete/requeue/timer | as submitted or merged whole,      |
//! |               | operations                             | completed once; the queue empties  |

#![warn(missing_docs)]

mod bytes;
pub mod targets;

pub use targets::{cli_values, groups_file, job_file, policy_ops, trace_formats, Target, TARGETS};
