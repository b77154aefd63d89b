# Finds libelf (Debian: libelf-dev). Target LibElf::LibElf.
find_path(LIBELF_INCLUDE_DIR libelf.h)
find_library(LIBELF_LIBRARY NAMES elf)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(LibElf
  REQUIRED_VARS LIBELF_LIBRARY LIBELF_INCLUDE_DIR
  FAIL_MESSAGE "libelf not found: run scripts/setup.sh (apt-get install libelf-dev)")
if(LibElf_FOUND AND NOT TARGET LibElf::LibElf)
  add_library(LibElf::LibElf UNKNOWN IMPORTED)
  set_target_properties(LibElf::LibElf PROPERTIES
    IMPORTED_LOCATION ${LIBELF_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${LIBELF_INCLUDE_DIR})
endif()
mark_as_advanced(LIBELF_INCLUDE_DIR LIBELF_LIBRARY)
