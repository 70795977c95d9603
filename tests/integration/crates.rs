//! The crates are the architecture, and their dependencies run one way (read from `cargo
//! metadata`): the core (`dispenser`) depends on no crate of the workspace; the service
//! (`dispenser-server`) only on the core; the command line (`dispenser-cli`) on the core and
//! the service; the bindings on the core (and a shared bindings crate, `dispenser-bindings`,
//! should one come) only; nothing depends on the command line.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// Each workspace crate and the workspace crates it depends on (every kind of dependency).
fn workspace_graph() -> BTreeMap<String, BTreeSet<String>> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata answers JSON");
    let packages = meta["packages"].as_array().expect("packages");
    let names: BTreeSet<String> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d["name"].as_str().unwrap().to_owned())
                .filter(|d| names.contains(d))
                .collect();
            (p["name"].as_str().unwrap().to_owned(), deps)
        })
        .collect()
}

#[test]
fn the_crates_depend_on_each_other_one_way_only() {
    let graph = workspace_graph();
    let set = |names: &[&str]| {
        names
            .iter()
            .map(|n| (*n).to_owned())
            .collect::<BTreeSet<_>>()
    };
    let allowed: BTreeMap<&str, BTreeSet<String>> = [
        ("dispenser", set(&[])),
        ("dispenser-server", set(&["dispenser"])),
        ("dispenser-cli", set(&["dispenser", "dispenser-server"])),
        (
            "dispenser-python",
            set(&["dispenser", "dispenser-bindings"]),
        ),
        ("dispenser-node", set(&["dispenser", "dispenser-bindings"])),
        ("dispenser-bindings", set(&["dispenser"])),
    ]
    .into_iter()
    .collect();
    for (name, deps) in &graph {
        let Some(may) = allowed.get(name.as_str()) else {
            panic!("crate {name} is not in this test's table: say whom it may depend on");
        };
        let wrong: Vec<_> = deps.difference(may).collect();
        assert!(
            wrong.is_empty(),
            "{name} depends on {wrong:?}, against the direction of the crates"
        );
    }
    for (name, deps) in &graph {
        assert!(
            !deps.contains("dispenser-cli"),
            "{name} depends on the command line"
        );
    }
    // The architecture is all there: each surface on what it must use.
    assert!(graph["dispenser-server"].contains("dispenser"));
    assert!(graph["dispenser-cli"].contains("dispenser-server"));
}
