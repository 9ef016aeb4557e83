#!/bin/sh
# A flame graph of one iosched command: builds iosched with frame pointers (in its own target
# directory, so the normal build is untouched), records it with perf and draws it with
# inferno (`cargo install inferno`).
#
#   scripts/flamegraph.sh bench-noop-1024.svg bench --policy noop --jobs 1024 --requests 1000000 --repeat 1
#   scripts/flamegraph.sh real-bfq.svg run --engine real --policy bfq job.fio --output /dev/null -q
#
# perf samples its default event: cycles where the machine has hardware counters, else the
# software clock (cpu-clock), to which it falls back by itself (virtual machines often have no
# counters; `perf stat` is then refused, sampling is not). Writes OUT.svg and nothing else;
# with FOLDED=FILE also the collapsed stacks (one stack per line with its samples:
# `inferno-diff-folded A B` compares two runs).
set -eu
if [ $# -lt 2 ]; then
    echo "usage: $0 OUT.svg IOSCHED-ARGS..." >&2
    exit 2
fi
out=$1
shift
case $out in
*.svg) ;;
*)
    echo "$0: $out: the flame graph's name must end in .svg" >&2
    exit 2
    ;;
esac
if [ -e "$out" ] && [ ! -f "$out" ]; then
    echo "$0: $out exists and is not a regular file: not replaced" >&2
    exit 2
fi
for tool in perf inferno-collapse-perf inferno-flamegraph; do
    command -v "$tool" >/dev/null || { echo "$0: $tool not found (perf: apt-get install linux-perf; inferno: cargo install inferno)" >&2; exit 1; }
done
root=$(cd "$(dirname "$0")/.." && pwd)
target=${FLAMEGRAPH_TARGET_DIR:-$root/target/frame-pointers}
RUSTFLAGS="-C force-frame-pointers=yes" CARGO_TARGET_DIR=$target \
    cargo build --release -q -p iosched --manifest-path "$root/Cargo.toml"
work=$(mktemp -d /tmp/iosched-perf.XXXXXX)
trap 'rm -rf "$work"' EXIT
perf record -q -F 999 -g -o "$work/perf.data" -- "$target/release/iosched" "$@" >/dev/null
perf script -i "$work/perf.data" 2>/dev/null | inferno-collapse-perf >"$work/folded"
inferno-flamegraph --title "iosched $*" <"$work/folded" >"$work/out.svg"
mv "$work/out.svg" "$out"
if [ -n "${FOLDED:-}" ]; then
    cp "$work/folded" "$FOLDED"
fi
echo "$out"
