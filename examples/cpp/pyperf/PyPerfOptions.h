// PyPerfOptions: PyPerf's command line. gProfiler's PythonEbpfProfiler starts
// PyPerf with a fixed set of flags (--output, -F, --duration, --fs-offset,
// --stack-offset, --events-buffer-pages, --symbols-map-size,
// --insert-dso-name, --user-stacks-pages, -v), so those must keep their
// spelling and meaning; the rest are ours. Parsing never prints and never
// exits: it returns what main should do (run, print help, or fail with one
// line on stderr and exit status 2).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ProfileEncoder.h"

namespace ebpf::pyperf {

// Which line a Python frame reports: the function's first line (stable, so
// samples of one function aggregate; what the original PyPerf printed) or the
// line being executed when the sample was taken.
enum class LineNumberMode { kFirst, kCurrent };

// Where native frames go: above the innermost Python frame only (gProfiler's
// layout), or the whole native stack with each eval-loop frame replaced by the
// Python frames it ran (StackInterleaver.h).
enum class NativeFramesMode { kLeaf, kInterleaved };

// How the CPU-clock perf event is sampled: every N ns, or N times a second.
enum class SampleMode { kPeriod, kFrequency };

inline constexpr uint64_t kDefaultSamplePeriodNs = 1000000;  // 1 ms = 1 kHz
// A "page" of user stack is 4 KiB. The BPF event carries the copied stack, and
// a perf record is at most 64 KiB (its size is a u16), so 15 pages (60 KiB)
// leave room for the rest of the event.
inline constexpr uint32_t kUserStackPageBytes = 4096;
inline constexpr uint32_t kMaxUserStacksPages = 15;
// --native-frames interleaved unwinds to the stack's bottom: the pages copied
// unless --user-stacks-pages says otherwise.
inline constexpr uint32_t kInterleavedUserStacksPages = 8;

struct Options {
  std::vector<int> pids;  // -p/--pid; empty means every Python process

  SampleMode sample_mode = SampleMode::kPeriod;
  uint64_t sample_period_ns = kDefaultSamplePeriodNs;  // -c/--sample-rate (kPeriod)
  uint64_t sample_frequency_hz = 0;                    // -F/--frequency (kFrequency)

  uint64_t duration_seconds = 0;            // -d/--duration; 0 = until signalled
  uint64_t update_interval_seconds = 10;    // --update-interval: process rescan period
  uint32_t symbols_map_size = 32768;        // --symbols-map-size (BPF map entries)
  uint32_t events_buffer_pages = 64;        // --events-buffer-pages, per CPU, power of 2
  uint32_t kernel_stacks_map_size = 32768;  // --kernel-stacks-map-size
  uint32_t user_stacks_pages = 2;           // --user-stacks-pages; 0 = no native stacks
  int verbosity = 0;                        // -v/--verbose, 0-4

  std::string output_path;  // -o/--output; empty = collapsed stacks on stdout
  // --format: what each dump is written as, in this order (one file each).
  std::vector<ProfileFormat> formats = {ProfileFormat::kCollapsed};

  // Overrides of task_struct offsets that are otherwise computed from BTF.
  std::optional<uint32_t> fs_offset;     // --fs-offset
  std::optional<uint32_t> stack_offset;  // --stack-offset

  bool insert_dso_name = false;                          // --insert-dso-name
  LineNumberMode line_numbers = LineNumberMode::kFirst;  // --line-numbers
  NativeFramesMode native_frames = NativeFramesMode::kLeaf;  // --native-frames
  bool async_tasks = false;                                  // --async-tasks

  // The native symbol cache (shared by every process mapping the same file).
  bool native_cache = true;                   // --native-cache on|off
  uint64_t native_cache_entries = 65536;      // --native-cache-entries
  uint64_t native_cache_bytes = 16ull << 20;  // --native-cache-bytes (16 MiB)
  uint32_t native_cache_max_age = 600;        // --native-cache-max-age (rounds)

  // Values that were accepted but adjusted (e.g. a capped page count); main
  // prints them to stderr so the adjustment is never silent.
  std::vector<std::string> warnings;
};

// What main should do after parsing.
struct CommandLine {
  enum class Action { kRun, kPrintHelp, kFail };
  Action action = Action::kRun;
  Options options;  // meaningful for kRun
  // kPrintHelp: the help text (for stdout). kFail: the complete error line
  // "PyPerf: error: <what> (see --help)", without a trailing newline (stderr).
  std::string message;
  int exit_code = 0;  // 0 for kRun and kPrintHelp, 2 for kFail
};

inline constexpr int kUsageExitCode = 2;

// Parses argv as main receives it (argv[0] is the program name).
CommandLine ParseCommandLine(int argc, const char* const argv[]);
// Same, for the arguments after the program name (convenient in tests).
CommandLine ParseCommandLine(const std::vector<std::string>& args);

// The --help text: every flag with its default and meaning.
std::string HelpText();

}  // namespace ebpf::pyperf
