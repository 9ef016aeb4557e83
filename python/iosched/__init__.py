"""iosched: I/O scheduling with quality of service, from Python.

The same simulator, policies and device models as the ``iosched`` command (the native module is
the Rust code itself, through PyO3): run a fio job file under a policy and get fio's JSON as a
dict and as pandas frames, list the policies, devices and experiments, run an experiment and
read its verdicts, and sweep a grid of configurations locally or on a Ray cluster.

>>> import iosched
>>> result = iosched.run("examples/isolation.fio", policy="bfq")
>>> result.jobs[["job", "dir", "iops", "clat_mean_ns"]]          # doctest: +SKIP
>>> table = iosched.sweep("examples/sweep/small.toml").table      # doctest: +SKIP

Every error is an :class:`IoschedError` carrying the message the command would print, with the
file and line of what was wrong.
"""

from __future__ import annotations

import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from . import _native
from ._native import IoschedError

__all__ = [
    "IoschedError",
    "Result",
    "Sweep",
    "Grid",
    "run",
    "policies",
    "devices",
    "experiments",
    "experiment",
    "sweep",
    "write_output",
    "__version__",
]

__version__: str = _native.__version__

PathLike = Union[str, "os.PathLike[str]"]

#: The directions fio reports, in its order.
DIRECTIONS = ("read", "write", "trim")


def _pairs(settings: Optional[Mapping[str, Any]], what: str) -> List[tuple]:
    if settings is None:
        return []
    if not isinstance(settings, Mapping):
        raise TypeError(f"{what} must be a mapping of NAME to VALUE, not {type(settings).__name__}")
    return [(str(name), _value(value)) for name, value in settings.items()]


def _value(value: Any) -> str:
    if isinstance(value, bool):
        raise TypeError(f"{value!r}: write flags as the setting takes them (\"1\", \"on\")")
    return str(value)


def _groups(groups: Optional[Union[Mapping[str, Any], Sequence[str]]]) -> List[str]:
    """``{"/db:io.weight": 500}`` or ``["/db:io.weight=500"]`` as PATH:FILE=VALUE texts."""
    if groups is None:
        return []
    if isinstance(groups, Mapping):
        return [f"{key}={_value(value)}" for key, value in groups.items()]
    if isinstance(groups, str):
        return [groups]
    return [str(text) for text in groups]


class Result:
    """One simulated run: fio's JSON (:attr:`json`) and frames drawn from it."""

    def __init__(self, data: Dict[str, Any]):
        #: fio's JSON output, as ``--output-format=json`` writes it.
        self.json: Dict[str, Any] = data["fio"]
        #: The seed that replays the run exactly.
        self.seed: int = data["seed"]
        self._series: List[Dict[str, Any]] = data["series"]

    def __repr__(self) -> str:
        names = sorted({job["jobname"] for job in self.json.get("jobs", [])})
        return f"<iosched.Result seed={self.seed} jobs={names}>"

    @property
    def jobs(self):
        """One row per job and direction with I/O: job, jobnum, dir, I/Os, bytes, IOPS,
        bandwidth, runtime, and completion/total latency statistics (ns)."""
        import pandas as pd

        rows = []
        for number, job in enumerate(self.json.get("jobs", [])):
            for direction in DIRECTIONS:
                stats = job.get(direction)
                if not stats or not stats.get("total_ios"):
                    continue
                clat = stats.get("clat_ns", {})
                lat = stats.get("lat_ns", {})
                rows.append(
                    {
                        "job": job["jobname"],
                        "jobnum": number,
                        "dir": direction,
                        "ios": stats["total_ios"],
                        "io_bytes": stats["io_bytes"],
                        "iops": stats["iops"],
                        "bw_bytes": stats["bw_bytes"],
                        "runtime_ms": stats["runtime"],
                        "clat_min_ns": clat.get("min"),
                        "clat_mean_ns": clat.get("mean"),
                        "clat_stddev_ns": clat.get("stddev"),
                        "clat_max_ns": clat.get("max"),
                        "lat_mean_ns": lat.get("mean"),
                        "lat_max_ns": lat.get("max"),
                    }
                )
        return pd.DataFrame(rows, columns=_JOB_COLUMNS)

    @property
    def latency_percentiles(self):
        """One row per job, direction and percentile of the completion latency (fio's
        ``clat_ns.percentile``): job, jobnum, dir, percentile, clat_ns."""
        import pandas as pd

        rows = []
        for number, job in enumerate(self.json.get("jobs", [])):
            for direction in DIRECTIONS:
                stats = job.get(direction) or {}
                for percentile, nanos in (stats.get("clat_ns", {}).get("percentile") or {}).items():
                    rows.append(
                        {
                            "job": job["jobname"],
                            "jobnum": number,
                            "dir": direction,
                            "percentile": float(percentile),
                            "clat_ns": nanos,
                        }
                    )
        return pd.DataFrame(rows, columns=["job", "jobnum", "dir", "percentile", "clat_ns"])

    @property
    def series(self):
        """Bandwidth, IOPS and completion latency over time, per job and direction: job,
        jobnum, dir, time_s (the window's start), window_s, bw_bytes, iops, clat_mean_ns and
        clat_max_ns (of the I/Os completed in the window; NaN when none did). Windows are fio's
        500 ms, doubled as needed to keep at most 1024 per run."""
        import pandas as pd

        rows = []
        for entry in self._series:
            window = entry["window_ns"] / 1e9
            columns = zip(entry["bw_bytes"], entry["iops"], entry["clat_mean_ns"], entry["clat_max_ns"])
            for slot, (bandwidth, iops, clat_mean, clat_max) in enumerate(columns):
                rows.append(
                    {
                        "job": entry["job"],
                        "jobnum": entry["index"],
                        "dir": entry["dir"],
                        "time_s": slot * window,
                        "window_s": window,
                        "bw_bytes": bandwidth,
                        "iops": iops,
                        "clat_mean_ns": clat_mean,
                        "clat_max_ns": clat_max,
                    }
                )
        return pd.DataFrame(rows, columns=_SERIES_COLUMNS)


