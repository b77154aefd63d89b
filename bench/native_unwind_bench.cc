// Native unwinding and symbolization cost over recorded stack snapshots of
// real processes (a C++ chain with a debug-linked and with a stripped shared
// library, and Debian's python3 calling C through ctypes/libffi), replayed
// offline with their mapped files. Each snapshot is measured with the cache
// on (steady state: warmed first) and off (every frame resolved from scratch),
// in one run, reporting CPU time per frame and per stack, and the share of
// unwinds that took the fast path (cached rules only, no libunwind).
//
//   cmake --build build --target native_snapshots native_unwind_bench
//   build/bench/native_unwind_bench [--snapshots DIR]
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <vector>

#include "native_snapshot_files.h"
#include "native_unwinder.h"

namespace {

std::string g_snapshot_dir = pyperf_fixture::SnapshotDir();

void UnwindSnapshot(benchmark::State& state, const std::string& name, bool cached) {
  ebpf::NativeUnwinderOptions options;
  options.stop_symbols = {"_PyEval_EvalFrameDefault", "PyEval_EvalFrameEx"};
  options.cache_enabled = cached;
  ebpf::NativeUnwinder unwinder(options);
  auto snapshot = pyperf_fixture::LoadRecorded(g_snapshot_dir + "/" + name, &unwinder);
  if (!snapshot.ok()) {
    state.SkipWithError(
        ("no recorded snapshot: " + snapshot.error() + " (build the native_snapshots target)")
            .c_str());
    return;
  }
  ebpf::NativeSnapshot view = snapshot->View();
  std::vector<ebpf::NativeFrame> frames;
  if (cached) {
    for (int i = 0; i < 3; ++i) unwinder.Unwind(view, &frames);  // warm the caches
  }
  size_t frame_count = 0;
  for (auto _ : state) {
    unwinder.Unwind(view, &frames);
    frame_count += frames.size();
    benchmark::DoNotOptimize(frames.data());
    if (cached) unwinder.cache_eviction();  // the once-per-round pass, as in PyPerf
  }
  double per_stack = static_cast<double>(frame_count) / static_cast<double>(state.iterations());
  state.counters["frames/stack"] = per_stack;
  // CPU seconds per frame (printed with an SI prefix: "290n" = 290 ns).
  state.counters["time/frame"] = benchmark::Counter(
      static_cast<double>(frame_count), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  ebpf::NativeUnwinderStats stats = unwinder.stats();
  state.counters["hit_rate"] = stats.names.hit_rate();
  // Unwinds done from the cached rules alone, without libunwind.
  state.counters["fast_path"] =
      stats.unwinds ? static_cast<double>(stats.fast_unwinds) / static_cast<double>(stats.unwinds)
                    : 0.0;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--snapshots") == 0) {
      g_snapshot_dir = argv[i + 1];
      for (int j = i; j + 2 < argc + 1; ++j) argv[j] = argv[j + 2];
      argc -= 2;
      break;
    }
  }
  for (const char* name : {"cxx_debuglink", "cxx_stripped", "python3_ctypes"}) {
    for (bool cached : {false, true}) {
      std::string label = std::string(name) + (cached ? "/cached" : "/uncached");
      benchmark::RegisterBenchmark(label.c_str(), [name, cached](benchmark::State& state) {
        UnwindSnapshot(state, name, cached);
      })->Unit(benchmark::kMicrosecond);
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
