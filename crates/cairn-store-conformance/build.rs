//! Collects the conformance checks: every `pub async fn name(store: DynStore)` of the check
//! modules, grouped by the store trait each module covers, into the `__conformance_checks!`
//! macro that `conformance_tests!` expands. A new check is run on every backend without being
//! listed anywhere.

use std::fmt::Write as _;
use std::{env, fs, path::Path};

/// Each check module, and the test module (named after its store trait) its checks appear in.
const MODULES: &[(&str, &str)] = &[
    ("runs", "runs"),
    ("control", "runs"),
    ("lists", "runs"),
    ("journal", "journal"),
    ("signals", "signals"),
    ("schedules", "schedules"),
    ("flow", "flow"),
    ("events", "events"),
    ("workers", "workers"),
];

fn main() {
    let mut groups: Vec<(&str, Vec<String>)> = Vec::new();
    for (file, group) in MODULES {
        let path = format!("src/{file}.rs");
        println!("cargo:rerun-if-changed={path}");
        let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let checks = text.lines().filter_map(|line| {
            let name = line.strip_prefix("pub async fn ")?.strip_suffix("(store: DynStore) {")?;
            Some(format!("{file}::{name}"))
        });
        match groups.iter_mut().find(|(g, _)| g == group) {
            Some((_, names)) => names.extend(checks),
            None => groups.push((group, checks.collect())),
        }
    }
    let mut out =
        String::from("#[doc(hidden)]\n#[macro_export]\nmacro_rules! __conformance_checks {\n    ($make:expr) => {\n");
    for (group, names) in &groups {
        assert!(!names.is_empty(), "no checks found for {group}");
        let _ =
            writeln!(out, "        mod {group} {{\n            #[allow(unused_imports)]\n            use super::*;");
        let _ = writeln!(out, "            $crate::conformance_tests!(@each $make; {});", names.join(", "));
        out.push_str("        }\n");
    }
    out.push_str("    };\n}\n");
    let dest = Path::new(&env::var("OUT_DIR").expect("OUT_DIR")).join("checks.rs");
    fs::write(dest, out).expect("write checks.rs");
}