_SERIES_COLUMNS = [
    "job",
    "jobnum",
    "dir",
    "time_s",
    "window_s",
    "bw_bytes",
    "iops",
    "clat_mean_ns",
    "clat_max_ns",
]

_JOB_COLUMNS = [
    "job",
    "jobnum",
    "dir",
    "ios",
    "io_bytes",
    "iops",
    "bw_bytes",
    "runtime_ms",
    "clat_min_ns",
    "clat_mean_ns",
    "clat_stddev_ns",
    "clat_max_ns",
    "lat_mean_ns",
    "lat_max_ns",
]


def run(
    jobfile: Optional[PathLike] = None,
    *,
    text: Optional[str] = None,
    policy: str = "deadline",
    device: str = "hdd",
    seed: int = 1,
    set: Optional[Mapping[str, Any]] = None,
    device_set: Optional[Mapping[str, Any]] = None,
    groups: Optional[Union[Mapping[str, Any], Sequence[str]]] = None,
    env: Optional[Mapping[str, Any]] = None,
) -> Result:
    """Runs a fio job file (or job ``text``) in the simulator under ``policy``.

    ``set`` holds queue and policy tunables (``--set``), ``device_set`` device parameters
    (``--device-set``), ``groups`` cgroup files (``{"/db:io.weight": 500}``, ``--group``), and
    ``env`` the job file's ``${VAR}`` variables (before the process environment).
    """
    if (jobfile is None) == (text is None):
        raise TypeError("give a job file path or text=, one of the two")
    if jobfile is not None:
        path = Path(jobfile)
        try:
            job_text = path.read_text()
        except OSError as error:
            raise IoschedError(f"cannot read job file {str(path)!r}: {error.strerror}") from None
        origin, base_dir = str(path), str(path.parent)
    else:
        job_text, origin, base_dir = text, "<text>", os.getcwd()
    data = _native.run(
        job_text,
        origin,
        base_dir,
        policy,
        device,
        int(seed),
        _pairs(set, "set"),
        _pairs(device_set, "device_set"),
        _groups(groups),
        {name: value for name, value in _pairs(env, "env")},
    )
    return Result(json.loads(data))


def policies() -> List[Dict[str, Any]]:
    """Every policy: name, aliases, summary and tunables (name, default, unit, min, max, doc).
    The queue's own tunables and the stages are in :func:`policy_catalog`."""
    return json.loads(_native.policy_catalog())["policies"]


def policy_catalog() -> Dict[str, Any]:
    """The whole catalog: ``queue`` tunables, ``stages`` and ``policies``."""
    return json.loads(_native.policy_catalog())


def devices() -> List[Dict[str, Any]]:
    """Every device model: name, summary and parameters (name, value, unit, note)."""
    return json.loads(_native.device_catalog())


def _experiments_root(root: Optional[PathLike]) -> str:
    if root is not None:
        return str(root)
    return os.environ.get("IOSCHED_EXPERIMENTS", "experiments")


def experiments(root: Optional[PathLike] = None) -> List[Dict[str, Any]]:
    """The experiments under ``root`` (default: ``$IOSCHED_EXPERIMENTS`` or ``./experiments``):
    name, title, source, claim and runs."""
    return json.loads(_native.experiment_catalog(_experiments_root(root)))


