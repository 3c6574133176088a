//! Folders, several files and resuming, as a user runs them: `braid send
//! DIR FILE`, and the same command again after the sender was killed.

mod common;

use common::{braid, lines, run, start_recv, stderr, wait, write_data};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(30);

/// Every file under `root` and its bytes, by relative path.
fn files_under(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_folder_and_a_file_arrive_in_one_transfer() {
    let src = tempfile::tempdir().unwrap();
    let top = src.path().join("album");
    std::fs::create_dir_all(top.join("raw/empty")).unwrap();
    write_data(&top.join("raw/one.bin"), 300_000);
    write_data(&top.join("cover.jpg"), 12_345);
    let single = src.path().join("readme.txt");
    std::fs::write(&single, "hello").unwrap();
    let out = tempfile::tempdir().unwrap();
    let recv = start_recv(&["--output", out.path().to_str().unwrap(), "--json"]).with_records();
    let (top_s, single_s) = (top.to_str().unwrap(), single.to_str().unwrap());
    let mut args = recv.send_args(top_s);
    args.insert(2, single_s);
    args.push("--json");
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let sent: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let record = recv.record(LIMIT);
    assert_eq!(record["manifest_blake3"], sent["manifest_blake3"]);
    assert_eq!(record["blake3"], sent["blake3"]);
    assert_eq!(sent["files"], 3);
    assert_eq!(record["files"], 3);
    assert_eq!(record["file"], "album and 1 more");
    assert_eq!(record["resumed_bytes"], 0);
    assert_eq!(files_under(&out.path().join("album")), files_under(&top));
    assert!(out.path().join("album/raw/empty").is_dir());
    assert_eq!(
        std::fs::read(out.path().join("readme.txt")).unwrap(),
        b"hello"
    );
    // A folder does not go to standard output.
    let recv = start_recv(&["--output", "-"]);
    let o = run(&recv.send_args(top_s));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("give a folder"), "{}", stderr(&o));
}

/// A link emulator in front of `to`, slow enough to stop a transfer part
/// way: its address.
fn slow_link(to: &str) -> (Child, String) {
    let mut child = braid()
        .args([
            "emulate",
            "--listen",
            "127.0.0.1:0",
            "--to",
            to,
            "--rate",
            "40mbit",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = lines(child.stdout.take().unwrap());
    let line = out.recv_timeout(LIMIT).unwrap();
    let addr = line
        .strip_prefix("emulating ")
        .and_then(|l| l.split_once(' '))
        .map(|(a, _)| a.to_owned())
        .unwrap_or_else(|| panic!("{line}"));
    (child, addr)
}

/// Bytes of the files under `dir`, subfolders included.
fn bytes_under(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .map(|e| {
                let e = e.unwrap();
                let m = e.metadata().unwrap();
                if m.is_dir() {
                    bytes_under(&e.path())
                } else {
                    m.len()
                }
            })
            .sum()
    })
}

#[test]
fn a_killed_sender_sent_again_goes_on_where_it_stopped() {
    let src = tempfile::tempdir().unwrap();
    let file = src.path().join("big.bin");
    let data = write_data(&file, 20 << 20);
    let out = tempfile::tempdir().unwrap();
    let recv =
        start_recv(&["--output", out.path().to_str().unwrap(), "--keep", "--json"]).with_records();
    let (mut link, via) = slow_link(&recv.addr);
    let mut args = recv.send_args(file.to_str().unwrap());
    args[3] = &via;
    let mut sender = braid().args(&args).stderr(Stdio::null()).spawn().unwrap();
    let staging = out.path().join(".big.bin.braid-part");
    let start = Instant::now();
    while bytes_under(&staging) < 4 << 20 {
        assert!(
            start.elapsed() < LIMIT,
            "{} bytes arrived",
            bytes_under(&staging)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    sender.kill().unwrap();
    sender.wait().unwrap();
    let failed = recv.record(LIMIT);
    assert_eq!(failed["outcome"], "failed");
    assert!(
        !out.path().join("big.bin").exists(),
        "nothing looks finished"
    );
    let kept = bytes_under(&staging);
    assert!(kept >= 4 << 20, "kept {kept}");
    let _ = link.kill();
    link.wait().unwrap();

    // The same command, straight this time.
    let again = run(&recv.send_args(file.to_str().unwrap()));
    assert!(again.status.success(), "{}", stderr(&again));
    let done = recv.record(LIMIT);
    assert_eq!(done["outcome"], "verified");
    let resumed = done["resumed_bytes"].as_u64().unwrap();
    assert!(
        resumed >= 4 << 20 && resumed <= kept,
        "resumed {resumed} of {kept}"
    );
    assert_eq!(std::fs::read(out.path().join("big.bin")).unwrap(), data);
    assert!(!staging.exists());
    let mut child = recv.child;
    let _ = child.kill();
    let _ = wait(child, LIMIT);
}
