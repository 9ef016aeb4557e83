"""The Python package as a notebook user meets it: runs, frames, catalogs, experiments, errors
and sweeps on both engines. Run from the repository's root (paths are relative to it)."""

import json
import os
from pathlib import Path

import pandas as pd
import pytest

import iosched

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SMALL_JOB = "[global]\ndirect=1\nsize=64m\nruntime=2\ntime_based=1\n\n[r]\nrw=randread\nbs=${BS}\n"


def test_run_gives_fio_json_and_frames():
    result = iosched.run(EXAMPLES / "isolation.fio", policy="bfq")
    assert result.seed == 1
    assert [job["jobname"] for job in result.json["jobs"]] == ["reader", "writer", "writer"]
    jobs = result.jobs
    assert list(jobs["dir"]) == ["read", "write", "write"]
    reader = jobs[jobs["job"] == "reader"].iloc[0]
    # The README's figure for bfq: the reader's mean completion latency is 10.9 ms.
    assert 10.4e6 < reader["clat_mean_ns"] < 11.4e6
    assert reader["iops"] == pytest.approx(reader["ios"] / (reader["runtime_ms"] / 1000), rel=0.01)
    percentiles = result.latency_percentiles
    p99 = percentiles[(percentiles["job"] == "reader") & (percentiles["percentile"] == 99.0)]
    assert len(p99) == 1 and p99.iloc[0]["clat_ns"] > reader["clat_mean_ns"]
    series = result.series
    reads = series[(series["job"] == "reader")]
    assert len(reads) == 20  # 10 s in 500 ms windows
    # The windows hold every I/O of the runtime (the last ones may complete after it), and
    # their latencies average to the run's.
    assert reads["iops"].sum() * 0.5 == pytest.approx(reader["ios"], abs=2)
    weighted = (reads["clat_mean_ns"] * reads["iops"]).sum() / reads["iops"].sum()
    assert weighted == pytest.approx(reader["clat_mean_ns"], rel=0.02)
    assert reads["clat_max_ns"].max() <= reader["clat_max_ns"]


def test_same_seed_same_result_and_other_seed_differs():
    one = iosched.run(text=SMALL_JOB, env={"BS": "4k"}, seed=3)
    again = iosched.run(text=SMALL_JOB, env={"BS": "4k"}, seed=3)
    other = iosched.run(text=SMALL_JOB, env={"BS": "4k"}, seed=4)
    assert one.json == again.json
    assert one.json["jobs"][0]["read"]["clat_ns"] != other.json["jobs"][0]["read"]["clat_ns"]


def test_settings_reach_the_run():
    depth1 = iosched.run(EXAMPLES / "isolation.fio", policy="noop", device_set={"queue_depth": 1})
    depth32 = iosched.run(EXAMPLES / "isolation.fio", policy="noop")
    assert depth1.jobs["clat_mean_ns"][0] != depth32.jobs["clat_mean_ns"][0]
    tuned = iosched.run(EXAMPLES / "isolation.fio", policy="bfq", set={"slice_idle": 0})
    assert tuned.jobs["clat_mean_ns"][0] != iosched.run(EXAMPLES / "isolation.fio", policy="bfq").jobs["clat_mean_ns"][0]


def test_errors_carry_the_message_and_place(tmp_path):
    bad = tmp_path / "job.fio"
    bad.write_text("[r]\nrw=randread\nbs=4k\niodepth=lots\n")
    with pytest.raises(iosched.IoschedError, match=r"job\.fio:4"):
        iosched.run(bad)
    with pytest.raises(iosched.IoschedError, match="unknown tunable"):
        iosched.run(text=SMALL_JOB, env={"BS": "4k"}, set={"no_such_knob": 1})
    with pytest.raises(iosched.IoschedError, match="cannot read job file"):
        iosched.run(tmp_path / "missing.fio")
    with pytest.raises(iosched.IoschedError, match="io.weight"):
        iosched.run(text=SMALL_JOB, env={"BS": "4k"}, groups={"/a:io.weight": 0})
    with pytest.raises(TypeError):
        iosched.run()


def test_catalogs_list_policies_devices_and_experiments():
    policies = {p["name"]: p for p in iosched.policies()}
    assert {"noop", "deadline", "cfq", "bfq", "htbs", "mclock", "dass"} <= set(policies)
    read_expire = [t for t in policies["deadline"]["tunables"] if t["name"] == "read_expire"][0]
    assert read_expire["default"] == 500
    devices = {d["name"]: d for d in iosched.devices()}
    assert {"hdd", "ssd", "fixed"} <= set(devices)
    assert any(p["name"] == "rpm" for p in devices["hdd"]["parameters"])
    names = [e["name"] for e in iosched.experiments(ROOT / "experiments")]
    assert "deadline-vs-noop" in names


def test_an_experiment_gives_its_verdicts():
    result = iosched.experiment("deadline-vs-noop", quick=True, root=ROOT / "experiments")
    assert result.verdicts, result.json.keys()
    assert result.passed == all(v["pass"] for v in result.verdicts)
    with pytest.raises(iosched.IoschedError):
        iosched.experiment("no-such-experiment", root=ROOT / "experiments")


def grid_file(tmp_path, axes):
    (tmp_path / "small.fio").write_text(SMALL_JOB.replace("${BS}", "4k"))
    (tmp_path / "grid.toml").write_text('job = "small.fio"\n' + axes)
    return tmp_path / "grid.toml"


