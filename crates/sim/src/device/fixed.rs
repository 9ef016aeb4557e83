//! `fixed`: every command takes the same time; up to `parallelism` are served at once, first
//! come first served. It has no mechanics at all, which makes a scheduler's own behaviour easy to
//! see and to test exactly.

use super::{parameter, parse_integer, Device, DeviceError};
use iosched_core::{time::MICROSECOND, Nanos, Request};
use iosched_fio::Parameter;
use std::collections::VecDeque;

/// The fixed-latency device.
#[derive(Debug)]
pub struct Fixed {
    latency: Nanos,
    parallelism: u32,
    queue_depth: u32,
    capacity: u64,
    waiting: VecDeque<Request>,
    /// (completion time, request), in completion order.
    serving: VecDeque<(Nanos, Request)>,
    completed: u64,
}

impl Fixed {
    /// A device serving each command in `latency`, `parallelism` at once, accepting
    /// `queue_depth` commands.
    pub fn new(latency: Nanos, parallelism: u32, queue_depth: u32, capacity: u64) -> Self {
        assert!(parallelism >= 1 && queue_depth >= 1 && capacity > 0);
        Fixed {
            latency,
            parallelism,
            queue_depth,
            capacity,
            waiting: VecDeque::new(),
            serving: VecDeque::new(),
            completed: 0,
        }
    }

    /// Built from `latency_us`, `parallelism`, `queue_depth`, `capacity_gib` settings.
    pub fn from_settings(settings: &[(String, String)]) -> Result<Self, DeviceError> {
        let mut device = Fixed::new(100 * MICROSECOND, 1, 32, 100 << 30);
        for (name, value) in settings {
            match name.as_str() {
                "latency_us" => {
                    device.latency = parse_integer(name, value, 0, 60_000_000)? * MICROSECOND
                }
                "parallelism" => device.parallelism = parse_integer(name, value, 1, 1024)? as u32,
                "queue_depth" => device.queue_depth = parse_integer(name, value, 1, 65_536)? as u32,
                "capacity_gib" => device.capacity = parse_integer(name, value, 1, 1 << 20)? << 30,
                _ => {
                    return Err(DeviceError::UnknownParameter {
                        model: "fixed".into(),
                        name: name.clone(),
                        known: ["latency_us", "parallelism", "queue_depth", "capacity_gib"]
                            .map(String::from)
                            .to_vec(),
                    })
                }
            }
        }
        Ok(device)
    }

    fn start_waiting(&mut self, now: Nanos) {
        while self.serving.len() < self.parallelism as usize {
            let Some(request) = self.waiting.pop_front() else {
                break;
            };
            // Equal latencies keep completion order equal to start order.
            self.serving.push_back((now + self.latency, request));
        }
    }
}

impl Device for Fixed {
    fn model(&self) -> &'static str {
        "fixed"
    }

    fn capacity(&self) -> u64 {
        self.capacity
    }

    fn queue_depth(&self) -> u32 {
        self.queue_depth
    }

    fn in_flight(&self) -> u32 {
        (self.waiting.len() + self.serving.len()) as u32
    }

    fn submit(&mut self, request: Request, now: Nanos) {
        assert!(self.in_flight() < self.queue_depth, "device queue is full");
        self.waiting.push_back(request);
        self.start_waiting(now);
    }

    fn next_event(&self) -> Option<Nanos> {
        self.serving.front().map(|(at, _)| *at)
    }

    fn advance(&mut self, now: Nanos, done: &mut Vec<(Nanos, Request)>) {
        while let Some(&(at, _)) = self.serving.front() {
            if at > now {
                break;
            }
            let (at, request) = self.serving.pop_front().expect("front exists");
            done.push((at, request));
            self.completed += 1;
            // Capacity freed at `at`: a waiting command starts then, not at `now`.
            self.start_waiting(at);
        }
    }

    fn parameters(&self) -> Vec<Parameter> {
        vec![
            parameter(
                "latency_us",
                self.latency / MICROSECOND,
                "us",
                "time of every command",
            ),
            parameter(
                "parallelism",
                self.parallelism,
                "commands",
                "commands served at once",
            ),
            parameter(
                "queue_depth",
                self.queue_depth,
                "commands",
                "commands accepted at once",
            ),
            parameter(
                "capacity_gib",
                self.capacity >> 30,
                "GiB",
                "addressable size",
            ),
        ]
    }

    fn counters(&self) -> Vec<(String, f64)> {
        vec![("completed".into(), self.completed as f64)]
    }
}

/// This model's entry in the device catalog (`iosched devices`).
pub const MODEL: super::ModelInfo = super::ModelInfo {
        name: "fixed",
        summary: "every command takes a fixed time, `parallelism` at once (for tests and teaching)",
        build: |settings, _seed| Ok(Box::new(Fixed::from_settings(settings)?)),
        derived_from: &[],
};
