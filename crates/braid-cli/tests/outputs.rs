//! Where `braid recv --output` writes when it names something that is not
//! a regular file: written into as it is, never replaced by a file.

mod common;

use common::{braid, start_recv, wait, write_data};
use std::os::unix::fs::FileTypeExt;
use std::process::Stdio;
use std::time::Duration;

fn send_to(recv: &common::Recv, file: &str) {
    let send = braid()
        .args(recv.send_args(file))
        .arg("--quiet")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait(send, Duration::from_secs(20)).success());
}

#[test]
fn dev_null_is_written_into_without_overwrite_and_stays_a_device() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("data.bin");
    write_data(&input, 100_000);
    let recv = start_recv(&["--output", "/dev/null"]);
    send_to(&recv, input.to_str().unwrap());
    let out = recv.child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let kind = std::fs::metadata("/dev/null").unwrap().file_type();
    assert!(kind.is_char_device(), "/dev/null is still a device");
}

#[test]
fn a_fifo_gets_the_verified_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("data.bin");
    let data = write_data(&input, 200_000);
    let fifo = dir.path().join("pipe");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    // The reader first: opening a FIFO for writing waits for one.
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    let recv = start_recv(&["--output", fifo.to_str().unwrap()]);
    send_to(&recv, input.to_str().unwrap());
    assert!(recv.child.wait_with_output().unwrap().status.success());
    assert!(
        reader.join().unwrap() == data,
        "the FIFO's reader got the file"
    );
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
}

#[test]
fn a_file_larger_than_the_free_space_is_refused_before_it_arrives() {
    // A 1 MiB file system of its own (root only; skipped otherwise).
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small");
    std::fs::create_dir(&small).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(&small)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    }
    let input = dir.path().join("big.bin");
    write_data(&input, 3 << 20);
    let out = format!("{}/", small.display());
    let recv = start_recv(&["--output", &out, "--json"]);
    let send = braid()
        .args(recv.send_args(input.to_str().unwrap()))
        .args(["--quiet", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let sent = send.wait_with_output().unwrap();
    let got = recv.child.wait_with_output().unwrap();
    let _ = std::process::Command::new("umount").arg(&small).status();
    let record: serde_json::Value = serde_json::from_slice(&got.stdout).unwrap();
    assert_eq!(got.status.code(), Some(5), "{record}");
    assert!(
        record["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("free")),
        "{record}"
    );
    // The sender is told why, and sent at most a window, not the file.
    assert_eq!(sent.status.code(), Some(1));
    let sent: serde_json::Value = serde_json::from_slice(&sent.stdout).unwrap();
    assert!(
        sent["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("free")),
        "{sent}"
    );
}