def test_sweep_locally_matches_the_command_and_any_worker_count(tmp_path):
    grid = EXAMPLES / "sweep" / "small.toml"
    one = iosched.sweep(grid, workers=1, progress=False)
    two = iosched.sweep(grid, workers=2, progress=True)
    assert one.csv() == two.csv()
    assert one.table.equals(two.table)
    table = one.table
    assert list(table.columns[:4]) == ["point", "policy", "device.queue_depth", "seed"]
    assert sorted(set(table["point"])) == list(range(12))
    assert list(table["device.queue_depth"].unique()) == [1, 32]
    assert table["policy"].iloc[-1] == "bfq:slice_idle=0"
    assert "12 points (0 failed)" in one.summary
    # Parquet round trip.
    one.write(tmp_path / "t.parquet")
    back = pd.read_parquet(tmp_path / "t.parquet")
    assert back.shape == table.shape and list(back["iops"]) == list(table["iops"])
    one.write(tmp_path / "t.csv")
    assert (tmp_path / "t.csv").read_text() == one.csv()
    assert not list(tmp_path.glob(".*partial"))


def test_sweep_reports_failed_points_and_bad_grids(tmp_path):
    grid = grid_file(tmp_path, '[[axis]]\n"set.nr_requests" = ["64", "-1"]\n')
    done = iosched.sweep(grid, progress=False)
    assert done.failed == [1]
    table = done.table
    assert table[table["point"] == 1]["error"].str.contains("nr_requests").all()
    assert table[table["point"] == 0]["error"].isna().all()
    with pytest.raises(iosched.IoschedError, match="unknown engine"):
        iosched.sweep(grid, engine="spark", progress=False)
    bad = grid_file(tmp_path, "[[axis]]\nspeed = [1]\n")
    with pytest.raises(iosched.IoschedError, match=r"grid\.toml:2: unknown axis"):
        iosched.sweep(bad)


ray = pytest.importorskip("ray", reason="the Ray engine's tests need ray (pip install ray)")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_sweep_on_ray_gives_the_same_table(local_ray, tmp_path):
    grid = EXAMPLES / "sweep" / "small.toml"
    local = iosched.sweep(grid, workers=2, progress=False)
    remote = iosched.sweep(grid, engine="ray", progress=False)
    assert remote.engine == "ray"
    assert remote.csv() == local.csv()
    assert remote.table.equals(local.table)
    failing = grid_file(tmp_path, '[[axis]]\n"set.nr_requests" = ["64", "-1"]\n')
    assert iosched.sweep(failing, engine="ray", progress=False).failed == [1]


def test_a_grid_written_in_the_notebook(tmp_path):
    (tmp_path / "small.fio").write_text(SMALL_JOB.replace("${BS}", "4k"))
    text = 'job = "small.fio"\n[[axis]]\npolicy = ["noop", "deadline"]\n'
    grid = iosched.Grid.parse(text, base_dir=tmp_path)
    assert len(grid) == 2 and grid.title == "<grid>"
    done = iosched.sweep(grid, progress=False)
    assert list(done.table["policy"]) == ["noop", "deadline"]
    on_file = tmp_path / "grid.toml"
    on_file.write_text(text)
    assert done.csv() == iosched.sweep(on_file, progress=False).csv()
    with pytest.raises(iosched.IoschedError, match=r"<grid>:2: unknown axis"):
        iosched.Grid.parse('job = "small.fio"\n[[axis]]\nspeed = [1]\n', base_dir=tmp_path)


def test_a_grid_travels_with_its_workloads(tmp_path):
    grid = iosched.Grid.read(grid_file(tmp_path, "[[axis]]\nseed = [1, 2]\n"))
    text = grid._native.to_json()
    os.remove(tmp_path / "small.fio")
    again = iosched._native.Grid.from_json(text)
    assert json.loads(again.run_point(1))["outcome"].keys() == {"Ok"}
    assert again.run_point(1) == grid._native.run_point(1)
    # Axes of numbers are numbers in the frames (text in the CSV, as the grid writes them).
    assert list(grid.points()["seed"]) == [1, 2]


def test_the_command_line_on_ray_writes_the_local_table(local_ray, tmp_path):
    import subprocess
    import sys

    grid = EXAMPLES / "sweep" / "small.toml"
    local = iosched.sweep(grid, workers=2, progress=False).csv()
    out = tmp_path / "ray.csv"
    done = subprocess.run(
        [sys.executable, "-m", "iosched", "sweep", str(grid), "--engine", "ray", "--quiet", "--output", str(out)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert out.read_text() == local
    assert "12 points (0 failed)" in done.stdout
    # `iosched sweep --engine ray` hands the grid to the same module.
    binary = os.environ.get("IOSCHED_BIN")
    if not binary or not Path(binary).exists():
        pytest.skip("IOSCHED_BIN (the iosched command) not given: cargo test sets it")
    out = tmp_path / "cli.csv"
    done = subprocess.run(
        [binary, "sweep", str(grid), "--engine", "ray", "--quiet", "--output", str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, "IOSCHED_PYTHON": sys.executable},
    )
    assert done.returncode == 0, done.stderr
    assert out.read_text() == local


def test_outputs_never_replace_a_device(tmp_path):
    done = iosched.sweep(EXAMPLES / "sweep" / "small.toml", progress=False)
    done.write("/dev/null")
    assert Path("/dev/null").is_char_device()
    (tmp_path / "sub").mkdir()
    with pytest.raises(iosched.IoschedError, match="directory"):
        done.write(tmp_path / "sub")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sub"]
