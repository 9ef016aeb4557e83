#!/usr/bin/env bash
# Renders an iosched HTML report in headless Chromium as a person would see it, and fails
# (exit 1, with the reason) unless the page drew its charts without errors.
#
#   scripts/check-report.sh REPORT.html OUT.png
#
# How failure is detected:
# 1. Chromium loads the page and prints the DOM after the load event (--dump-dom). The page's
#    own self-check script has by then measured every chart (an <svg> with a real size, each
#    series group with marks inside the chart, no overlapping labels) and caught any script
#    error, and written "ok: N charts" or "fail: reasons" into <html data-report-check>. No
#    attribute at all (the script never ran) is a failure too.
# 2. Chromium takes a screenshot of the whole page (its height comes from the same check), and
#    the PNG is decoded with Python's standard library: a page that painted nothing but
#    background has a handful of distinct pixel rows, a report has thousands.
#
# Needs chromium (Debian's package; set CHROMIUM to use another binary) and python3.
# Exit codes: 0 the page is fine, 1 it is not, 2 the check could not run.
set -euo pipefail

if [ $# -ne 2 ]; then
    echo "usage: $0 REPORT.html OUT.png" >&2
    exit 2
fi
report=$1
png=$2
chromium=${CHROMIUM:-/usr/bin/chromium}
if [ ! -f "$report" ]; then
    echo "check-report: no such file: $report" >&2
    exit 2
fi
if [ ! -x "$chromium" ]; then
    echo "check-report: chromium is missing ($chromium); install it with: apt-get install -y chromium" >&2
    exit 2
fi
if ! command -v python3 >/dev/null 2>&1; then
    echo "check-report: python3 is missing" >&2
    exit 2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
url="file://$(cd "$(dirname "$report")" && pwd)/$(basename "$report")"
width=1280

# Flags that work as root in a container without a GPU or network; a fresh profile each time.
run_chromium() {
    local profile
    profile=$(mktemp -d "$work/profile.XXXXXX")
    timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --disable-dev-shm-usage --hide-scrollbars --force-device-scale-factor=1 \
        --user-data-dir="$profile" "$@"
}

# 1. The page's own verdict.
if ! run_chromium --window-size="$width,1000" --dump-dom "$url" >"$work/dom.html" 2>"$work/dom.log"; then
    echo "check-report: chromium failed to load $report:" >&2
    tail -n 20 "$work/dom.log" >&2
    exit 1
fi
height=$(python3 - "$work/dom.html" <<'PY'
import html, re, sys
dom = open(sys.argv[1], encoding="utf-8", errors="replace").read()
match = re.search(r'<html[^>]*\sdata-report-check="([^"]*)"', dom)
if match is None:
    print("check-report: the page reported no check result (its self-check script did not run, "
          "or this is not an iosched report)", file=sys.stderr)
    sys.exit(1)
verdict = html.unescape(match.group(1))
if not verdict.startswith("ok"):
    print("check-report: the page failed its self-check: " + verdict, file=sys.stderr)
    sys.exit(1)
print("check-report: page " + verdict, file=sys.stderr)
height = re.search(r'<html[^>]*\sdata-page-height="(\d+)"', dom)
print(height.group(1) if height else "3000")
PY
)
# Chromium cannot paint arbitrarily tall windows; very long pages are cut at this height.
height_max=16000
if [ "$height" -gt "$height_max" ]; then
    echo "check-report: page is $height px tall; the screenshot shows the first $height_max" >&2
    height=$height_max
fi

# 2. The picture.
rm -f "$png"
if ! run_chromium --window-size="$width,$height" --screenshot="$png" "$url" >"$work/shot.log" 2>&1; then
    echo "check-report: chromium failed to take a screenshot:" >&2
    tail -n 20 "$work/shot.log" >&2
    exit 1
fi
python3 - "$png" <<'PY'
import struct, sys, zlib
path = sys.argv[1]
try:
    data = open(path, "rb").read()
except OSError as error:
    print(f"check-report: no screenshot: {error}", file=sys.stderr)
    sys.exit(1)
if data[:8] != b"\x89PNG\r\n\x1a\n":
    print(f"check-report: {path} is not a PNG", file=sys.stderr)
    sys.exit(1)
position, idat, header = 8, [], None
while position + 8 <= len(data):
    length, kind = struct.unpack(">I4s", data[position:position + 8])
    body = data[position + 8:position + 8 + length]
    if kind == b"IHDR":
        header = struct.unpack(">IIBBBBB", body)
    elif kind == b"IDAT":
        idat.append(body)
    position += 12 + length
if header is None or not idat:
    print(f"check-report: {path} has no image data", file=sys.stderr)
    sys.exit(1)
width, height, depth, color, _, _, interlace = header
channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}.get(color)
if depth != 8 or channels is None or interlace != 0:
    print(f"check-report: unexpected PNG format (depth {depth}, colour type {color}, interlace {interlace})", file=sys.stderr)
    sys.exit(1)
pixels = zlib.decompress(b"".join(idat))
stride = 1 + width * channels
if len(pixels) != stride * height:
    print(f"check-report: {path} is truncated", file=sys.stderr)
    sys.exit(1)
# A row of one colour filters to the same bytes whatever its neighbours, so a blank page has at
# most a few distinct filtered rows (one per filter type); every row crossing text or a chart
# differs from the others.
rows = {pixels[i:i + stride] for i in range(0, len(pixels), stride)}
needed = max(100, height // 10)
if len(rows) < needed:
    print(f"check-report: the screenshot looks blank: {len(rows)} distinct pixel rows of {height} "
          f"(at least {needed} expected)", file=sys.stderr)
    sys.exit(1)
print(f"check-report: screenshot {width}x{height}, {len(rows)} distinct pixel rows", file=sys.stderr)
PY
echo "check-report: ok: $png" >&2
