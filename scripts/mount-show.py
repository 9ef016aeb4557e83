#!/usr/bin/env python3
"""Transparent mode, shown with unmodified programs (issue 20's figures).

Sets up what `iosched frontier` uses (a file, a loop device over it with direct I/O, here with
an ext4 file system on it), then:

1. isolation: examples/mount/rt-vs-idle.fio (an RT 4 KiB random reader at depth 1 beside
   eight idle-class sequential readers) with system fio, on files in an `iosched mount` of
   the file system under each policy (the loop device's scheduler set to none), and on the
   file system directly under each of the kernel's schedulers;
2. cgroups: two cgroups with weights 100 and 300, each running dd through the mount under
   bfq, and the same dd's on the file system directly under the kernel's bfq;
3. overhead: examples/mount/overhead.fio (one 4 KiB random reader, then one 128 KiB
   sequential reader) through the mount (noop) and on the file system directly (none).

Needs root, /dev/fuse, losetup, mkfs.ext4 and fio. Everything it creates is under --work
(default /var/tmp/iosched-mount-show) and is removed at the end, loop device included.

    cargo build --release -p iosched
    sudo python3 scripts/mount-show.py [--runtime 10] [--policies noop,deadline,bfq,latency]
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(*args, check=True, **kwargs):
    return subprocess.run(args, check=check, text=True, capture_output=True, **kwargs)


class Setup:
    def __init__(self, work: Path, size_mib: int):
        self.work = work
        self.image = work / "disk.img"
        self.backing = work / "backing"
        self.mnt = work / "mnt"
        self.loop = None
        self.mounted = False
        work.mkdir(parents=True, exist_ok=True)
        self.backing.mkdir(exist_ok=True)
        self.mnt.mkdir(exist_ok=True)
        with open(self.image, "wb") as f:
            f.truncate(size_mib << 20)
        self.loop = run("losetup", "-f", "--show", "--direct-io=on", str(self.image)).stdout.strip()
        run("mkfs.ext4", "-q", "-F", self.loop)
        run("mount", self.loop, str(self.backing))
        self.mounted = True
        self.sched_file = Path("/sys/block") / Path(self.loop).name / "queue/scheduler"
        print(f"# {self.loop} (direct-io) over {self.image}, ext4 on {self.backing}", flush=True)

    def scheduler(self, name: str):
        self.sched_file.write_text(name)

    def close(self):
        if self.mounted and run("umount", str(self.backing), check=False).returncode != 0:
            # Never remove what a still-mounted file system holds.
            print(f"mount-show: cannot unmount {self.backing}: left in place", file=sys.stderr)
            return
        if self.loop:
            run("losetup", "-d", self.loop, check=False)
        shutil.rmtree(self.work, ignore_errors=True)


class Mount:
    """`iosched mount` in the foreground; SIGTERM unmounts it."""

    def __init__(self, iosched: str, setup: Setup, policy: str, extra=()):
        self.process = subprocess.Popen(
            [iosched, "mount", str(setup.backing), str(setup.mnt), "--policy", policy, *extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        stats = setup.mnt / ".iosched/stats"
        for _ in range(200):
            if stats.exists():
                break
            if self.process.poll() is not None:
                raise RuntimeError(self.process.stderr.read())
            time.sleep(0.05)
        else:
            raise RuntimeError("the mount did not come up")
        self.setup = setup

    def stats(self):
        return json.loads((self.setup.mnt / ".iosched/stats.json").read_text())

    def close(self):
        self.process.send_signal(signal.SIGTERM)
        _, err = self.process.communicate(timeout=60)
        if self.process.returncode != 0:
            raise RuntimeError(f"iosched mount exited {self.process.returncode}: {err}")


def fio(job: Path, directory: Path, runtime: int):
    env = dict(os.environ, DIR=str(directory), RUNTIME=str(runtime))
    out = run("fio", str(job), "--output-format=json", env=env).stdout
    return json.loads(out[out.index("{"):])


def isolation_row(result, label):
    rt = next(j for j in result["jobs"] if j["jobname"] == "rt-reader")["read"]
    idle = sum(j["read"]["bw_bytes"] for j in result["jobs"] if j["jobname"] == "idle-seq")
    pct = rt["clat_ns"]["percentile"]
    return (
        f"| {label} | {rt['iops']:.0f} | {rt['clat_ns']['mean'] / 1e3:.0f} "
        f"| {pct['99.000000'] / 1e3:.0f} | {idle / 2**20:.1f} |"
    )


def drop_caches():
    Path("/proc/sys/vm/drop_caches").write_text("3")


def weighted_cgroups():
    """(root, weight file) where two cgroups with io weights can be made, or None."""
    mounts = Path("/proc/self/mounts").read_text().splitlines()
    v2 = next((m.split()[1] for m in mounts if m.split()[2] == "cgroup2"), None)
    if v2 and "io" in Path(v2, "cgroup.controllers").read_text().split():
        Path(v2, "cgroup.subtree_control").write_text("+io")
        return Path(v2), "io.weight"
    blkio = next(
        (m.split()[1] for m in mounts if m.split()[2] == "cgroup" and "blkio" in m.split()[3].split(",")),
        None,
    )
    return (Path(blkio), "blkio.bfq.weight") if blkio else None


READERS = {
    # dd: one 1 MiB request at a time (its queue empties between requests).
    "dd": "while :; do dd if={file} of=/dev/null bs=1M iflag=direct; done",
    # fio: the same requests, 64 in flight, twice the mount's device depth (its queue never
    # empties).
    "fio-qd64": "exec fio --name=r --filename={file} --rw=read --bs=1M --ioengine=libaio "
    "--iodepth=64 --direct=1 --time_based --runtime=3600 --output=/dev/null",
}


def cgroup_shares(directory: Path, seconds: int, groups, sample, reader):
    """Starts a reader per group on DIRECTORY/<name>; the bytes per group over `seconds`."""
    procs = []
    for (path, name) in groups:
        script = f"echo $$ > {path}/cgroup.procs; " + READERS[reader].format(file=directory / name)
        procs.append(subprocess.Popen(["sh", "-c", script], stderr=subprocess.DEVNULL, start_new_session=True))
    time.sleep(2)
    before = sample()
    time.sleep(seconds)
    after = sample()
    # Every process in the groups (fio's job processes start sessions of their own).
    for path, _ in groups:
        empty_cgroup(path)
    for p in procs:
        p.wait()
    return [a - b for a, b in zip(after, before)]


def empty_cgroup(path: Path):
    """Kills every process in cgroup PATH until none is left."""
    for _ in range(400):
        pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def kernel_bytes(groups):
    """Bytes the kernel's bfq served each group (blkio.bfq.io_service_bytes, or io.stat)."""

    def sample():
        out = []
        for path, _ in groups:
            total = 0
            f = path / "blkio.bfq.io_service_bytes"
            if not f.exists():
                f = path / "io.stat"
            for line in f.read_text().splitlines():
                parts = line.split()
                if len(parts) == 3 and parts[1] == "Read":
                    total += int(parts[2])
                for p in parts:
                    if p.startswith("rbytes="):
                        total += int(p[7:])
            out.append(total)
        return out

    return sample


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iosched", default=str(ROOT / "target/release/iosched"))
    parser.add_argument("--work", default="/var/tmp/iosched-mount-show")
    parser.add_argument("--runtime", type=int, default=10)
    parser.add_argument("--policies", default="noop,deadline,anticipatory,cfq,bfq,latency")
    parser.add_argument("--kernel", default="none,mq-deadline,bfq,kyber")
    parser.add_argument("--size-mib", type=int, default=5120)
    parser.add_argument("--only", default="isolation,cgroups,overhead", help="sections to run")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("mount-show: needs root (losetup, mount, FUSE)")
    setup = Setup(Path(args.work), args.size_mib)
    try:
        # Lay out the files once, directly (fio would lay them out on its first run).
        for job in ["rt-vs-idle.fio", "overhead.fio"]:
            env = dict(os.environ, DIR=str(setup.backing), RUNTIME="1")
            run("fio", str(ROOT / "examples/mount" / job), "--create_only=1", env=env)

        sections = args.only.split(",")
        if "isolation" in sections:
            isolation(args, setup)
        if "cgroups" in sections:
            cgroups(args, setup)
        if "overhead" in sections:
            overhead(args, setup)
    finally:
        setup.close()


