# Defines the imported targets of q4vk, shared by the installed package
# (q4vk-config.cmake) and the source build (the top-level CMakeLists.txt):
#   q4vk::q4vk         the shared library libq4vk.so (SONAME libq4vk.so)
#   q4vk::q4vk_static  the static library libq4vk.a, with the system libraries it needs
#
# q4vk_add_targets(SHARED <libq4vk.so> STATIC <libq4vk.a> INCLUDE <dir>
#                  NATIVE_LIBS <list> [GLOBAL])
# Does nothing for a target that already exists.
function(q4vk_add_targets)
  cmake_parse_arguments(Q "GLOBAL" "SHARED;STATIC;INCLUDE" "NATIVE_LIBS" ${ARGN})
  set(scope)
  if(Q_GLOBAL)
    set(scope GLOBAL)
  endif()
  if(NOT TARGET q4vk::q4vk)
    add_library(q4vk::q4vk SHARED IMPORTED ${scope})
    set_target_properties(q4vk::q4vk PROPERTIES
      IMPORTED_LOCATION "${Q_SHARED}"
      IMPORTED_SONAME "libq4vk.so"
      INTERFACE_INCLUDE_DIRECTORIES "${Q_INCLUDE}")
  endif()
  if(NOT TARGET q4vk::q4vk_static)
    add_library(q4vk::q4vk_static STATIC IMPORTED ${scope})
    set_target_properties(q4vk::q4vk_static PROPERTIES
      IMPORTED_LOCATION "${Q_STATIC}"
      IMPORTED_LINK_INTERFACE_LANGUAGES "C"
      INTERFACE_INCLUDE_DIRECTORIES "${Q_INCLUDE}"
      INTERFACE_LINK_LIBRARIES "${Q_NATIVE_LIBS}")
  endif()
endfunction()
