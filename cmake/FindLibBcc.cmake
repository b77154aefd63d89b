# Finds libbcc (Debian: libbpfcc-dev). Defines the imported target LibBcc::LibBcc.
include(PyPerfFindLibrary)
pyperf_find_library(LibBcc HEADER bcc/BPF.h INCLUDE_SUBDIRS bcc/compat LIBRARY bcc
                    DEBIAN_PACKAGE libbpfcc-dev)
