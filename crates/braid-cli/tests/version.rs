//! `braid --version` names the wire version, which decides who can talk.

mod common;

#[test]
fn version_names_the_release_and_the_wire_version() {
    let out = common::braid().arg("--version").output().unwrap();
    assert!(out.status.success());
    let line = String::from_utf8(out.stdout).unwrap();
    let expected = format!(
        "braid {} (wire version {})\n",
        env!("CARGO_PKG_VERSION"),
        braid_proto::wire::VERSION
    );
    assert_eq!(line, expected);
}
