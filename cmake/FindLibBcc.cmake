# Finds libbcc (Debian: libbpfcc-dev). Defines the imported target LibBcc::LibBcc.
find_path(LIBBCC_INCLUDE_DIR bcc/BPF.h)
find_library(LIBBCC_LIBRARY NAMES bcc)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(LibBcc
  REQUIRED_VARS LIBBCC_LIBRARY LIBBCC_INCLUDE_DIR
  FAIL_MESSAGE "libbcc not found: run scripts/setup.sh (apt-get install libbpfcc-dev)")
if(LibBcc_FOUND AND NOT TARGET LibBcc::LibBcc)
  add_library(LibBcc::LibBcc UNKNOWN IMPORTED)
  set_target_properties(LibBcc::LibBcc PROPERTIES
    IMPORTED_LOCATION ${LIBBCC_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES "${LIBBCC_INCLUDE_DIR};${LIBBCC_INCLUDE_DIR}/bcc/compat")
endif()
mark_as_advanced(LIBBCC_INCLUDE_DIR LIBBCC_LIBRARY)