def isolation(args, setup):
    print("\n## Isolation: RT 4K random reader (depth 1) beside 8 idle sequential readers\n")
    print(f"{args.runtime} s each; the RT reader's IOPS, mean and p99 completion latency (us), the idle readers' total MiB/s.\n")
    print("| setup | RT IOPS | mean | p99 | idle MiB/s |\n|---|---|---|---|---|")
    job = ROOT / "examples/mount/rt-vs-idle.fio"
    for policy in args.policies.split(","):
        setup.scheduler("none")
        drop_caches()
        mount = Mount(args.iosched, setup, policy)
        try:
            result = fio(job, setup.mnt, args.runtime)
        finally:
            mount.close()
        print(isolation_row(result, f"iosched mount --policy {policy} (loop: none)"), flush=True)
    for sched in args.kernel.split(","):
        setup.scheduler(sched)
        drop_caches()
        result = fio(job, setup.backing, args.runtime)
        print(isolation_row(result, f"kernel {sched}, no mount"), flush=True)


def cgroups(args, setup):
    found = weighted_cgroups()
    print("\n## cgroups: io.weight 100 and 300, a sequential reader in each\n")
    if not found:
        print("(no cgroup hierarchy with io weights here: skipped)")
        return
    root, weight_file = found
    groups = []
    try:
        for name, weight in [("a", 100), ("b", 300)]:
            path = root / f"iosched-show-{name}"
            path.mkdir(exist_ok=True)
            groups.append((path, name))
            (path / weight_file).write_text(str(weight))
            # Written out (holes would be read without touching the device), 1 GiB each.
            run("dd", "if=/dev/zero", f"of={setup.backing / name}", "bs=1M", "count=1024", "oflag=direct")
        print(f"{args.runtime} s each; MiB/s read by each group's reader.\n")
        print("| setup | reader | weight 100 MiB/s | weight 300 MiB/s | ratio |\n|---|---|---|---|---|")
        for reader in READERS:
            setup.scheduler("none")
            mount = Mount(args.iosched, setup, "bfq")

            def sample():
                flows = mount.stats()["flows"]
                return [
                    sum(f["read"]["bytes"] for f in flows if f["cgroup"].endswith(f"iosched-show-{n}"))
                    for _, n in groups
                ]

            try:
                a, b = cgroup_shares(setup.mnt, args.runtime, groups, sample, reader)
            finally:
                mount.close()
            print(
                f"| iosched mount --policy bfq | {reader} | {a / args.runtime / 2**20:.1f} "
                f"| {b / args.runtime / 2**20:.1f} | {b / max(a, 1):.2f} |",
                flush=True,
            )
            setup.scheduler("bfq")
            a, b = cgroup_shares(setup.backing, args.runtime, groups, kernel_bytes(groups), reader)
            print(
                f"| kernel bfq, no mount | {reader} | {a / args.runtime / 2**20:.1f} "
                f"| {b / args.runtime / 2**20:.1f} | {b / max(a, 1):.2f} |",
                flush=True,
            )
    finally:
        for path, _ in groups:
            try:
                path.rmdir()
            except OSError:
                pass


def overhead(args, setup):
    print("\n## Overhead: one reader at a time, through the mount (noop) and directly (none)\n")
    print("| reader | direct IOPS | mount IOPS | mount/direct | direct mean us | mount mean us |\n|---|---|---|---|---|---|")
    job = ROOT / "examples/mount/overhead.fio"
    setup.scheduler("none")
    # Twice, alternating, the first round only warming what lies below the loop device (its
    # image file is read with O_DIRECT from a virtual disk whose host may cache it): the
    # figures are the second round's.
    for _ in range(2):
        drop_caches()
        direct = fio(job, setup.backing, args.runtime)
        mount = Mount(args.iosched, setup, "noop")
        try:
            through = fio(job, setup.mnt, args.runtime)
        finally:
            mount.close()
    for name in ["rand4k", "seq128k"]:
        d = next(j for j in direct["jobs"] if j["jobname"] == name)["read"]
        m = next(j for j in through["jobs"] if j["jobname"] == name)["read"]
        print(
            f"| {name} | {d['iops']:.0f} | {m['iops']:.0f} | {m['iops'] / d['iops']:.2f} "
            f"| {d['clat_ns']['mean'] / 1e3:.0f} | {m['clat_ns']['mean'] / 1e3:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
