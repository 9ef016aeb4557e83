//! Per-flow statistics of a mount: for each process and cgroup, I/Os, bytes, the rate over
//! the last second and latency percentiles (fio's histogram, so memory per flow is bounded
//! whatever the run's length), shown in the mount's control directory (`.iosched/stats`,
//! `.iosched/stats.json`) and by `iosched top`.

use crate::classify::Caller;
use iosched_core::IoPrio;
use iosched_fio::Latency;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::fmt::Write;
use std::time::{Duration, Instant};

/// Most flows tracked at once; beyond it the one idle longest is dropped.
pub const FLOWS_MAX: usize = 1024;

/// The window of the recent rates.
const WINDOW: Duration = Duration::from_secs(1);

/// What a request did, for the statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A read.
    Read,
    /// A write.
    Write,
    /// An fsync.
    Fsync,
}

/// One direction of one flow.
#[derive(Clone, Debug, Default)]
pub struct Direction {
    /// I/Os completed.
    pub ios: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Errors returned.
    pub errors: u64,
    /// Latency from the FUSE request's arrival to its reply.
    pub latency: Latency,
    window_start: Option<Instant>,
    window_ios: u64,
    window_bytes: u64,
    recent: (f64, f64),
    recent_at: Option<Instant>,
}

impl Direction {
    fn record(&mut self, bytes: u64, latency: Duration, ok: bool, now: Instant) {
        if !ok {
            self.errors += 1;
            return;
        }
        self.ios += 1;
        self.bytes += bytes;
        self.latency.record(latency.as_nanos() as u64);
        let start = *self.window_start.get_or_insert(now);
        let elapsed = now.duration_since(start);
        if elapsed >= WINDOW {
            let seconds = elapsed.as_secs_f64();
            self.recent = (
                self.window_ios as f64 / seconds,
                self.window_bytes as f64 / seconds,
            );
            self.recent_at = Some(now);
            self.window_start = Some(now);
            self.window_ios = 0;
            self.window_bytes = 0;
        }
        self.window_ios += 1;
        self.window_bytes += bytes;
    }

    /// I/Os and bytes per second over the last full second (zero once idle for two).
    pub fn recent(&self, now: Instant) -> (f64, f64) {
        match self.recent_at {
            Some(at) if now.duration_since(at) < 2 * WINDOW => self.recent,
            _ => (0.0, 0.0),
        }
    }

    fn json(&self, now: Instant, uptime: f64) -> Value {
        let (iops, bw) = self.recent(now);
        let lat = &self.latency;
        let pct = |p: f64| {
            if lat.count() > 0 {
                lat.percentile(p)
            } else {
                0
            }
        };
        json!({
            "ios": self.ios,
            "bytes": self.bytes,
            "errors": self.errors,
            "iops": iops,
            "bw_bytes": bw,
            "iops_mean": self.ios as f64 / uptime.max(1e-9),
            "lat_ns": {
                "mean": lat.mean(),
                "p50": pct(50.0),
                "p95": pct(95.0),
                "p99": pct(99.0),
                "p99.9": pct(99.9),
                "max": lat.max(),
            }
        })
    }
}

/// One flow: a process in a cgroup.
#[derive(Clone, Debug)]
pub struct Flow {
    /// The process.
    pub pid: u32,
    /// Its command name.
    pub comm: String,
    /// Its cgroup.
    pub cgroup: String,
    /// Its user.
    pub uid: u32,
    /// The priority of its last request.
    pub prio: IoPrio,
    /// Reads.
    pub read: Direction,
    /// Writes.
    pub write: Direction,
    /// Fsyncs.
    pub fsync: Direction,
    last: Instant,
}

/// Every flow of a mount.
#[derive(Debug)]
pub struct Stats {
    started: Instant,
    /// What the header says: the policy, the backing directory and the mount point.
    pub title: String,
    flows: HashMap<(u32, String), Flow>,
    /// Flows dropped to keep [`FLOWS_MAX`].
    pub dropped: u64,
}

impl Stats {
    /// No flows yet.
    pub fn new(title: String, started: Instant) -> Self {
        Stats {
            started,
            title,
            flows: HashMap::new(),
            dropped: 0,
        }
    }

