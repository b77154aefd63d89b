# Finds libelf (Debian: libelf-dev). Target LibElf::LibElf.
include(PyPerfFindLibrary)
pyperf_find_library(LibElf HEADER libelf.h LIBRARY elf DEBIAN_PACKAGE libelf-dev)
