# Android NDK ABI names (ANDROID_ABI) -> the Rust target triple cargo builds for and the
# prefix of the NDK's clang wrapper that links it (<prefix><API level>-clang).
#   q4vk_android_target(<abi> <rust_triple_var> <clang_prefix_var>)
# Fails for an ABI q4vk has no Rust target for.
function(q4vk_android_target abi rust_var clang_var)
  if(abi STREQUAL "arm64-v8a")
    set(rust aarch64-linux-android)
    set(clang aarch64-linux-android)
  elseif(abi STREQUAL "armeabi-v7a")
    set(rust armv7-linux-androideabi)
    set(clang armv7a-linux-androideabi)
  elseif(abi STREQUAL "x86_64")
    set(rust x86_64-linux-android)
    set(clang x86_64-linux-android)
  elseif(abi STREQUAL "x86")
    set(rust i686-linux-android)
    set(clang i686-linux-android)
  else()
    message(FATAL_ERROR "q4vk: no Rust target for ANDROID_ABI '${abi}' "
                        "(arm64-v8a, armeabi-v7a, x86_64 or x86)")
  endif()
  set(${rust_var} ${rust} PARENT_SCOPE)
  set(${clang_var} ${clang} PARENT_SCOPE)
endfunction()
