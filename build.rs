//! Link settings for the shared library: the unversioned SONAME `libq4vk.so` and a version
//! script that exports only `q4vk_*` symbols; and `cfg(q4vk_avx512)` when the compiler
//! can build the AVX-512 kernels (Rust 1.89 or later; the MSRV stays lower).

fn main() {
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/ffi/exports.map");
    println!("cargo:rustc-check-cfg=cfg(q4vk_avx512)");
    if rustc_minor().is_some_and(|minor| minor >= 89) {
        println!("cargo:rustc-cfg=q4vk_avx512");
    }
    if target_os == "linux" || target_os == "android" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libq4vk.so");
        println!(
            "cargo:rustc-cdylib-link-arg=-Wl,--version-script={manifest_dir}/src/ffi/exports.map"
        );
    }
    if target_os == "android" {
        // Android 15 devices may use 16 KB pages: align every LOAD segment for them.
        println!("cargo:rustc-cdylib-link-arg=-Wl,-z,max-page-size=16384");
    }
}

/// The minor version of the compiler cargo builds with (`rustc 1.MINOR.patch ...`).
fn rustc_minor() -> Option<u32> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = std::process::Command::new(rustc)
        .arg("--version")
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    text.split_whitespace()
        .nth(1)?
        .split('.')
        .nth(1)?
        .parse()
        .ok()
}