    /// Counts one completed request of `caller`.
    pub fn record(
        &mut self,
        caller: &Caller,
        kind: Kind,
        bytes: u64,
        latency: Duration,
        ok: bool,
        now: Instant,
    ) {
        let key = (caller.pid, caller.cgroup.clone());
        if !self.flows.contains_key(&key) && self.flows.len() >= FLOWS_MAX {
            let idlest = self
                .flows
                .iter()
                .min_by_key(|(_, flow)| flow.last)
                .map(|(key, _)| key.clone());
            if let Some(idlest) = idlest {
                self.flows.remove(&idlest);
                self.dropped += 1;
            }
        }
        let flow = self.flows.entry(key).or_insert_with(|| Flow {
            pid: caller.pid,
            comm: caller.comm.clone(),
            cgroup: caller.cgroup.clone(),
            uid: caller.uid,
            prio: caller.prio,
            read: Direction::default(),
            write: Direction::default(),
            fsync: Direction::default(),
            last: now,
        });
        flow.prio = caller.prio;
        flow.last = now;
        let direction = match kind {
            Kind::Read => &mut flow.read,
            Kind::Write => &mut flow.write,
            Kind::Fsync => &mut flow.fsync,
        };
        direction.record(bytes, latency, ok, now);
    }

    /// The flows, busiest first.
    pub fn flows(&self) -> Vec<&Flow> {
        let mut flows: Vec<&Flow> = self.flows.values().collect();
        flows.sort_by(|a, b| {
            (b.read.bytes + b.write.bytes)
                .cmp(&(a.read.bytes + a.write.bytes))
                .then(a.pid.cmp(&b.pid))
                .then(a.cgroup.cmp(&b.cgroup))
        });
        flows
    }

    /// The statistics as JSON (`.iosched/stats.json`).
    pub fn json(&self, now: Instant) -> Value {
        let uptime = now.duration_since(self.started).as_secs_f64();
        let flows: Vec<Value> = self
            .flows()
            .into_iter()
            .map(|flow| {
                json!({
                    "pid": flow.pid,
                    "comm": flow.comm,
                    "cgroup": flow.cgroup,
                    "uid": flow.uid,
                    "prio": prio_name(flow.prio),
                    "read": flow.read.json(now, uptime),
                    "write": flow.write.json(now, uptime),
                    "fsync": flow.fsync.json(now, uptime),
                })
            })
            .collect();
        json!({
            "title": self.title,
            "uptime_s": uptime,
            "flows_dropped": self.dropped,
            "flows": flows,
        })
    }

    /// The statistics as a table (`.iosched/stats`, `iosched top`).
    pub fn text(&self, now: Instant) -> String {
        render(&self.json(now))
    }
}

/// Renders [`Stats::json`]'s value as a table: one line per flow and direction that moved
/// anything.
pub fn render(stats: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}, up {:.1} s",
        stats["title"].as_str().unwrap_or("iosched mount"),
        stats["uptime_s"].as_f64().unwrap_or(0.0)
    );
    let _ = writeln!(
        out,
        "{:>7} {:<15} {:<24} {:>5} {:<6} {:<5} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "PID",
        "COMM",
        "CGROUP",
        "UID",
        "PRIO",
        "DIR",
        "IOPS",
        "MiB/s",
        "IOS",
        "MEAN",
        "P50",
        "P99",
        "P99.9"
    );
    for flow in stats["flows"].as_array().into_iter().flatten() {
        for dir in ["read", "write", "fsync"] {
            let d = &flow[dir];
            if d["ios"].as_u64().unwrap_or(0) == 0 && d["errors"].as_u64().unwrap_or(0) == 0 {
                continue;
            }
            let lat = &d["lat_ns"];
            let _ = writeln!(
                out,
                "{:>7} {:<15} {:<24} {:>5} {:<6} {:<5} {:>9.0} {:>9.2} {:>10} {:>10} {:>10} {:>10} {:>10}",
                flow["pid"].as_u64().unwrap_or(0),
                cut(flow["comm"].as_str().unwrap_or(""), 15),
                cut(flow["cgroup"].as_str().unwrap_or(""), 24),
                flow["uid"].as_u64().unwrap_or(0),
                flow["prio"].as_str().unwrap_or(""),
                dir,
                d["iops"].as_f64().unwrap_or(0.0),
                d["bw_bytes"].as_f64().unwrap_or(0.0) / 1048576.0,
                d["ios"].as_u64().unwrap_or(0),
                time(lat["mean"].as_f64().unwrap_or(0.0)),
                time(lat["p50"].as_f64().unwrap_or(0.0)),
                time(lat["p99"].as_f64().unwrap_or(0.0)),
                time(lat["p99.9"].as_f64().unwrap_or(0.0)),
            );
        }
    }
    out
}