class ExperimentResult:
    """An experiment's results, as ``iosched experiment run`` writes them."""

    def __init__(self, data: Dict[str, Any]):
        #: The results JSON: the study (every run's fio JSON), the verdicts and ``pass``.
        self.json = data

    @property
    def passed(self) -> bool:
        """Whether every claim held."""
        return bool(self.json.get("pass"))

    @property
    def verdicts(self) -> List[Dict[str, Any]]:
        """Each claim with its figure and whether it held."""
        study = self.json.get("study", self.json)
        return list(study.get("verdicts", []))

    def __repr__(self) -> str:
        return f"<iosched.ExperimentResult pass={self.passed} verdicts={len(self.verdicts)}>"


def experiment(
    name: str, *, quick: bool = False, seed: Optional[int] = None, root: Optional[PathLike] = None
) -> ExperimentResult:
    """Runs the experiment ``name`` (its quick variant with ``quick=True``) and checks its
    claims."""
    data = _native.run_experiment(_experiments_root(root), name, quick, seed)
    return ExperimentResult(json.loads(data))


class Grid:
    """A sweep's grid (see ``iosched sweep --help`` and the README's Sweeps section)."""

    def __init__(self, native: "_native.Grid"):
        self._native = native

    @classmethod
    def read(cls, path: PathLike) -> "Grid":
        """Reads a grid file (TOML); its workloads are read now, relative to its folder."""
        return cls(_native.Grid.read(str(path)))

    @classmethod
    def parse(cls, text: str, *, base_dir: PathLike = ".", origin: str = "<grid>") -> "Grid":
        """A grid written in the notebook (TOML text); its workloads are read now, relative to
        ``base_dir``. Errors name ``origin`` and the line."""
        return cls(_native.Grid.parse(text, origin, str(base_dir)))

    @property
    def title(self) -> str:
        return self._native.title

    def __len__(self) -> int:
        return len(self._native)

    def axes(self) -> List[tuple]:
        """(name, values) of each axis, outermost first."""
        return self._native.axes()

    def columns(self) -> List[str]:
        """The table's columns."""
        return self._native.columns()

    def points(self):
        """One row per point: its index and its value on each axis."""
        import pandas as pd

        names = [name for name, _ in self.axes()]
        return self._typed(
            pd.DataFrame(
                [[index, *self._native.point(index)] for index in range(len(self))],
                columns=["point", *names],
            )
        )

    def _typed(self, frame):
        """The axis columns whose every value is a number, as numbers (the grid writes them as
        text, as sysfs takes them)."""
        import pandas as pd

        for name, values in self.axes():
            try:
                numbers = [float(value) for value in values]
            except ValueError:
                continue
            whole = all(number.is_integer() for number in numbers) and all(
                "." not in value and "e" not in value.lower() for value in values
            )
            frame[name] = pd.to_numeric(frame[name]).astype("Int64" if whole else "float64")
        return frame


class Sweep:
    """A finished sweep: the tidy table, the summary, and how it ran."""

    def __init__(self, grid: Grid, results: List[str], wall: float, engine: str):
        self.grid = grid
        self._results = sorted(results, key=lambda r: json.loads(r)["point"]["index"])
        #: Wall seconds the points took.
        self.wall_seconds = wall
        #: ``local`` or ``ray``.
        self.engine = engine
        #: The summary (Markdown), as ``iosched sweep`` prints it.
        self.summary: str = grid._native.summary(self._results, wall)

    @property
    def table(self):
        """The tidy table: a row per point, job and direction (a failed point: one row with
        its error), columns as :meth:`Grid.columns`."""
        import pandas as pd

        rows = []
        for result in self._results:
            rows.extend(self.grid._native.rows(result))
        return self.grid._typed(pd.DataFrame(rows, columns=self.grid.columns()))

    @property
    def failed(self) -> List[int]:
        """The points that failed."""
        return [
            json.loads(r)["point"]["index"] for r in self._results if "Err" in json.loads(r)["outcome"]
        ]

    def csv(self) -> str:
        """The table as CSV, byte for byte what ``iosched sweep --output`` writes."""
        return self.grid._native.csv(self._results)

    def write(self, path: PathLike) -> None:
        """Writes the table: Parquet (pyarrow) for ``.parquet``, CSV otherwise, as the command
        writes its outputs (see :func:`write_output`)."""
        if Path(path).suffix == ".parquet":
            import io

            buffer = io.BytesIO()
            self.table.to_parquet(buffer, index=False)
            write_output(path, buffer.getvalue())
        else:
            write_output(path, self.csv().encode())

    def __repr__(self) -> str:
        return (
            f"<iosched.Sweep {self.grid.title!r}: {len(self._results)} points, "
            f"{len(self.failed)} failed, {self.wall_seconds:.1f} s on {self.engine}>"
        )


