//! Runs one fuzz target on input files, on stable: `cargo run -p iosched-fuzz --example replay
//! -- TARGET FILE...` (a crash libFuzzer found, or a regression input). Panics as the target
//! does.

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_default();
    let Some((_, target)) = iosched_fuzz::TARGETS.iter().find(|(n, _)| *n == name) else {
        let names: Vec<&str> = iosched_fuzz::TARGETS.iter().map(|(n, _)| *n).collect();
        eprintln!(
            "usage: replay TARGET FILE... (targets: {})",
            names.join(", ")
        );
        std::process::exit(2);
    };
    for path in args {
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
        target(&data);
        println!("{path}: ok");
    }
}
