# Finds libunwind's remote API for x86_64 (Debian: libunwind-dev):
# libunwind-ptrace (the _UPT helpers), libunwind-x86_64 and libunwind.
# Target LibUnwind::LibUnwind.
find_path(LIBUNWIND_INCLUDE_DIR libunwind.h PATH_SUFFIXES libunwind)
find_library(LIBUNWIND_LIBRARY NAMES unwind)
find_library(LIBUNWIND_ARCH_LIBRARY NAMES unwind-x86_64)
find_library(LIBUNWIND_PTRACE_LIBRARY NAMES unwind-ptrace)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(LibUnwind
  REQUIRED_VARS LIBUNWIND_LIBRARY LIBUNWIND_ARCH_LIBRARY LIBUNWIND_INCLUDE_DIR
  FAIL_MESSAGE "libunwind not found: run scripts/setup.sh (apt-get install libunwind-dev)")
if(LibUnwind_FOUND AND NOT TARGET LibUnwind::LibUnwind)
  add_library(LibUnwind::LibUnwind INTERFACE IMPORTED)
  set(_libs ${LIBUNWIND_ARCH_LIBRARY} ${LIBUNWIND_LIBRARY})
  if(LIBUNWIND_PTRACE_LIBRARY)
    list(PREPEND _libs ${LIBUNWIND_PTRACE_LIBRARY})
  endif()
  set_target_properties(LibUnwind::LibUnwind PROPERTIES
    INTERFACE_LINK_LIBRARIES "${_libs}"
    INTERFACE_INCLUDE_DIRECTORIES ${LIBUNWIND_INCLUDE_DIR})
endif()
mark_as_advanced(LIBUNWIND_INCLUDE_DIR LIBUNWIND_LIBRARY LIBUNWIND_ARCH_LIBRARY
                 LIBUNWIND_PTRACE_LIBRARY)
