# Finds libbpf (Debian: libbpf-dev), used for BTF parsing. Target LibBpf::LibBpf.
include(PyPerfFindLibrary)
pyperf_find_library(LibBpf HEADER bpf/btf.h LIBRARY bpf DEBIAN_PACKAGE libbpf-dev)
