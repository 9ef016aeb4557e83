#!/usr/bin/env python3
"""Runs a grid on the local engine with 1 and 2 workers and on Ray, checks that the three
tables are identical, and prints points per second and Ray's overhead per point.

    python scripts/sweep-engines.py [GRID.toml]      (default: examples/sweep/deadline.toml)

Needs the Python package (pip install .) and ray. Ray starts locally with as many CPUs as the
machine has, or joins the cluster in RAY_ADDRESS.
"""

import os
import sys
import time

import iosched
import ray


def main() -> int:
    grid = iosched.Grid.read(sys.argv[1] if len(sys.argv) > 1 else "examples/sweep/deadline.toml")
    print(f"grid {grid.title!r}: {len(grid)} points")
    runs = {}
    for workers in (1, 2):
        done = iosched.sweep(grid, workers=workers, progress=False)
        runs[f"local, {workers} worker(s)"] = done
    started = time.monotonic()
    ray.init(address=os.environ.get("RAY_ADDRESS"), include_dashboard=False, log_to_driver=False)
    startup = time.monotonic() - started
    cpus = int(ray.cluster_resources().get("CPU", 0))
    runs[f"ray, {cpus} CPU(s)"] = iosched.sweep(grid, engine="ray", progress=False)
    ray.shutdown()
    reference = next(iter(runs.values())).csv()
    for name, done in runs.items():
        same = "identical" if done.csv() == reference else "DIFFERENT"
        print(
            f"{name:<22} {done.wall_seconds:8.2f} s  {len(grid) / done.wall_seconds:8.1f} points/s  "
            f"table {same}"
        )
    local = runs["local, 2 worker(s)"].wall_seconds
    remote = runs[f"ray, {cpus} CPU(s)"].wall_seconds
    print(
        f"ray startup {startup:.2f} s (not counted above); overhead per point over the local "
        f"engine with as many workers: {(remote - local) / len(grid) * 1e3:.2f} ms"
    )
    return 0 if all(done.csv() == reference for done in runs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
