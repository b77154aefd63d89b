// Compiling small C programs against a CPython's own headers (pyenv's
// include/pythonX.Y, Debian's pythonX.Y-dev, or the headers inside a Debian
// root from python_roots.h), to compare what PyPerf assumes with offsetof /
// sizeof / constants of the interpreter itself.
#pragma once

#include <string>

#include "PythonVersion.h"
#include "status.h"
#include "support/python_roots.h"

namespace pyperf_test {

struct InterpreterHeaders {
  pyperf::PythonVersion version;
  std::string include_dir;  // INCLUDEPY, as the host sees it
  std::string sysroot;      // "" or the root whose /usr/include completes them
};

// Asks `python` for its exact version and header directory; with `root`,
// `python` is a path inside the root and runs chrooted there. Works on 2.7.
pyperf::Result<InterpreterHeaders> QueryInterpreterHeaders(const std::string& python,
                                                           const PythonRoot* root = nullptr);

// Compiles `source` with the host's cc against the headers and runs it;
// returns its stdout. The error holds the compiler's messages and the source.
pyperf::Result<std::string> CompileAndRunProbe(const InterpreterHeaders& headers,
                                               const std::string& source);

}  // namespace pyperf_test
