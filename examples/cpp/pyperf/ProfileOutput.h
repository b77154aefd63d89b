// ProfileOutput: the output protocol gProfiler's PythonEbpfProfiler expects.
//
// Samples (Sample.h) are counted as they are: equal samples share a count.
// Their strings are interned in the interval's FrameDictionary, emptied with
// the samples once a dump delivered them. Each dump is written in every
// format asked for (--format, ProfileEncoder.h); collapsed, the default, is
// one line per distinct stack, "<stack> <count>", sorted by stack.
//
// With an output PATH:
//  - Start() creates the transient file PATH. gProfiler waits for PATH to
//    exist before it sends any dump signal, so it must exist from then on.
//  - Dump() writes the interval's lines into PATH, closes it and renames it
//    atomically to PATH.<YYYYmmddHHMMSS><cc> (UTC start of the interval, cc =
//    centiseconds), then creates a fresh PATH. gProfiler globs "PATH.*" and,
//    if it finds several, keeps the one that sorts last, so names are made to
//    sort by time: a name that would not sort after the previous one is bumped
//    by a centisecond. Nothing else named PATH.* is ever created.
//    A format other than collapsed appends its extension after the stamp
//    (PATH.<stamp>.html); with several formats, each is written to PATH and
//    renamed in turn, all under one stamp, in the order they were given.
// Without a PATH, Dump() writes the lines to a stream (stdout by default), in
// one format.
//
// A PATH.<stamp> file is always complete: the lines are written to PATH, and
// PATH is renamed only once every write and the close succeeded. A dump that
// fails (a write error such as ENOSPC, a missing directory) leaves no
// PATH.<stamp>, and PATH is created afresh, empty, when it can be: PATH holds
// part of the lines only while a dump is being written.
//
// Every sample is written exactly once: a failed Dump keeps the interval's
// samples (and its start time) so the next Dump writes them; a successful one
// clears them. A failed FinalDump loses them, and removes PATH. (On a stream,
// a failed write may have been partly emitted and cannot be taken back, so
// the samples are dropped rather than repeated. With several formats, once
// one file was delivered a later failure drops the samples too: they are in
// that file and cannot be given to the others alone.)
//
// Not thread-safe: Add and Dump are called from the thread that polls events.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ProfileEncoder.h"
#include "Sample.h"
#include "status.h"

namespace ebpf::pyperf {

class ProfileOutput {
 public:
  using Clock = std::chrono::system_clock;

  // Writes to the file protocol at `path`, or to `stream` if `path` is empty.
  // The stream is not owned. `formats` is not empty, and has one format when
  // writing to a stream.
  explicit ProfileOutput(std::string path, std::FILE* stream = stdout,
                         const std::vector<ProfileFormat>& formats = {ProfileFormat::kCollapsed});
  ~ProfileOutput();
  ProfileOutput(const ProfileOutput&) = delete;
  ProfileOutput& operator=(const ProfileOutput&) = delete;

  // Begins the first interval at `interval_start` and, with a path, creates
  // (truncates) the transient file PATH.
  Status Start(Clock::time_point interval_start = Clock::now());

  // The dictionary the samples given to Add name their strings in.
  FrameDictionary& dictionary() { return dictionary_; }

  // Counts `count` samples equal to `sample`. No allocation once an equal
  // sample has been seen in this interval.
  void Add(const Sample& sample, uint64_t count = 1);

  // The CPU time one sample stands for (DumpedProfile::sample_period_ns).
  void set_sample_period_ns(uint64_t ns) { sample_period_ns_ = ns; }

  struct DumpInfo {
    std::string file;  // the first format's renamed file; empty when writing to a stream
    std::vector<std::string> files;  // every renamed file, in format order
    uint64_t samples = 0;            // sum of the counts written
    uint64_t lines = 0;              // distinct samples written
    // Set when the file was delivered but a fresh PATH could not be created
    // (the next Dump tries again): a problem to report, not a failed dump.
    std::string warning;
  };
  // Ends the current interval (see the file comment); the next interval starts
  // at `now`. An error says what failed; see the file comment for what
  // happens to the samples; it ends with how many samples were kept (or, at
  // the FinalDump, lost). If the file was delivered but a fresh PATH could
  // not be created, the dump succeeded and DumpInfo::warning says so.
  Result<DumpInfo> Dump(Clock::time_point now = Clock::now());
  // The last dump before exit: as Dump, but no fresh PATH is left behind, so
  // a caller that runs PyPerf again on the same PATH (gProfiler's start-up
  // check, then the real run) waits for the new process's file.
  Result<DumpInfo> FinalDump(Clock::time_point now = Clock::now());

  uint64_t pending_samples() const { return pending_samples_; }
  size_t pending_stacks() const { return counts_.size(); }
  const std::string& path() const { return path_; }

  // "YYYYmmddHHMMSScc" in UTC: the suffix of a dumped file's name.
  static std::string Timestamp(Clock::time_point time);

 private:
  struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

  Status OpenTransient();
  Result<DumpInfo> DumpInterval(Clock::time_point now, bool reopen);
  // The interval as the encoders see it.
  DumpedProfile Collect(Clock::time_point now) const;
  // Writes one format's file to PATH (creating it if a failure left none) and
  // closes it; an error if any write or the close failed.
  Status WriteTransient(ProfileEncoder* encoder, const DumpedProfile& profile);
  // The first stamp at or after `centis` (centiseconds since the epoch) that
  // sorts after the previous dump and under which no format's name exists.
  int64_t FreeStamp(int64_t centis) const;
  // Renames PATH to PATH.<stamp><extension>.
  Result<std::string> RenameTransient(int64_t stamp, std::string_view extension);
  void Clear();

  std::string path_;
  std::FILE* stream_;
  FilePtr file_;
  Clock::time_point interval_start_;
  int64_t last_stamp_centis_ = -1;  // stamp of the last delivered file
  FrameDictionary dictionary_;
  std::unordered_map<Sample, uint64_t, SampleHash> counts_;
  uint64_t pending_samples_ = 0;
  std::vector<std::unique_ptr<ProfileEncoder>> encoders_;
  uint64_t sample_period_ns_ = 0;
};

}  // namespace ebpf::pyperf
