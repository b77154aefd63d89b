# Finds libunwind's remote API for x86_64 (Debian: libunwind-dev):
# libunwind-ptrace (the _UPT helpers), libunwind-x86_64 and libunwind.
# Target LibUnwind::LibUnwind.
include(PyPerfFindLibrary)
find_library(LIBUNWIND_ARCH_LIBRARY NAMES unwind-x86_64)
find_library(LIBUNWIND_PTRACE_LIBRARY NAMES unwind-ptrace)
pyperf_find_library(LibUnwind HEADER libunwind.h HEADER_SUFFIXES libunwind LIBRARY unwind
                    DEBIAN_PACKAGE libunwind-dev REQUIRED_VARS LIBUNWIND_ARCH_LIBRARY
                    LINK_FIRST LIBUNWIND_PTRACE_LIBRARY LIBUNWIND_ARCH_LIBRARY)
