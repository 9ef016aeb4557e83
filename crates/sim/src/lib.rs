//! # iosched-sim
//!
//! A deterministic discrete-event simulator: fio jobs generate requests, an
//! [`Elevator`](iosched_core::Elevator) schedules them, a calibrated [`device`] model serves
//! them, and every completion is measured as fio measures it. One `u64` seed reproduces a run
//! byte for byte.

#![warn(missing_docs)]

pub mod device;
