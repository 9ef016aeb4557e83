#!/bin/sh
# A flame graph of one iosched command: builds iosched with frame pointers (in its own target
# directory, so the normal build is untouched), records it with perf and draws it with
# inferno (`cargo install inferno`).
#
#   scripts/flamegraph.sh bench-noop-1024.svg bench --policy noop --jobs 1024 --requests 1000000 --repeat 1
#   scripts/flamegraph.sh real-bfq.svg run --engine real --policy bfq job.fio --output /dev/null -q
set -eu
if [ $# -lt 2 ]; then
    echo "usage: $0 OUT.svg IOSCHED-ARGS..." >&2
    exit 2
fi
out=$1
shift
for tool in perf inferno-collapse-perf inferno-flamegraph; do
    command -v "$tool" >/dev/null || { echo "$0: $tool not found (perf: apt-get install linux-perf; inferno: cargo install inferno)" >&2; exit 1; }
done
root=$(cd "$(dirname "$0")/.." && pwd)
target=${FLAMEGRAPH_TARGET_DIR:-$root/target/frame-pointers}
RUSTFLAGS="-C force-frame-pointers=yes" CARGO_TARGET_DIR=$target \
    cargo build --release -q -p iosched --manifest-path "$root/Cargo.toml"
data=$(mktemp /tmp/iosched-perf.XXXXXX)
trap 'rm -f "$data"' EXIT
perf record -F 999 -g -o "$data" -- "$target/release/iosched" "$@" >/dev/null
perf script -i "$data" | inferno-collapse-perf | inferno-flamegraph --title "iosched $*" > "$out"
echo "$out"
