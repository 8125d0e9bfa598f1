//! `tpuport migrate` on a large tree with stderr piped: no progress bar leaks into the output.

use super::*;

/// A large tree with stderr piped (as in every test here): no progress bar, no escape codes,
/// the summary as usual.
#[test]
fn no_bar_when_stderr_is_piped() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..250 {
        write(dir.path(), &format!("f{i:03}.py"), CUDA_SCRIPT);
    }
    let out = tpuport()
        .env_remove("CI")
        .env_remove("TPUPORT_NO_PROGRESS")
        .args(["migrate", "--check"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains("migrating ") && !err.contains('\x1b'),
        "{err}"
    );
    assert!(
        err.starts_with("\ntpuport migrate: 250 files scanned (250 parsed)"),
        "{err}"
    );
}
