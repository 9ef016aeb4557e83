//! What to do next: the text `iosched` alone prints, the hint after an error, and the shell
//! completions and man pages generated from the command line's definition.

use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// What `iosched` with no arguments prints: what it is, and the commands to start with.
pub const START: &str = "\
iosched: I/O scheduling with quality of service. fio job files in, fio-compatible results out,
on a deterministic simulated disk or SSD, or on a real file or device through io_uring.

Start here:
  iosched compare examples/isolation.fio --report isolation.html
                            a database beside a backup under five policies: which protect it,
                            at what cost (open the report in a browser)
  iosched run JOBFILE [--policy NAME]          one policy, fio's own output
  iosched run JOBFILE --engine real --filename PATH    real I/O through io_uring
  iosched policies          every policy and its tunables
  iosched devices           the device models
  iosched experiment list   the papers' claims, reproduced
  iosched sweep GRID.toml   every point of a grid of configurations into one table

Every command: iosched help COMMAND. Completions: iosched completions bash. Manual: iosched man.
";

/// The end of `--help`.
pub const AFTER_HELP: &str = "\
Start with: iosched compare examples/isolation.fio --report isolation.html";

/// `iosched run --help`'s examples.
pub const EXAMPLES_RUN: &str = "\
Examples:
  iosched run examples/isolation.fio
  iosched run examples/isolation.fio --policy bfq --output-format json --output out.json
  iosched run examples/ncq-priority.fio --policy noop --device he8 --device-set ncq_prio_enable=on
  iosched run jobs.fio --engine real --filename /dev/loop0 --policy deadline
  SOURCE_DATE_EPOCH=0 iosched run jobs.fio --seed 7   # byte-identical output for a seed";

/// `iosched compare --help`'s examples.
pub const EXAMPLES_COMPARE: &str = "\
Examples:
  iosched compare examples/isolation.fio --report isolation.html
  iosched compare jobs.fio --policy deadline --policy bfq --policy cfq:slice_idle=0
  iosched compare jobs.fio --sweep IODEPTH=1,4,16,32 --device he8";

/// `iosched sweep --help`'s examples.
pub const EXAMPLES_SWEEP: &str = r#"Examples:
  iosched sweep examples/sweep/deadline.toml --output deadline.csv
  iosched sweep examples/sweep/deadline.toml --list | head
  iosched sweep grid.toml --threads 1 --output one.csv --summary one.md
  iosched sweep grid.toml --engine ray --output table.csv   # after pip install . (README, Python)

A grid (TOML):
  policy = "deadline"               # at every point unless an axis varies it; device, seed too
  [workloads]                       # name = fio job file, relative to the grid
  oltp = "oltp.fio"
  [set]                             # fixed everywhere; also [device_set], [env], [groups]
  writes_starved = 2
  [[axis]]                          # axes, outermost first, one key each: policy, device,
  "set.read_expire" = [125, 250]    # seed, workload, set.NAME, device.NAME, env.VAR,
  [[axis]]                          # group.PATH:FILE
  seed = [1, 2, 3]"#;

/// `iosched experiment --help`'s examples.
pub const EXAMPLES_EXPERIMENT: &str = "\
Examples:
  iosched experiment list
  iosched experiment run seed004-cdl
  iosched experiment run --all --quick --results results";

/// `iosched trace --help`'s examples.
pub const EXAMPLES_TRACE: &str = "\
Examples:
  iosched trace info web_0.csv
  iosched trace convert web_0.csv web_0.iolog --to iolog
  iosched trace jobs web_0.csv --mode open --flow-map disk:web_0=/web > web.fio
  iosched trace jobs trace.blkparse --flow-map pid:1234=/db:rt/0 | iosched run - --policy bfq
  iosched run replay.fio --engine real --filename /dev/loop0   (a job with read_iolog=)";

/// `iosched devices --help`'s examples.
pub const EXAMPLES_DEVICES: &str = "\
Examples:
  iosched devices
  iosched devices he8";

