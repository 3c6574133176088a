//! Every scenario file in the repository parses: the suites `braid bench`
//! runs, the examples the README shows and the perf scenario. A key the
//! format refuses (say, a misspelt `[published]` target) fails here first.

use braid_sim::Scenario;
use std::path::{Path, PathBuf};

fn toml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            toml_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "toml") {
            out.push(path);
        }
    }
}

#[test]
fn every_scenario_file_parses() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut files = Vec::new();
    toml_files(&root, &mut files);
    files.sort();
    assert!(
        files.len() >= 50,
        "only {} files under {}",
        files.len(),
        root.display()
    );
    let failures: Vec<String> = files
        .iter()
        .filter_map(|f| Scenario::from_file(f).err().map(|e| e.to_string()))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let with_published = files
        .iter()
        .filter(|f| Scenario::from_file(f).unwrap().published.is_some())
        .count();
    assert!(
        with_published >= 50,
        "{with_published} files with [published]"
    );
}
