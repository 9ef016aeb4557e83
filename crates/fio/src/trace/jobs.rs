//! A trace's flows as a fio job file (`iosched trace jobs`): one job per flow (a process, an
//! MSR disk, an SPC ASU, an iolog file), each replaying only its own records from the shared
//! trace (`iolog_flow`), so that each flow can be given a cgroup, a priority and QoS options
//! of its own and is measured on its own.

use super::replay::{flow_key, ReplayMode};
use super::{Action, Format, TraceError, TraceReader};
use std::collections::HashMap;
use std::fmt::Write;
use std::path::Path;

/// Where a flow goes: its cgroup and its I/O priority, as `--flow-map KEY=/cgroup[:CLASS/LEVEL]`
/// gives them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowMap {
    /// The flow's key (`pid:1234`, `disk:web_0`, `asu:1`, `file:NAME`).
    pub key: String,
    /// Its cgroup, if given.
    pub cgroup: Option<String>,
    /// Its priority class (1 RT, 2 BE, 3 IDLE) and level, if given.
    pub prio: Option<(u8, u8)>,
}

impl FlowMap {
    /// Reads `KEY=/cgroup`, `KEY=/cgroup:CLASS/LEVEL` or `KEY=:CLASS/LEVEL`, the class as
    /// `rt`, `be`, `idle` or its number.
    pub fn parse(text: &str) -> Result<FlowMap, String> {
        let (key, target) = text
            .split_once('=')
            .ok_or_else(|| format!("--flow-map {text:?}: KEY=/cgroup[:CLASS/LEVEL]"))?;
        if key.is_empty() {
            return Err(format!("--flow-map {text:?}: no flow before '='"));
        }
        let (cgroup, prio) = match target.rsplit_once(':') {
            Some((cgroup, prio)) if prio.contains('/') => (cgroup, Some(prio)),
            _ => (target, None),
        };
        if !cgroup.is_empty() && !cgroup.starts_with('/') {
            return Err(format!(
                "--flow-map {text:?}: the cgroup {cgroup:?} must start with '/'"
            ));
        }
        let prio = match prio {
            None => None,
            Some(prio) => {
                let (class, level) = prio.split_once('/').expect("checked above");
                let class = match class {
                    "rt" | "1" => 1,
                    "be" | "2" => 2,
                    "idle" | "3" => 3,
                    other => {
                        return Err(format!(
                            "--flow-map {text:?}: priority class {other:?} is rt, be or idle"
                        ))
                    }
                };
                let level: u8 =
                    level
                        .parse()
                        .ok()
                        .filter(|level| *level <= 7)
                        .ok_or_else(|| {
                            format!("--flow-map {text:?}: priority level {level:?} is 0 to 7")
                        })?;
                Some((class, level))
            }
        };
        Ok(FlowMap {
            key: key.to_string(),
            cgroup: (!cgroup.is_empty()).then(|| cgroup.to_string()),
            prio,
        })
    }
}

/// How the generated jobs replay.
#[derive(Clone, Debug)]
pub struct JobsOptions {
    /// The trace, as the job file will name it.
    pub path: String,
    /// Its format, when given (else told from its first bytes).
    pub format: Option<Format>,
    /// When each I/O goes.
    pub mode: ReplayMode,
    /// `replay_time_scale`.
    pub time_scale: u32,
    /// Each job's `iodepth` (1 under `closed`).
    pub iodepth: u32,
    /// The file or device each target goes to, by the target's name. A target not named goes
    /// to a file of its own name (`web_0.dat`), never to a device node the user did not name;
    /// an iolog's files keep their names unless named here (then the job's
    /// `replay_redirect`).
    pub filenames: Vec<(String, String)>,
    /// Cgroups and priorities per flow.
    pub flow_map: Vec<FlowMap>,
}

/// A name fit for a file: the target's, with anything but letters, digits, `.`, `-` and `_`
/// replaced.
fn file_name_for(target: &str) -> String {
    let cleaned: String = target
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{cleaned}.dat")
}

/// fio's `filename` separator is `:`; a `:` in a name is written `\:`.
fn escape_filename(name: &str) -> String {
    name.replace(':', "\\:")
}

