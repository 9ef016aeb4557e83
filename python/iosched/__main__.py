"""``python -m iosched sweep GRID.toml [--engine local|ray] ...``: the sweep command of the
Python package, which ``iosched sweep --engine ray`` runs. Writes what ``iosched sweep``
writes: the table (CSV, or Parquet for a ``.parquet`` output) and the summary."""

import argparse
import sys

import iosched


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m iosched")
    commands = parser.add_subparsers(dest="command", required=True)
    sweep = commands.add_parser("sweep", help="run every point of a grid")
    sweep.add_argument("grid", help="the grid (TOML)")
    sweep.add_argument("--engine", choices=["local", "ray"], default="local")
    sweep.add_argument("--workers", type=int, default=None, help="local workers (default: every core)")
    sweep.add_argument("--address", default=None, help="the Ray cluster to join (default: start one)")
    sweep.add_argument("--retries", type=int, default=2, help="retries of a failed Ray task")
    sweep.add_argument("--output", default=None, help="the table: FILE.csv or FILE.parquet")
    sweep.add_argument("--summary", default=None, help="the summary (Markdown)")
    sweep.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    try:
        grid = iosched.Grid.read(args.grid)
        print(
            f"iosched: sweep {args.grid}: {len(grid)} points on the {args.engine} engine",
            file=sys.stderr,
        )
        done = iosched.sweep(
            grid,
            engine=args.engine,
            workers=args.workers,
            progress=not args.quiet,
            retries=args.retries,
            address=args.address,
        )
        if args.output:
            done.write(args.output)
            print(f"iosched: wrote {args.output}", file=sys.stderr)
        else:
            sys.stdout.write(done.csv())
        if args.summary:
            iosched.write_output(args.summary, done.summary)
            print(f"iosched: wrote {args.summary}", file=sys.stderr)
        elif args.output:
            sys.stdout.write(done.summary)
        else:
            sys.stderr.write(done.summary)
    except iosched.IoschedError as error:
        print(f"iosched: error: {error}", file=sys.stderr)
        return 1
    if done.failed:
        print(
            f"iosched: error: {len(done.failed)} of {len(grid)} points failed (the summary lists "
            "them, the table's error column says why)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
