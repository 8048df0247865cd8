//! Library version, packed like `VK_MAKE_VERSION` (major << 22 | minor << 12 | patch).

use libc::c_char;

/// Major version of this header. Pre-1.0, a different major or minor is incompatible.
pub const Q4VK_VERSION_MAJOR: u32 = 0;
/// Minor version of this header.
pub const Q4VK_VERSION_MINOR: u32 = 1;
/// Patch version of this header.
pub const Q4VK_VERSION_PATCH: u32 = 0;
/// The header's packed version; put it in `q4vk_context_desc.header_version`.
pub const Q4VK_HEADER_VERSION: u32 =
    (Q4VK_VERSION_MAJOR << 22) | (Q4VK_VERSION_MINOR << 12) | Q4VK_VERSION_PATCH;

/// Returns the library's packed version (same packing as `Q4VK_HEADER_VERSION`).
#[no_mangle]
pub extern "C" fn q4vk_version() -> u32 {
    Q4VK_HEADER_VERSION
}

/// Returns the library's version as a static NUL-terminated string such as "0.1.0".
/// Never NULL; must not be freed.
#[no_mangle]
pub extern "C" fn q4vk_version_string() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// Checks a caller's packed header version against this library: pre-1.0, major and
/// minor must be equal.
pub(crate) fn check_header_version(header_version: u32) -> crate::error::Result<()> {
    let (major, minor) = (header_version >> 22, (header_version >> 12) & 0x3ff);
    if major != Q4VK_VERSION_MAJOR || minor != Q4VK_VERSION_MINOR {
        return Err(crate::error::Error::AbiMismatch(format!(
            "header_version is {major}.{minor}.{}, this library is {} (pre-1.0: major and minor must match)",
            header_version & 0xfff,
            env!("CARGO_PKG_VERSION")
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_match_cargo_version() {
        let expected = format!("{Q4VK_VERSION_MAJOR}.{Q4VK_VERSION_MINOR}.{Q4VK_VERSION_PATCH}");
        assert_eq!(expected, env!("CARGO_PKG_VERSION"));
        // SAFETY: q4vk_version_string returns a static NUL-terminated string.
        let s = unsafe { std::ffi::CStr::from_ptr(q4vk_version_string()) };
        assert_eq!(s.to_str().unwrap(), expected);
        assert_eq!(q4vk_version(), 1 << 12); // 0.1.0
    }

    #[test]
    fn header_version_check() {
        assert!(check_header_version(Q4VK_HEADER_VERSION).is_ok());
        assert!(check_header_version(Q4VK_HEADER_VERSION + 1).is_ok());
        assert!(check_header_version(Q4VK_HEADER_VERSION + (1 << 12)).is_err());
        assert!(check_header_version(1 << 22).is_err());
    }
}