def write_output(path: PathLike, data: Union[bytes, str]) -> None:
    """Writes ``data`` to ``path`` as the ``iosched`` command writes its outputs: a regular file
    is replaced only when complete (a temporary file beside it, renamed), a device or FIFO is
    written in place (``/dev/null`` stays a device), a symbolic link is followed, a directory
    is refused; nothing else is created or removed."""
    if isinstance(data, str):
        data = data.encode()
    _native.write_output(str(path), data)


def _failure(grid: Grid, index: int, error: str) -> str:
    """A point result for a point whose task failed for good (its worker died, say)."""
    return json.dumps(
        {
            "point": {"index": index, "values": grid._native.point(index)},
            "outcome": {"Err": error},
        }
    )


class _Progress:
    """Points done of the total with an ETA: a tqdm bar when tqdm is installed, else a line on
    standard error every few seconds."""

    def __init__(self, total: int, shown: bool):
        self.total, self.done, self.started, self.shown = total, 0, time.monotonic(), shown
        self.last = 0.0
        self.bar = None
        if shown:
            try:
                from tqdm.auto import tqdm

                self.bar = tqdm(total=total, unit="point", desc="sweep")
            except ImportError:
                self.bar = None

    def step(self) -> None:
        self.done += 1
        if not self.shown:
            return
        if self.bar is not None:
            self.bar.update(1)
            return
        now = time.monotonic()
        if now - self.last >= 2.0 or self.done == self.total:
            self.last = now
            elapsed = now - self.started
            eta = elapsed / self.done * (self.total - self.done)
            print(f"iosched: {self.done}/{self.total} points, ETA {eta:.0f} s", file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _run_local(grid: Grid, workers: int, step: Callable[[], None]) -> List[str]:
    # Threads suffice: each point runs in Rust without the GIL, on its own core.
    results: List[str] = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(grid._native.run_point, index) for index in range(len(grid))]
        for future in as_completed(futures):
            results.append(future.result())
            step()
    return results


# A worker keeps the grids it was sent, parsed once, by their JSON's hash.
_WORKER_GRIDS: Dict[int, "_native.Grid"] = {}


def _ray_point(grid_json: str, index: int) -> str:
    key = hash(grid_json)
    native = _WORKER_GRIDS.get(key)
    if native is None:
        native = _native.Grid.from_json(grid_json)
        _WORKER_GRIDS.clear()
        _WORKER_GRIDS[key] = native
    return native.run_point(index)


def _run_ray(grid: Grid, retries: int, step: Callable[[], None], address: Optional[str]) -> List[str]:
    try:
        import ray
    except ImportError:
        raise IoschedError("engine='ray' needs Ray: pip install 'ray>=2.5'") from None
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    task = ray.remote(max_retries=retries, retry_exceptions=True)(_ray_point)
    grid_ref = ray.put(grid._native.to_json())
    pending = {task.remote(grid_ref, index): index for index in range(len(grid))}
    results: List[str] = []
    while pending:
        done, _ = ray.wait(list(pending), num_returns=min(len(pending), 64), timeout=1.0)
        for ref in done:
            index = pending.pop(ref)
            try:
                results.append(ray.get(ref))
            except Exception as error:  # the task failed past its retries
                results.append(_failure(grid, index, f"failed after {retries} retries on Ray: {error}"))
            step()
    return results


def sweep(
    grid: Union[PathLike, Grid],
    *,
    engine: str = "local",
    workers: Optional[int] = None,
    output: Optional[PathLike] = None,
    progress: bool = True,
    retries: int = 2,
    address: Optional[str] = None,
) -> Sweep:
    """Runs every point of ``grid`` (a grid file or a :class:`Grid`).

    ``engine="local"`` runs the points on ``workers`` threads (default: every core);
    ``engine="ray"`` runs each point as a Ray task, on the cluster ``ray.init`` already joined or
    at ``address``, or on a local Ray it starts; a task that fails is retried ``retries`` times
    and then reported as a failed point. The table is the same whichever engine ran it. With
    ``output``, the table is also written there (Parquet or CSV by the suffix).
    """
    if not isinstance(grid, Grid):
        grid = Grid.read(grid)
    meter = _Progress(len(grid), progress)
    started = time.monotonic()
    try:
        if engine == "local":
            count = workers if workers is not None else (os.cpu_count() or 1)
            if count < 1:
                raise IoschedError(f"workers={count}: at least one worker runs the points")
            results = _run_local(grid, count, meter.step)
        elif engine == "ray":
            results = _run_ray(grid, retries, meter.step, address)
        else:
            raise IoschedError(f"unknown engine {engine!r}: expected 'local' or 'ray'")
    finally:
        meter.close()
    done = Sweep(grid, results, time.monotonic() - started, engine)
    if output is not None:
        done.write(output)
    return done
