// The CPython layouts of the version tests: see version_targets.h.
#include "support/version_targets.h"

#include <ostream>

namespace pyperf_test {

const std::vector<Target>& Targets() {
  static const std::vector<Target> targets = {
      {"pyenv_2_7", TargetKind::kHost, "2.7"},
      {"pyenv_3_6", TargetKind::kHost, "3.6"},
      {"pyenv_3_7", TargetKind::kHost, "3.7"},
      {"pyenv_3_8", TargetKind::kHost, "3.8"},
      {"pyenv_3_9", TargetKind::kHost, "3.9"},
      {"pyenv_3_10", TargetKind::kHost, "3.10"},
      {"pyenv_3_11", TargetKind::kHost, "3.11"},
      {"pyenv_3_12", TargetKind::kHost, "3.12"},
      {"pyenv_3_13", TargetKind::kHost, "3.13"},
      {"debian_3_11", TargetKind::kHost, "/usr/bin/python3.11"},
      {"trixie_3_13_container", TargetKind::kContainer, "trixie"},
      {"sid_3_14_container", TargetKind::kContainer, "sid", "python3.14+0x"},
      {"sid_3_14_shared_libpython", TargetKind::kEmbedded, "sid"},
      {"sid_3_15_container", TargetKind::kContainer, "sid/python3.15", "python3.15+0x"},
      {"sid_3_15_shared_libpython", TargetKind::kEmbedded, "sid/python3.15"},
      {"uwsgi_debian_3_11", TargetKind::kUwsgi, "/usr/bin/uwsgi"},
      {"pyenv_3_12_deleted_libpython", TargetKind::kDeletedLib, "3.12"},
  };
  return targets;
}

bool InContainer(TargetKind kind) {
  return kind == TargetKind::kContainer || kind == TargetKind::kEmbedded;
}

void PrintTo(const Target& t, std::ostream* os) { *os << t.name; }

}  // namespace pyperf_test