/// `iosched calibrate --help`'s examples.
pub const EXAMPLES_CALIBRATE: &str = "\
Examples:
  iosched calibrate
  iosched calibrate --only hdd --quick";

/// `iosched bench --help`'s examples.
pub const EXAMPLES_BENCH: &str = "\
Examples:
  iosched bench
  iosched bench --policy bfq --jobs 64 --requests-per-job 20000";

/// `iosched frontier --help`'s examples.
pub const EXAMPLES_FRONTIER: &str = "\
Examples:
  iosched frontier --file /var/tmp/frontier.img --size-mib 1024
  iosched frontier --device /dev/loop0 --kernel mq-deadline,bfq --policies deadline,cfq";

/// `iosched mount --help`'s examples.
pub const EXAMPLES_MOUNT: &str = "\
Examples:
  iosched mount /srv/data /mnt/sched --policy bfq
  iosched mount /srv/data /mnt/sched --policy bfq --group /batch:io.weight=100 --daemon
  ionice -c3 dd if=/mnt/sched/big of=/dev/null bs=1M   # an idle-class reader
  iosched top /mnt/sched
  umount /mnt/sched                                    # or SIGINT/SIGTERM to the mount";

/// `iosched policies --help`'s examples.
pub const EXAMPLES_POLICIES: &str = "\
Examples:
  iosched policies
  iosched policies | grep -A12 '^bfq'";

/// The next useful command after an error of `command` saying `message`, if there is one.
pub fn after_error(command: &str, message: &str) -> Option<String> {
    let hint = if message.contains("unknown policy") || message.contains("policy setting") {
        "the policies and their tunables: iosched policies".to_string()
    } else if message.contains("unknown device model") || message.contains("device parameter") {
        "the device models and their parameters: iosched devices".to_string()
    } else if command == "experiment" {
        "the experiments: iosched experiment list".to_string()
    } else if message.contains("group")
        || message.contains("io.max")
        || message.contains("io.weight")
    {
        format!("the --group and --groups syntax: iosched {command} --help")
    } else if command == "frontier" {
        "what it needs and does: iosched frontier --help".to_string()
    } else if command.is_empty() {
        return None;
    } else if message.contains(".fio:") || message.contains("job file") {
        format!(
            "a job file that works: iosched {command} examples/isolation.fio; the options: \
             iosched {command} --help"
        )
    } else {
        format!("the options: iosched {command} --help")
    };
    Some(hint)
}

/// Arguments of `iosched completions`.
#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Prints the completion script for the shell asked.
pub fn completions(args: CompletionsArgs, command: &mut clap::Command) -> Result<ExitCode> {
    clap_complete::generate(args.shell, command, "iosched", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `iosched man`.
#[derive(Args, Debug)]
pub struct ManArgs {
    /// Write iosched.1 and one page per command (iosched-run.1, ...) into this existing
    /// directory instead of printing iosched.1.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Prints the man page, or writes every page into `--dir`.
pub fn man(args: ManArgs, command: clap::Command) -> Result<ExitCode> {
    let render = |command: clap::Command| -> Result<Vec<u8>> {
        let mut page = Vec::new();
        clap_mangen::Man::new(command)
            .render(&mut page)
            .context("cannot render the man page")?;
        Ok(page)
    };
    let Some(dir) = args.dir else {
        use std::io::Write;
        std::io::stdout()
            .write_all(&render(command)?)
            .context("cannot write to standard output")?;
        return Ok(ExitCode::SUCCESS);
    };
    if !dir.is_dir() {
        bail!(
            "--dir {}: not a directory (iosched writes pages into a directory that exists)",
            dir.display()
        );
    }
    let command = command.name("iosched");
    let mut pages = vec![("iosched.1".to_string(), render(command.clone())?)];
    for sub in command.get_subcommands() {
        let name = format!("iosched-{}", sub.get_name());
        pages.push((format!("{name}.1"), render(sub.clone().name(name))?));
    }
    for (file, page) in pages {
        let path = dir.join(&file);
        iosched_fio::output::file::write_output(&path, &page).map_err(anyhow::Error::new)?;
        println!("{}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
