// The CPython layouts the end-to-end tests run on every version: pyenv's 2.7
// .. 3.13 (shared libpython), Debian's /usr/bin/python3.11 (static,
// non-PIE), Debian trixie's 3.13 and sid's 3.14 and 3.15 as containers (roots
// of scripts/python-roots.sh), sid's shared libpython3.14 and libpython3.15
// loaded by a program that is no Python, uWSGI's python3 plugin and a pyenv
// interpreter whose libpython was deleted after it started. The list is data;
// how each kind is started is up to the test (test_e2e_versions.cc starts
// every kind, test_e2e_code_reuse.cc the host and container interpreters).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace pyperf_test {

enum class TargetKind {
  kHost,        // an interpreter on the host running calltree.py
  kContainer,   // python3.X in a Debian root, as a container, running calltree.py
  kEmbedded,    // the root's shared libpython3.X run by embedding_host, as a container
  kDeletedLib,  // pyenv's interpreter with its libpython copied, loaded, then deleted
  kUwsgi,       // uWSGI's python3 plugin running versions_uwsgi_app.py
};

struct Target {
  std::string name;  // test name suffix
  TargetKind kind;
  // pyenv minor or interpreter path (host, deleted), root (container:
  // EnsurePythonRoot's "SUITE" or "SUITE/PYTHON")
  std::string spec;
  // How the eval loop's native frame starts where the binary names no symbol
  // for it (Debian's stripped executables: "python3.14+0x"); empty where it
  // is _PyEval_EvalFrameDefault (PyEval_EvalFrameEx on 2.7).
  std::string unnamed_eval_loop = "";
};

// Every layout, in the order test_e2e_versions.cc's tests list them.
const std::vector<Target>& Targets();

// The kinds that run inside a Debian root, as a container.
bool InContainer(TargetKind kind);

// GoogleTest prints a Target parameter by its name (found by argument-dependent
// lookup, so it lives in the Target's namespace).
void PrintTo(const Target& t, std::ostream* os);

}  // namespace pyperf_test
