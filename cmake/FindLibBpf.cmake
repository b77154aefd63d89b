# Finds libbpf (Debian: libbpf-dev), used for BTF parsing. Target LibBpf::LibBpf.
find_path(LIBBPF_INCLUDE_DIR bpf/btf.h)
find_library(LIBBPF_LIBRARY NAMES bpf)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(LibBpf
  REQUIRED_VARS LIBBPF_LIBRARY LIBBPF_INCLUDE_DIR
  FAIL_MESSAGE "libbpf not found: run scripts/setup.sh (apt-get install libbpf-dev)")
if(LibBpf_FOUND AND NOT TARGET LibBpf::LibBpf)
  add_library(LibBpf::LibBpf UNKNOWN IMPORTED)
  set_target_properties(LibBpf::LibBpf PROPERTIES
    IMPORTED_LOCATION ${LIBBPF_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${LIBBPF_INCLUDE_DIR})
endif()
mark_as_advanced(LIBBPF_INCLUDE_DIR LIBBPF_LIBRARY)
