// Compiling small C programs against a CPython's own headers (pyenv's
// include/pythonX.Y, Debian's pythonX.Y-dev, or the headers inside a Debian
// root from python_roots.h), to compare what PyPerf assumes with offsetof /
// sizeof / constants of the interpreter itself.
#pragma once

#include <string>
#include <vector>

#include "PythonVersion.h"
#include "status.h"
#include "support/python_roots.h"

namespace pyperf_test {

struct InterpreterHeaders {
  ebpf::pyperf::PythonVersion version;
  std::string include_dir;  // INCLUDEPY, as the host sees it
  std::string sysroot;      // "" or the root whose /usr/include completes them
  // The CPython configuration macros its core was compiled with that no
  // header records (-D_Py_TIER2=3 -D_Py_JIT for a JIT build: they add
  // interpreter and thread-state fields), from sysconfig's PY_CORE_CFLAGS.
  std::vector<std::string> core_defines;
};

// Asks `python` for its exact version, header directory and core macros;
// with `root`, `python` is a path inside the root and runs chrooted there.
// Works on 2.7.
ebpf::Result<InterpreterHeaders> QueryInterpreterHeaders(const std::string& python,
                                                           const PythonRoot* root = nullptr);

// Compiles `source` with the host's cc against the headers and runs it;
// returns its stdout. The error holds the compiler's messages and the source.
ebpf::Result<std::string> CompileAndRunProbe(const InterpreterHeaders& headers,
                                               const std::string& source);

}  // namespace pyperf_test
