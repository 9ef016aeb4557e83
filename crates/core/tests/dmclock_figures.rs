//! The benches' reading of `scripts/dmclock-bench/run.sh`'s table (`DMCLOCK_FIGURES`).

#[allow(dead_code)]
#[path = "../benches/common/mod.rs"]
mod common;

use common::dmclock_figures;

const TABLE: &str = "\
dmclock PullPriorityQueue: ns per request (pull + add), best of 5 runs of 2000000
 clients   backlogged        churn
      10        115.5        127.2
     100        203.7        221.3
    1000        335.6        355.4
   10000        675.5        667.1
";

#[test]
fn reads_the_scripts_table() {
    let (backlogged, churn) = dmclock_figures(TABLE).unwrap();
    assert_eq!(backlogged, [115.5, 203.7, 335.6, 675.5]);
    assert_eq!(churn, [127.2, 221.3, 355.4, 667.1]);
}

#[test]
fn a_missing_size_is_named() {
    let without = TABLE.replace("   10000        675.5        667.1\n", "");
    let error = dmclock_figures(&without).unwrap_err();
    assert!(error.contains("no row for 10000 clients"), "{error}");
}

#[test]
fn a_figure_that_is_not_a_cost_is_named_with_its_line() {
    for bad in ["-3.0", "nan", "0", "fast"] {
        let table = TABLE.replace("203.7", bad);
        let error = dmclock_figures(&table).unwrap_err();
        assert!(error.starts_with("line 4:"), "{bad}: {error}");
        assert!(error.contains(bad), "{bad}: {error}");
    }
}

#[test]
fn a_size_the_benches_do_not_measure_is_refused() {
    let table = TABLE.replace("    1000 ", "    2000 ");
    let error = dmclock_figures(&table).unwrap_err();
    assert!(error.contains("2000 clients"), "{error}");
}
