use super::*;
use crate::progress::Quiet;

/// A folder with two small job files, removed when dropped.
struct Folder(PathBuf);

impl Folder {
    fn new(name: &str) -> Folder {
        let dir = std::env::temp_dir().join(format!("iosched-sweep-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("reader.fio"),
            "[reader]\nrw=randread\nbs=4k\nsize=64m\nio_size=${IOSIZE}\niodepth=${DEPTH}\nioengine=libaio\ndirect=1\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("mixed.fio"),
            "[global]\nsize=64m\ndirect=1\nio_size=256k\n[r]\nrw=randread\nbs=4k\n[w]\nrw=write\nbs=64k\n",
        )
        .unwrap();
        Folder(dir)
    }

    fn grid(&self, text: &str) -> Result<Grid> {
        Grid::parse(text, "grid.toml", &self.0)
    }
}

impl Drop for Folder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const GRID: &str = r#"
title = "test"
policy = "deadline"

[workloads]
reader = "reader.fio"
mixed = "mixed.fio"

[env]
IOSIZE = "128k"

[[axis]]
"set.fifo_batch" = [1, 16]

[[axis]]
"env.DEPTH" = ["1", "8"]

[[axis]]
seed = [1, 2]
"#;

// Proves the expansion: several workloads without a workload axis make one, first; the product
// runs the last axis fastest; points are what their index says.
#[test]
fn expands_the_product_in_order() {
    let folder = Folder::new("expand");
    let grid = folder.grid(GRID).unwrap();
    let names: Vec<&str> = grid.axes.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["workload", "set.fifo_batch", "env.DEPTH", "seed"]);
    assert_eq!(grid.len(), 16);
    let points: Vec<Point> = grid.points().collect();
    assert_eq!(points.len(), 16);
    assert_eq!(points[0].values, ["mixed", "1", "1", "1"]);
    assert_eq!(points[1].values, ["mixed", "1", "1", "2"]);
    assert_eq!(points[2].values, ["mixed", "1", "8", "1"]);
    assert_eq!(points[15].values, ["reader", "16", "8", "2"]);
    for (i, point) in points.iter().enumerate() {
        assert_eq!(point.index, i);
        assert_eq!(grid.point(i).as_ref(), Some(point));
    }
    assert_eq!(grid.point(16), None);
}

// Proves each axis reaches the run: the tunable, the variable, the seed and the workload.
#[test]
fn each_axis_sets_what_it_names() {
    let folder = Folder::new("configure");
    let grid = folder.grid(GRID).unwrap();
    let point = grid.point(15).unwrap();
    let (config, file) = grid.configure(&point).unwrap();
    assert_eq!(config.policy, "deadline");
    assert_eq!(config.seed, 2);
    assert!(config
        .policy_settings
        .contains(&("fifo_batch".to_string(), "16".to_string())));
    assert_eq!(file.jobs.len(), 1);
    assert_eq!(file.jobs[0].name, "reader");
    assert_eq!(file.jobs[0].iodepth, 8);
    let point = grid.point(0).unwrap();
    let (_, file) = grid.configure(&point).unwrap();
    assert_eq!(file.jobs.len(), 2);
}

// Proves the table does not depend on how many threads ran it, and that each point's rows are
// its own run's (a point run alone gives the same rows).
#[test]
fn the_table_is_the_same_on_one_thread_or_several() {
    let folder = Folder::new("threads");
    let grid = folder.grid(GRID).unwrap();
    let one = csv(&grid, &execute(&grid, 1, &Quiet));
    let three = csv(&grid, &execute(&grid, 3, &Quiet));
    assert_eq!(one, three);
    let lines: Vec<&str> = one.lines().collect();
    assert_eq!(
        lines[0],
        "point,workload,set.fifo_batch,env.DEPTH,seed,job,dir,clones,ios,bytes,iops,bw_bytes,\
         runtime_ns,clat_mean_ns,clat_p50_ns,clat_p95_ns,clat_p99_ns,clat_p99_9_ns,clat_max_ns,\
         lat_mean_ns,starved,error"
    );
    // 8 points of mixed (r read, w write) and 8 of reader: 24 rows.
    assert_eq!(lines.len(), 1 + 8 * 2 + 8);
    let alone = run_point(&grid, 13).unwrap();
    let rows13: Vec<&str> = lines[1..]
        .iter()
        .copied()
        .filter(|l| l.starts_with("13,"))
        .collect();
    let mut again = String::new();
    for row in rows(&alone) {
        again.push_str(&row.iter().map(Cell::csv).collect::<Vec<_>>().join(","));
        again.push('\n');
    }
    assert_eq!(rows13.join("\n") + "\n", again);
    // Point 13: reader, fifo_batch 16, depth 1, seed 2; 32 I/Os of 4 KiB.
    assert!(
        rows13[0].starts_with("13,reader,16,1,2,reader,read,1,32,131072,"),
        "{}",
        rows13[0]
    );
}

