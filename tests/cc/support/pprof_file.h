// Reading PyPerf's pprof files (--format pprof) back the way a user does, with
// `go tool pprof`, and projecting a sample or a collapsed stack to what pprof
// shows of it.
//
// go runs with HOME, GOCACHE, GOPATH and PPROF_TMPDIR in a temporary directory
// and GOTOOLCHAIN=local, GOPROXY=off, GOFLAGS empty: it never touches the
// network or the user's caches. pprof runs with -symbolize=none: it neither
// looks for the mapped files nor rewrites the names (its default demangling
// drops what looks like C++ parameters and templates, "f(int)" -> "f", from
// functions whose system_name equals their name), so the names read back are
// the ones the file holds.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "profile.pb.h"
#include "support/test_stack.h"

namespace pyperf_test {

// A mapping as `go tool pprof -raw` lists it.
struct PprofRawMapping {
  uint64_t id = 0;
  std::string file;
  std::string build_id;
  bool has_functions = false;  // "[FN]"
};

struct PprofReadback {
  // Why go tool pprof could not be run or failed (with its output), or "".
  std::string error;
  std::string top;     // `go tool pprof -top -sample_index=samples` output
  std::string traces;  // `-traces` output
  std::string raw;     // `-raw` output
  // Sums of the samples' values, from -raw (exact, where -top rounds).
  uint64_t total_samples = 0;
  int64_t total_cpu_ns = 0;
  // -traces parsed: "comm-pid/tid;f1;f2;..." (root first; the head made of
  // the sample's comm, pid and tid labels, "" for a missing comm, as pprof
  // drops empty labels; left out with its ';' when the sample has no labels),
  // function names as pprof prints them -> the sum
  // of the counts of the samples printed so.
  std::map<std::string, uint64_t> stacks;
  // -traces samples whose labels were not exactly one comm, pid and tid
  // (each with its text), and lines -traces printed that could not be read.
  std::vector<std::string> unlabeled_samples;
  std::vector<std::string> unreadable_lines;
  std::vector<PprofRawMapping> mappings;  // -raw's mappings
};

// The profile in the gzip'd file at `path`, as PyPerf wrote it; a test
// failure if it is not one.
perftools::profiles::Profile DecodePprofFile(const std::string& path);

// Runs `go tool pprof` -top, -traces and -raw on the file at `path`, with
// `extra_args` (e.g. "-tagfocus=pid=42") before the file.
PprofReadback ReadPprofWithGoTool(const std::string& path,
                                  const std::vector<std::string>& extra_args = {});

// What pprof's -traces shows of a sample, in PprofReadback::stacks' form: the
// head ("comm-pid/tid"), then each frame's function name as StackSpeller's
// DisplayName spells it (a Python frame's "calltree.Worker.spin", any other
// frame's text), escaped as the collapsed text escapes it (';' and line
// breaks are '_'); "<unknown>" for an empty name; the kNoFrames marker for a
// sample without frames. Text that is not UTF-8 as pprof files hold it
// (U+FFFD).
std::string PprofViewOfStack(const TestStack& stack);

// The same of a stack PyPerf wrote in a collapsed file (a collapsed line
// without its count), read as gProfiler reads it: the same view (its names
// are escaped already). "<not a collapsed stack: ...>" for a text that is
// not one.
std::string PprofViewOfCollapsedStack(std::string_view collapsed_stack);

}  // namespace pyperf_test
