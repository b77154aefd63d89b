// Reading PyPerf's pprof files (--format pprof) back the way a user does, with
// `go tool pprof`, and projecting a collapsed stack to what pprof shows of it.
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

// Runs `go tool pprof` -top, -traces and -raw on the file at `path`, with
// `extra_args` (e.g. "-tagfocus=pid=42") before the file.
PprofReadback ReadPprofWithGoTool(const std::string& path,
                                  const std::vector<std::string>& extra_args = {});

// What pprof's -traces shows of a stack text PyPerf aggregates (the stack of
// a collapsed line, without its count), in PprofReadback::stacks' form: the
// head, then each frame's function name: a Python frame's "module.Class.
// function" (the whole text if ParsePythonFrameText cannot split it), any
// other frame's text, without suffixes; "<unknown>" for an empty text; the
// kNoFrames marker for a stack without frames. A stack ParseStackText rejects
// is shown as kUnparseableStack (FrameSpelling.h) alone.
std::string PprofViewOfCollapsedStack(std::string_view collapsed_stack);

}  // namespace pyperf_test
