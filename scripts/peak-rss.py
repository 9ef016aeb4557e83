#!/usr/bin/env python3
"""Peak memory of long simulated runs: each experiment's job file, at its largest sweep point,
under each of its policies, with the runtime stretched (RUNTIME=3600 by default), one
`iosched run` each. Prints simulated seconds, wall seconds, completed I/Os and the peak resident
set size (the kernel's ru_maxrss for that process alone, from wait4).

    scripts/peak-rss.py                          # the seed 003 experiments, one hour each
    scripts/peak-rss.py --runtime 600 seed003-test2 seed000-rate
    scripts/peak-rss.py --iosched target/release/iosched --runtime 60,3600

A run's memory should be bounded by its settings (jobs, queue depths, file sizes), not by its
length: run it with two runtimes and compare the columns.
"""

import argparse
import json
import os
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def command(iosched, folder, spec, entry):
    """The `iosched run` of one of the experiment's policies: `entry` is a policy's name or a
    table (label, policy, job, env, settings, device_settings, groups) whose keys add to or
    replace the experiment's."""
    policy = entry["policy"]
    job = entry.get("job", spec["job"])
    args = [iosched, "run", str(folder / job), "--policy", policy, "--quiet"]
    args += ["--output-format", "json", "--output", "-"]
    if "device" in spec:
        args += ["--device", spec["device"]]
    device_settings = {**spec.get("device_settings", {}), **entry.get("device_settings", {})}
    for name, value in device_settings.items():
        args += ["--device-set", f"{name}={value}"]
    settings = {**spec.get("settings", {}), **entry.get("settings", {})}
    for name, value in settings.items():
        owner, dot, short = name.rpartition(".")
        if dot and owner != policy:
            continue
        args += ["--set", f"{short}={value}"]
    groups = {**spec.get("groups", {}), **entry.get("groups", {})}
    for path, files in groups.items():
        for file, value in files.items():
            args += ["--group", f"{path}:{file}={value}"]
    if "seed" in spec:
        args += ["--seed", str(spec["seed"])]
    return args


def run(iosched, folder, spec, entry, runtime):
    env = dict(os.environ)
    env.update({k: str(v) for k, v in spec.get("env", {}).items()})
    env.update({k: str(v) for k, v in entry.get("env", {}).items()})
    env["RUNTIME"] = str(runtime)
    sweep = spec.get("sweep")
    if sweep:
        env[sweep["variable"]] = str(sweep["values"][-1])
    args = command(iosched, folder, spec, entry)
    # Popen's wait would reap the child before wait4 could read its usage: run it by hand.
    start = time.monotonic()
    read_out, write_out = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.dup2(write_out, 1)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(read_out)
        os.execvpe(args[0], args, env)
    os.close(write_out)
    chunks = []
    while chunk := os.read(read_out, 1 << 16):
        chunks.append(chunk)
    os.close(read_out)
    _, status, usage = os.wait4(pid, 0)
    wall = time.monotonic() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"failed ({status}): {' '.join(args)}")
    report = json.loads(b"".join(chunks))
    ios = sum(
        job[d]["total_ios"] for job in report["jobs"] for d in ("read", "write", "trim")
    )
    return ios, wall, usage.ru_maxrss


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("experiments", nargs="*", help="experiment folders (default: seed003-*)")
    parser.add_argument("--dir", default=str(ROOT / "experiments"))
    parser.add_argument("--iosched", default=str(ROOT / "target/release/iosched"))
    parser.add_argument("--runtime", default="3600", help="seconds; a list compares lengths")
    options = parser.parse_args()
    base = Path(options.dir)
    names = options.experiments or sorted(p.name for p in base.glob("seed003-*"))
    runtimes = [int(r) for r in options.runtime.split(",")]
    print(f"{'experiment':18} {'policy':18} {'sim s':>6} {'I/Os':>10} {'wall s':>7} {'peak RSS':>10}")
    for name in names:
        folder = base / name
        spec = tomllib.loads((folder / "experiment.toml").read_text())
        for entry in spec["policies"]:
            if isinstance(entry, str):
                entry = {"policy": entry}
            label = entry.get("label", entry["policy"])
            for runtime in runtimes:
                try:
                    ios, wall, rss_kib = run(options.iosched, folder, spec, entry, runtime)
                except RuntimeError as error:
                    print(f"{name:18} {label:18} {runtime:>6} {error}", file=sys.stderr)
                    continue
                print(
                    f"{name:18} {label:18} {runtime:>6} {ios:>10} {wall:>7.1f} "
                    f"{rss_kib / 1024:>7.1f} MiB",
                    flush=True,
                )


if __name__ == "__main__":
    main()
