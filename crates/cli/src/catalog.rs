//! `iosched policies` and `iosched devices`: what can be chosen, with every parameter.

use anyhow::Result;
use clap::Args;
use iosched_core::{elevator::QUEUE_TUNABLES, policies};
use iosched_sim::device;
use std::process::ExitCode;

/// One tunable's line: name, default, unit, what it does, and its range.
fn print_tunable(spec: &iosched_core::TunableSpec) {
    println!(
        "  {:<18} {:>8} {:<9} {} [{}..={}]",
        spec.name,
        spec.default,
        spec.unit.symbol(),
        spec.doc,
        spec.min,
        spec.max
    );
}

/// Lists every policy with its tunables.
pub fn policies() -> Result<ExitCode> {
    println!("Queue and host tunables (every policy; the host's in the simulator):");
    for spec in QUEUE_TUNABLES.iter().chain(iosched_sim::HOST_TUNABLES) {
        println!(
            "  {:<18} {:>8} {:<9} {}",
            spec.name,
            spec.default,
            spec.unit.symbol(),
            spec.doc
        );
    }
    for (name, summary, tunables) in iosched_core::stage::STAGES {
        println!();
        println!("{name} (a stage: {name}+POLICY puts it above any policy): {summary}");
        for spec in *tunables {
            print_tunable(spec);
        }
    }
    for info in policies::catalog() {
        println!();
        let aliases = if info.aliases.is_empty() {
            String::new()
        } else {
            format!(" (also: {})", info.aliases.join(", "))
        };
        println!("{}{aliases}: {}", info.name, info.summary);
        if info.tunables.is_empty() {
            println!("  no tunables of its own");
        }
        for spec in info.tunables {
            print_tunable(spec);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `iosched devices`.
#[derive(Args, Debug)]
pub struct DevicesArgs {
    /// Show only this model.
    pub model: Option<String>,
}

/// Lists every device model with its parameters and derived values.
pub fn devices(args: DevicesArgs) -> Result<ExitCode> {
    let mut first = true;
    for info in device::catalog() {
        if args.model.as_deref().is_some_and(|m| m != info.name) {
            continue;
        }
        if !first {
            println!();
        }
        first = false;
        println!("{}: {}", info.name, info.summary);
        let model = (info.build)(&[], 1).map_err(anyhow::Error::msg)?;
        for parameter in model.parameters() {
            println!(
                "  {:<28} {:>14} {:<10} {}",
                parameter.name, parameter.value, parameter.unit, parameter.note
            );
        }
    }
    if first {
        anyhow::bail!("unknown device model {:?}", args.model.unwrap_or_default());
    }
    println!();
    println!(
        "every model: partitions=SIZE,SIZE,... (fio sizes, N% of the disk, `rest` last) gives \
         the disk a partition table, partition 1 at 1 MiB and each on a 1 MiB boundary; jobs \
         name them /dev/sdb1, /dev/nvme0n1p2 ... and the files go on partition 1"
    );
    Ok(ExitCode::SUCCESS)
}
