//! Link settings for the shared library: the unversioned SONAME `libq4vk.so`. Exports need
//! no version script of ours: rustc's own for a cdylib exports exactly the `#[no_mangle]`
//! functions, which are the C API (`examples_c/check_exports.sh` checks them against the
//! header); a second anonymous script would make GNU ld refuse the link.
//!
//! Also `Q4VK_GIT_COMMIT`, the short hash of the commit checked out when this package is the
//! top of a git work tree (q4vk-bench's `--jsonl` lines name it); unset without git or
//! outside a work tree of its own (an unpacked crate).

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    println!("cargo:rerun-if-changed=build.rs");
    if target_os == "linux" || target_os == "android" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libq4vk.so");
    }
    if target_os == "android" {
        // Android 15 devices may use 16 KB pages: align every LOAD segment for them.
        println!("cargo:rustc-cdylib-link-arg=-Wl,-z,max-page-size=16384");
    }
    if let Some(commit) = git_commit() {
        println!("cargo:rustc-env=Q4VK_GIT_COMMIT={commit}");
    }
}

/// One line of `git <args>` run in this package's directory, or `None` where it fails.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    let line = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !line.is_empty()).then_some(line)
}

/// HEAD's short hash, asking cargo to run this again when HEAD or the branch it names moves.
fn git_commit() -> Option<String> {
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR")?);
    let top = git(&dir, &["rev-parse", "--show-toplevel"])?;
    if Path::new(&top).canonicalize().ok()? != dir.canonicalize().ok()? {
        return None;
    }
    let commit = git(&dir, &["rev-parse", "--short", "HEAD"])?;
    if !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut watch = vec!["HEAD".to_string(), "packed-refs".to_string()];
    watch.extend(git(&dir, &["symbolic-ref", "-q", "HEAD"]));
    for name in watch {
        if let Some(file) = git(&dir, &["rev-parse", "--git-path", &name]) {
            let file = dir.join(file);
            if file.exists() {
                println!("cargo:rerun-if-changed={}", file.display());
            }
        }
    }
    Some(commit)
}