/// `rt/0`, `be/4`, `idle`, `none`: ionice's classes, short.
fn prio_name(prio: IoPrio) -> String {
    use iosched_core::IoPrioClass;
    match prio.class() {
        IoPrioClass::None => "none".into(),
        IoPrioClass::Rt => format!("rt/{}", prio.level()),
        IoPrioClass::Be => format!("be/{}", prio.level()),
        IoPrioClass::Idle => "idle".into(),
    }
}

fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        text.to_string()
    } else {
        let tail: String = text
            .chars()
            .rev()
            .take(width - 1)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!("~{tail}")
    }
}

/// Nanoseconds in a short unit.
fn time(nanos: f64) -> String {
    if nanos >= 1e9 {
        format!("{:.2}s", nanos / 1e9)
    } else if nanos >= 1e6 {
        format!("{:.2}ms", nanos / 1e6)
    } else {
        format!("{:.1}us", nanos / 1e3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(pid: u32, cgroup: &str) -> Caller {
        Caller {
            pid,
            comm: format!("p{pid}"),
            uid: 0,
            prio: IoPrio::NONE,
            cgroup: cgroup.into(),
        }
    }

    #[test]
    fn flows_count_their_own_requests() {
        let start = Instant::now();
        let mut stats = Stats::new("t".into(), start);
        let ms = Duration::from_millis(1);
        for i in 0..10 {
            let now = start + Duration::from_millis(i * 200);
            stats.record(&caller(1, "/a"), Kind::Read, 4096, ms, true, now);
        }
        stats.record(&caller(2, "/b"), Kind::Write, 1 << 20, ms * 4, true, start);
        stats.record(&caller(2, "/b"), Kind::Write, 1 << 20, ms, false, start);
        let flows = stats.flows();
        assert_eq!(flows.len(), 2);
        assert_eq!(flows[0].pid, 2, "busiest first");
        assert_eq!((flows[0].write.ios, flows[0].write.errors), (1, 1));
        assert_eq!((flows[1].read.ios, flows[1].read.bytes), (10, 40960));
        // Five I/Os in the first whole second: 5 per second.
        let (iops, bw) = flows[1].read.recent(start + Duration::from_millis(1900));
        assert!((iops - 5.0).abs() < 1e-9 && (bw - 5.0 * 4096.0).abs() < 1e-6);
        assert_eq!(
            flows[1].read.recent(start + Duration::from_secs(10)),
            (0.0, 0.0)
        );
        let json = stats.json(start + Duration::from_secs(2));
        assert_eq!(json["flows"][1]["read"]["ios"], 10);
        assert_eq!(
            json["flows"][1]["read"]["lat_ns"]["p50"].as_u64().unwrap() / 100_000,
            10
        );
        let text = render(&json);
        assert!(text.contains("/a") && text.contains("read") && text.contains("write"));
        assert!(
            !text.contains("fsync"),
            "directions that did nothing are left out"
        );
    }

    #[test]
    fn the_number_of_flows_is_bounded() {
        let start = Instant::now();
        let mut stats = Stats::new("t".into(), start);
        for pid in 0..(FLOWS_MAX as u32 + 5) {
            let now = start + Duration::from_micros(pid as u64);
            stats.record(&caller(pid, "/"), Kind::Read, 1, Duration::ZERO, true, now);
        }
        assert_eq!(stats.flows().len(), FLOWS_MAX);
        assert_eq!(stats.dropped, 5);
        assert!(
            stats.flows().iter().all(|f| f.pid >= 5),
            "the idlest went first"
        );
    }
}
