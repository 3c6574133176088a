//! `braid sim --reach`: the meeting through every pair of NAT kinds, and
//! the lab's transfer cases, in virtual time, as tables.

use std::process::Command;

#[test]
fn sim_reach_prints_which_nat_pairs_punch_through() {
    let out = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(["sim", "--reach"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let row = |a: &str, b: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("| {a} | {b} | — |")))
            .unwrap_or_else(|| panic!("no {a}-{b} row in {text}"))
            .to_string()
    };
    // Paired; a direct path where a mapping can be learnt, none elsewhere.
    assert!(
        row("cone", "symmetric").ends_with(" | 60 | 60 | — |"),
        "{text}"
    );
    assert!(
        row("symmetric", "symmetric").ends_with(" | 60 | — | — |"),
        "{text}"
    );
    let rebind = text.lines().find(|l| l.contains("rebinds")).unwrap();
    assert!(
        !rebind.ends_with("| — |"),
        "no direct path after the rebinding: {rebind}"
    );
    // Every lab case's transfer completed.
    let cases: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("| yes |") || l.contains("| no |"))
        .collect();
    assert_eq!(cases.len(), 15, "{text}");
    assert!(cases.iter().all(|l| l.contains("| yes |")), "{text}");
    // The same seed, the same table.
    let again = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(["sim", "--reach"])
        .output()
        .unwrap();
    assert_eq!(again.stdout, text.as_bytes());
}
