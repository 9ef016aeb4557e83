#!/usr/bin/env python3
"""Writes oltp.csv, a synthetic OLTP-like block trace in MSR Cambridge format, deterministically.

Three flows on one disk (MSR names a flow by host and disk number):
  db_0    random reads of 4 or 8 KiB over the first 64 GiB, Poisson arrivals at 60 a second
  log_0   a log writer appending 4 to 16 KiB writes at 1 GiB past 64 GiB, 25 a second
  scan_0  a table scan: 128 KiB sequential reads from 100 GiB, in bursts of 3 s every 10 s
          at 80 a second

Times are Windows filetime ticks (100 ns) from 2007-08-22 as in the MSR traces; the
ResponseTime column is 0 (the trace was never run). The generator is splitmix64 with a fixed
seed, so the file is the same on every machine and Python version:

    python3 make_trace.py [--seconds 30] [--out oltp.csv]
"""

import argparse
import math

MASK = (1 << 64) - 1
BASE_TICKS = 128_166_372_000_000_000  # 2007-08-22, as in the MSR Cambridge traces
GIB = 1 << 30
KIB = 1 << 10


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def uniform(self):
        """In (0, 1]."""
        return ((self.next() >> 11) + 1) / float(1 << 53)

    def below(self, n):
        return self.next() % n

    def exponential(self, rate):
        return -math.log(self.uniform()) / rate


def db(rng, seconds):
    t = 0.0
    while True:
        t += rng.exponential(60.0)
        if t >= seconds:
            return
        size = 8 * KIB if rng.below(2) else 4 * KIB
        offset = rng.below(64 * GIB // size) * size
        yield t, "db", "Read", offset, size


def log(rng, seconds):
    t = 0.0
    offset = 65 * GIB
    while True:
        t += 1.0 / 25 * (0.5 + rng.uniform())
        if t >= seconds:
            return
        size = (1 + rng.below(4)) * 4 * KIB
        yield t, "log", "Write", offset, size
        offset += size


def scan(rng, seconds):
    offset = 100 * GIB
    burst = 0.0
    while burst < seconds:
        t = burst
        while t < burst + 3.0 and t < seconds:
            yield t, "scan", "Read", offset, 128 * KIB
            offset += 128 * KIB
            t += 1.0 / 80
        burst += 10.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--out", default="oltp.csv")
    args = parser.parse_args()
    records = []
    for index, flow in enumerate((db, log, scan)):
        rng = SplitMix64(0x1057_0000 + index)
        records.extend(flow(rng, args.seconds))
    records.sort(key=lambda r: (r[0], r[1]))
    with open(args.out, "w", newline="\n") as out:
        for t, host, kind, offset, size in records:
            ticks = BASE_TICKS + int(round(t * 1e7))
            out.write(f"{ticks},{host},0,{kind},{offset},{size},0\n")


if __name__ == "__main__":
    main()
