//! Link settings for the shared library: the unversioned SONAME `libq4vk.so`. Exports need
//! no version script of ours: rustc's own for a cdylib exports exactly the `#[no_mangle]`
//! functions, which are the C API (`examples_c/check_exports.sh` checks them against the
//! header); a second anonymous script would make GNU ld refuse the link.

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
}
