//! The simulated setup every study shares: tunables, device, seed and cgroup settings, and
//! the parsers of the cgroup settings as the command line and groups files write them.

use anyhow::{bail, Result};
use iosched_core::limits;
use iosched_fio::parse;
use iosched_sim::{GroupSetting, SimConfig};
use std::path::{Path, PathBuf};

/// Tunables, device, seed and cgroup settings, as `--set`, `--device`, `--device-set`,
/// `--seed`, `--group` and `--groups` give them.
#[derive(Clone, Debug, Default)]
pub struct Setup {
    /// Queue and policy tunables (`POLICY.NAME` for one policy only).
    pub settings: Vec<(String, String)>,
    /// Device model (see `iosched devices`).
    pub device: String,
    /// Device parameters.
    pub device_settings: Vec<(String, String)>,
    /// Seed that every random choice derives from.
    pub seed: u64,
    /// cgroup io controller files to write.
    pub groups: Vec<GroupSetting>,
    /// A groups file to read first.
    pub groups_file: Option<PathBuf>,
}

/// `PATH:FILE=VALUE` into a group setting.
pub fn parse_group_flag(text: &str) -> Result<GroupSetting, String> {
    let usage = || {
        format!(
            "expected PATH:FILE=VALUE (like /vm1:io.weight=500), got {}",
            limits::quote(text)
        )
    };
    let (path, rest) = text.split_once(':').ok_or_else(usage)?;
    let (file, value) = rest.split_once('=').ok_or_else(usage)?;
    if path.trim().is_empty() || file.trim().is_empty() {
        return Err(usage());
    }
    Ok(GroupSetting {
        path: path.trim().to_string(),
        file: file.trim().to_string(),
        value: value.trim().to_string(),
        // A value too long to echo (a 40,000-level path) is cut as errors cut quoted text.
        origin: if text.len() <= iosched_core::limits::QUOTED_BYTES_MAX {
            format!("--group {text}")
        } else {
            format!("--group {}", iosched_core::limits::quote(text))
        },
    })
}

/// Reads a groups file: `PATH FILE VALUE...` per line (the value is the rest of the line, as
/// written to the cgroup file), `#` starts a comment.
pub fn read_groups_file(path: &Path) -> Result<Vec<GroupSetting>> {
    let text = parse::read_text_file(path, "groups file", limits::INPUT_FILE_BYTES_MAX)
        .map_err(anyhow::Error::msg)?;
    parse_groups(&text, &path.display().to_string())
}

/// Parses the text of a groups file named `origin`.
pub fn parse_groups(text: &str, origin: &str) -> Result<Vec<GroupSetting>> {
    let mut settings = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut parts = line.splitn(3, char::is_whitespace);
        let (Some(group), Some(file), Some(value)) = (parts.next(), parts.next(), parts.next())
        else {
            bail!(
                "{origin}:{}: expected `PATH FILE VALUE` (like `/vm1 io.weight 500`), got {line:?}",
                number + 1
            );
        };
        settings.push(GroupSetting {
            path: group.to_string(),
            file: file.to_string(),
            value: value.trim().to_string(),
            origin: format!("{origin}:{}", number + 1),
        });
    }
    Ok(settings)
}

impl Setup {
    /// The group settings of `--groups` and then `--group`, in that order.
    pub fn group_settings(&self) -> Result<Vec<GroupSetting>> {
        let mut group_settings = match &self.groups_file {
            Some(path) => read_groups_file(path)?,
            None => Vec::new(),
        };
        group_settings.extend(self.groups.iter().cloned());
        Ok(group_settings)
    }

    /// The simulator configuration for `policy` on this setup.
    pub fn config(&self, policy: &str) -> Result<SimConfig> {
        let group_settings = self.group_settings()?;
        Ok(SimConfig {
            seed: self.seed,
            policy: policy.to_string(),
            policy_settings: self.settings.clone(),
            device: self.device.clone(),
            device_settings: self.device_settings.clone(),
            group_settings,
            ..SimConfig::default()
        })
    }
}