// Proves a point that fails (a bad tunable value) is reported in its row and the summary, and
// the other points still run.
#[test]
fn a_failed_point_is_reported_and_the_rest_run() {
    let folder = Folder::new("fail");
    let grid = folder
        .grid("job = \"mixed.fio\"\n[[axis]]\n\"set.fifo_batch\" = [\"4\", \"lots\"]\n")
        .unwrap();
    let results = execute(&grid, 2, &Quiet);
    assert!(results[0].outcome.is_ok());
    let error = results[1].outcome.as_ref().unwrap_err();
    assert!(error.contains("fifo_batch"), "{error}");
    let table = csv(&grid, &results);
    let failed: Vec<&str> = table.lines().filter(|l| l.starts_with("1,")).collect();
    assert_eq!(failed.len(), 1);
    assert!(failed[0].contains("fifo_batch"));
    let summary = summary(&grid, &results, Duration::from_secs(1));
    assert!(summary.contains("2 points (1 failed)"), "{summary}");
    assert!(
        summary.contains("- point 1 (set.fifo_batch=lots)"),
        "{summary}"
    );
}

// Proves bad grids are refused with the file, the line and what is wrong.
#[test]
fn bad_grids_name_the_line_and_the_problem() {
    let folder = Folder::new("errors");
    let cases: &[(&str, &str)] = &[
        (
            "job = \"mixed.fio\"\n[[axis]]\nspeed = [1]\n",
            "grid.toml:2: unknown axis \"speed\"",
        ),
        (
            "job = \"mixed.fio\"\n\n[[axis]]\nseed = [1, -2]\n",
            "grid.toml:3: axis seed: \"-2\"",
        ),
        (
            "job = \"mixed.fio\"\n[[axis]]\nseed = []\n",
            "grid.toml:2: axis \"seed\" has no values",
        ),
        (
            "job = \"mixed.fio\"\n[[axis]]\nseed = [1, 1]\n",
            "\"1\" is given twice",
        ),
        (
            "job = \"mixed.fio\"\n[[axis]]\nseed = [1]\npolicy = [\"noop\"]\n",
            "exactly one key",
        ),
        (
            "job = \"mixed.fio\"\n[[axis]]\nworkload = [\"x\"]\n",
            "no workload named \"x\"",
        ),
        ("job = \"nothere.fio\"\n", "workload nothere"),
        (
            "jobs = \"mixed.fio\"\n",
            "grid.toml:1: unknown key \"jobs\"",
        ),
        ("[[axis]]\nseed = [1]\n", "no workload"),
        ("job = \"mixed.fio\"\nseed = \n", "grid.toml:2:"),
        (
            "job = \"mixed.fio\"\n[[axis]]\n\"set.x\" = [true]\n",
            "strings or numbers",
        ),
        (
            "job = \"mixed.fio\"\n[[axis]]\n\"group./a\" = [1]\n",
            "group.PATH:FILE",
        ),
        (
            "job = \"mixed.fio\"\n[[axis]]\npolicy = [\":x\"]\n",
            "axis policy",
        ),
    ];
    for (text, expected) in cases {
        let error = format!("{:#}", folder.grid(text).unwrap_err());
        assert!(error.contains(expected), "{text:?}: {error}");
    }
    let many = "job = \"mixed.fio\"\n[[axis]]\nseed = [0,1,2,3,4,5,6,7,8,9]\n".to_string()
        + &(0..6)
            .map(|i| format!("[[axis]]\n\"env.V{i}\" = [0,1,2,3,4,5,6,7,8,9]\n"))
            .collect::<String>();
    let error = format!("{:#}", folder.grid(&many).unwrap_err());
    assert!(error.contains("10000000 points"), "{error}");
}

// Proves the policy axis takes variants with their own tunables, a tunable axis wins over the
// variant's value for the same tunable, and `set.POLICY.NAME` reaches that policy only (noop,
// which has no fifo_batch, runs).
#[test]
fn policy_variants_and_tunable_axes_combine() {
    let folder = Folder::new("policy");
    let grid = folder
        .grid(
            "job = \"mixed.fio\"\n[[axis]]\npolicy = [\"noop\", \"deadline:fifo_batch=4,writes_starved=1\"]\n\
             [[axis]]\n\"set.deadline.fifo_batch\" = [8]\n[[axis]]\n\"device.queue_depth\" = [1]\n\
             [[axis]]\n\"group./a:io.weight\" = [300]\n",
        )
        .unwrap();
    let (config, _) = grid.configure(&grid.point(1).unwrap()).unwrap();
    assert_eq!(config.policy, "deadline");
    assert_eq!(
        config.policy_settings,
        [
            ("fifo_batch".to_string(), "4".to_string()),
            ("writes_starved".to_string(), "1".to_string()),
            ("deadline.fifo_batch".to_string(), "8".to_string())
        ]
    );
    assert_eq!(
        config.device_settings,
        [("queue_depth".to_string(), "1".to_string())]
    );
    assert_eq!(config.group_settings[0].path, "/a");
    assert_eq!(config.group_settings[0].value, "300");
    let results = execute(&grid, 1, &Quiet);
    for result in &results {
        assert!(
            result.outcome.is_ok(),
            "{:?}",
            result.outcome.as_ref().err()
        );
    }
}
