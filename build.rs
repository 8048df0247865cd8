//! Link settings for the shared library: the unversioned SONAME `libq4vk.so` and a version
//! script that exports only `q4vk_*` symbols.

fn main() {
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/ffi/exports.map");
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
