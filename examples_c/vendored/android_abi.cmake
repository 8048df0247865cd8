# cmake -P android_abi.cmake: checks cmake/q4vk-android.cmake, the ANDROID_ABI -> Rust
# target mapping the source build passes to cargo, and that an unknown ABI is refused.
include("${CMAKE_CURRENT_LIST_DIR}/../../cmake/q4vk-android.cmake")
if(DEFINED ABI) # the child run of the refusal check below
  q4vk_android_target("${ABI}" rust clang)
  return()
endif()
set(cases "arm64-v8a|aarch64-linux-android|aarch64-linux-android"
          "armeabi-v7a|armv7-linux-androideabi|armv7a-linux-androideabi"
          "x86_64|x86_64-linux-android|x86_64-linux-android"
          "x86|i686-linux-android|i686-linux-android")
foreach(case IN LISTS cases)
  string(REPLACE "|" ";" case "${case}")
  list(GET case 0 abi)
  list(GET case 1 want_rust)
  list(GET case 2 want_clang)
  q4vk_android_target("${abi}" rust clang)
  if(NOT rust STREQUAL want_rust OR NOT clang STREQUAL want_clang)
    message(FATAL_ERROR "${abi}: got ${rust} / ${clang}, want ${want_rust} / ${want_clang}")
  endif()
  message(STATUS "ok   ${abi} -> cargo --target ${rust}, linker ${clang}<API>-clang")
endforeach()
execute_process(COMMAND "${CMAKE_COMMAND}" -DABI=mips -P "${CMAKE_CURRENT_LIST_FILE}"
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "no Rust target for ANDROID_ABI 'mips'")
  message(FATAL_ERROR "ANDROID_ABI=mips was not refused (rc ${rc}): ${err}")
endif()
message(STATUS "ok   mips -> refused")
