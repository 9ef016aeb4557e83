#!/bin/sh
# Measures Ceph's dmclock queue on this machine, now, on the workloads of iosched's fq and mclock
# benches, so that `cargo bench -p iosched-core --bench fq` (and `--bench mclock`) can be judged
# against it as a ratio measured in one session.
#
#   scripts/dmclock-bench/run.sh DMCLOCK_CHECKOUT [REQUESTS [RUNS]]
#
# Its table, saved to a file, is what the benches' summaries take as their reference:
#
#   taskset -c 1 scripts/dmclock-bench/run.sh ../dmclock > /tmp/dmclock.txt
#   DMCLOCK_FIGURES=/tmp/dmclock.txt taskset -c 1 cargo bench -p iosched-core --bench fq
#
# With DMCLOCK_ONLY=CLIENTS (and DMCLOCK_DEPTH=2 for backlogged, 1 for churn) the bench runs
# that one case and prints nothing; under `valgrind --tool=cachegrind` the difference of two
# request counts gives dmclock's instructions per request, to set beside the fq bench's
# (`FQ_BENCH_ONLY=flat/backlogged/10`): a count that does not move with the machine's load.
#
# DMCLOCK_CHECKOUT is a checkout of https://github.com/ceph/dmclock (its src/ and support/src/
# are compiled in; nothing of it is kept here). Needs g++ and boost's headers
# (apt-get install g++ libboost-dev).
set -eu
if [ $# -lt 1 ] || [ ! -f "$1/src/dmclock_server.h" ]; then
    echo "usage: $0 DMCLOCK_CHECKOUT [REQUESTS [RUNS]] (a checkout of github.com/ceph/dmclock)" >&2
    exit 2
fi
src="$1"
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
g++ -O2 -DNDEBUG -std=c++17 -pthread \
    -I"$src/src" -I"$src/support/src" \
    "$here/bench.cc" "$src/src/dmclock_util.cc" "$src/support/src/run_every.cc" \
    -o "$out/dmclock-bench"
"$out/dmclock-bench" "${2:-2000000}" "${3:-5}"
