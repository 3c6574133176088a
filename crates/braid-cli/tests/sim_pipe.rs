//! `braid sim` feeds pipes: a reader that stops early (`| head`) ends it
//! quietly, never with a panic.

mod common;

use std::io::Read;
use std::process::Stdio;

#[test]
fn a_reader_that_stops_early_ends_the_simulation_quietly() {
    let root = env!("CARGO_MANIFEST_DIR");
    let scenario = format!("{root}/../../scenarios/nkp0024/8-window-equal-start.toml");
    let mut child = common::braid()
        .args(["sim", &scenario, "--json", "--series"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 100];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The pipe's reader is gone now, as `head`'s would be, with more than
    // a pipe's buffer (64 KiB) still to come.
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_ne!(out.status.code(), Some(101), "{stderr}");
}