/// The job file replaying each flow of the trace `options.path` as its own job.
pub fn job_file(options: &JobsOptions) -> Result<String, TraceError> {
    let mut reader = TraceReader::open(Path::new(&options.path), options.format)?;
    // Each flow's targets in the order the flow first addresses them, and its I/O count.
    let mut flows: Vec<(String, Vec<u32>, u64)> = Vec::new();
    let mut flow_index: HashMap<u32, usize> = HashMap::new();
    let mut targets: Vec<u32> = Vec::new();
    while let Some(record) = reader.next_record()? {
        if !matches!(record.action, Action::Io(_)) {
            continue;
        }
        let index = *flow_index.entry(record.flow).or_insert_with(|| {
            flows.push((flow_key(&reader, &record), Vec::new(), 0));
            flows.len() - 1
        });
        let flow = &mut flows[index];
        flow.2 += 1;
        if !flow.1.contains(&record.target) {
            flow.1.push(record.target);
        }
        if !targets.contains(&record.target) {
            targets.push(record.target);
        }
    }
    if flows.is_empty() {
        return Err(TraceError::file(&options.path, "no I/O in the trace"));
    }
    for map in &options.flow_map {
        if !flows.iter().any(|(key, _, _)| *key == map.key) {
            let keys: Vec<&str> = flows.iter().map(|(k, _, _)| k.as_str()).take(20).collect();
            return Err(TraceError::file(
                &options.path,
                format!(
                    "--flow-map names flow {:?}, which the trace does not have (its flows: {}{})",
                    map.key,
                    keys.join(", "),
                    if flows.len() > 20 { ", ..." } else { "" }
                ),
            ));
        }
    }
    let format = reader.format();
    let names = reader.names();
    let mapped = |target: u32| -> Option<String> {
        let name = names.get(target);
        options
            .filenames
            .iter()
            .find(|(t, _)| t == name)
            .map(|(_, file)| file.clone())
    };
    let target_file = |target: u32| -> String {
        mapped(target).unwrap_or_else(|| file_name_for(names.get(target)))
    };
    if let Some((unknown, _)) = options.filenames.iter().find(|(t, _)| {
        !targets
            .iter()
            .any(|&target| names.get(target) == t.as_str())
    }) {
        let known: Vec<&str> = targets.iter().map(|&t| names.get(t)).take(20).collect();
        return Err(TraceError::file(
            &options.path,
            format!(
                "--target names {unknown:?}, which the trace does not address (its targets: {})",
                known.join(", ")
            ),
        ));
    }
    let mut text = String::new();
    let _ = writeln!(
        text,
        "; {} flows replayed from {} ({}), written by iosched trace jobs",
        flows.len(),
        options.path,
        format
    );
    let _ = writeln!(text, "[global]");
    let _ = writeln!(text, "read_iolog={}", options.path);
    let _ = writeln!(text, "iolog_format={format}");
    let _ = writeln!(text, "replay_mode={}", options.mode.name());
    if options.time_scale != 100 {
        let _ = writeln!(text, "replay_time_scale={}", options.time_scale);
    }
    let _ = writeln!(text, "ioengine=libaio");
    let _ = writeln!(text, "direct=1");
    let depth = if options.mode == ReplayMode::Closed {
        1
    } else {
        options.iodepth.max(1)
    };
    let _ = writeln!(text, "iodepth={depth}");
    for (key, flow_targets, ios) in &flows {
        let _ = writeln!(text);
        let _ = writeln!(text, "; {ios} I/Os");
        let _ = writeln!(text, "[{key}]");
        let _ = writeln!(text, "iolog_flow={key}");
        if format == Format::Iolog {
            // An iolog's flow is one file: named elsewhere, its I/O is redirected there.
            if let Some(file) = flow_targets.first().and_then(|&t| mapped(t)) {
                let _ = writeln!(text, "replay_redirect={file}");
            }
        } else {
            let files: Vec<String> = flow_targets
                .iter()
                .map(|&t| escape_filename(&target_file(t)))
                .collect();
            let _ = writeln!(text, "filename={}", files.join(":"));
        }
        if let Some(map) = options.flow_map.iter().find(|m| m.key == *key) {
            if let Some(cgroup) = &map.cgroup {
                let _ = writeln!(text, "cgroup={cgroup}");
            }
            if let Some((class, level)) = map.prio {
                let _ = writeln!(text, "prioclass={class}");
                let _ = writeln!(text, "prio={level}");
            }
        }
    }
    Ok(text)
}
