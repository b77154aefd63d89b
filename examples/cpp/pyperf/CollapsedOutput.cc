// CollapsedOutput: see CollapsedOutput.h.
#include "CollapsedOutput.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <ctime>
#include <utility>
#include <vector>

namespace pyperf {
namespace {

int64_t CentisSinceEpoch(CollapsedOutput::Clock::time_point time) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(time.time_since_epoch()).count();
  return ms / 10;
}

std::string FormatCentis(int64_t centis) {
  time_t seconds = static_cast<time_t>(centis / 100);
  struct tm utc {};
  gmtime_r(&seconds, &utc);
  char buf[32];
  size_t n = strftime(buf, sizeof(buf), "%Y%m%d%H%M%S", &utc);
  snprintf(buf + n, sizeof(buf) - n, "%02d", static_cast<int>(centis % 100));
  return buf;
}

std::string ErrnoText(int err) { return std::string(strerror(err)); }

// rename() that fails with EEXIST instead of replacing `to`: an existing
// PATH.<stamp> may be a dump gProfiler has not read yet. Filesystems without
// RENAME_NOREPLACE get a check-then-rename, which is enough since only this
// process creates such names.
int RenameNoReplace(const char* from, const char* to) {
  if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return -1;
  if (access(to, F_OK) == 0) {
    errno = EEXIST;
    return -1;
  }
  return rename(from, to);
}

}  // namespace

CollapsedOutput::CollapsedOutput(std::string path, std::FILE* stream)
    : path_(std::move(path)), stream_(stream) {}

CollapsedOutput::~CollapsedOutput() = default;

std::string CollapsedOutput::Timestamp(Clock::time_point time) {
  return FormatCentis(CentisSinceEpoch(time));
}

Status CollapsedOutput::Start(Clock::time_point interval_start) {
  interval_start_ = interval_start;
  if (path_.empty()) return Status::Ok();
  return OpenTransient();
}

Status CollapsedOutput::OpenTransient() {
  file_.reset();
  // "e": close-on-exec, so helpers we spawn do not inherit the output file.
  file_.reset(std::fopen(path_.c_str(), "we"));
  if (!file_) {
    return Status::Error("cannot create output file " + path_ + ": " + ErrnoText(errno) +
                         " (check that its directory exists and is writable)");
  }
  return Status::Ok();
}

void CollapsedOutput::Add(const std::string& stack, uint64_t count) {
  auto it = counts_.find(stack);  // no allocation for a stack already seen
  if (it == counts_.end()) {
    counts_.emplace(stack, count);
  } else {
    it->second += count;
  }
  pending_samples_ += count;
}

bool CollapsedOutput::WriteLines(std::FILE* out, DumpInfo* info) const {
  // Sorted, so output is deterministic and easy to compare.
  std::vector<const std::pair<const std::string, uint64_t>*> entries;
  entries.reserve(counts_.size());
  for (const auto& entry : counts_) entries.push_back(&entry);
  std::sort(entries.begin(), entries.end(),
            [](const auto* a, const auto* b) { return a->first < b->first; });

  std::string sanitized;
  for (const auto* entry : entries) {
    const std::string* stack = &entry->first;
    // A newline inside a stack would split the line and corrupt the protocol.
    if (stack->find_first_of("\r\n") != std::string::npos) {
      sanitized = *stack;
      std::replace_if(
          sanitized.begin(), sanitized.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
      stack = &sanitized;
    }
    if (std::fwrite(stack->data(), 1, stack->size(), out) != stack->size()) return false;
    if (std::fprintf(out, " %" PRIu64 "\n", entry->second) < 0) return false;
    info->samples += entry->second;
    info->lines++;
  }
  return std::fflush(out) == 0 && !std::ferror(out);
}

void CollapsedOutput::Clear() {
  counts_.clear();
  pending_samples_ = 0;
}

Result<std::string> CollapsedOutput::RenameTransient(int64_t centis) {
  centis = std::max(centis, last_stamp_centis_ + 1);
  // A leftover file may hold a name; bump past it (bounded: 10 s of names).
  for (int attempt = 0; attempt < 1000; ++attempt, ++centis) {
    std::string target = path_ + "." + FormatCentis(centis);
    if (RenameNoReplace(path_.c_str(), target.c_str()) == 0) {
      last_stamp_centis_ = centis;
      return target;
    }
    if (errno != EEXIST) {
      return Status::Error("cannot rename " + path_ + " to " + target + ": " + ErrnoText(errno) +
                           " (check that its directory exists and is writable)");
    }
  }
  return Status::Error("cannot rename " + path_ + ": 1000 consecutive time-stamped names exist");
}

Result<CollapsedOutput::DumpInfo> CollapsedOutput::Dump(Clock::time_point now) {
  return DumpInterval(now, /*reopen=*/true);
}

Result<CollapsedOutput::DumpInfo> CollapsedOutput::FinalDump(Clock::time_point now) {
  return DumpInterval(now, /*reopen=*/false);
}

Result<CollapsedOutput::DumpInfo> CollapsedOutput::DumpInterval(Clock::time_point now,
                                                                bool reopen) {
  DumpInfo info;
  if (path_.empty()) {
    if (stream_ == nullptr) return Status::Error("no output path and no output stream");
    bool ok = WriteLines(stream_, &info);
    int err = errno;
    // A stream cannot take back what it emitted: drop rather than repeat.
    Clear();
    interval_start_ = now;
    if (!ok) return Status::Error("cannot write collapsed stacks: " + ErrnoText(err));
    return info;
  }

  // The lines go to the transient PATH and reach a PATH.<stamp> name only by
  // the rename, once every byte was written and the close reported no error:
  // a file under a name gProfiler reads is always complete. (No fsync: a
  // reader on this host sees the written pages, and an fsync could stall the
  // thread that polls the events for as long as the disk is busy.)
  Status written = WriteTransient(&info);
  Result<std::string> renamed = written.ok() ? RenameTransient(CentisSinceEpoch(interval_start_))
                                             : Result<std::string>(written);
  if (!renamed.ok()) {
    // PATH may hold part of the lines: empty it for the next dump, or, at the
    // last one, remove it (a PATH left behind would tell a caller that waits
    // for it that the next PyPerf on this PATH is ready before it is).
    if (reopen) {
      Status reopened = OpenTransient();
      (void)reopened;  // the first error is the one to report; the next Dump retries
    } else {
      file_.reset();
      unlink(path_.c_str());
    }
    const char* fate = reopen ? " samples are kept for the next dump" : " samples are lost";
    return Status::Error(renamed.error() + "; its " + std::to_string(pending_samples_) + fate);
  }
  info.file = std::move(renamed).value();
  // Delivered: these samples belong to that file and to no later one.
  Clear();
  interval_start_ = now;
  if (!reopen) return info;
  Status reopened = OpenTransient();
  if (!reopened.ok()) info.warning = reopened.message() + "; the next dump tries again";
  return info;
}

Status CollapsedOutput::WriteTransient(DumpInfo* info) {
  // A previous failure may have left no transient file open.
  if (!file_) {
    Status opened = OpenTransient();
    if (!opened.ok()) return opened;
  }
  bool written = WriteLines(file_.get(), info);
  int err = errno;
  // fclose can report a delayed write error (e.g. ENOSPC on NFS), so check it too.
  std::FILE* raw = file_.release();
  if (std::fclose(raw) != 0 && written) {
    written = false;
    err = errno;
  }
  if (!written) {
    *info = DumpInfo{};
    return Status::Error("cannot write " + path_ + ": " + ErrnoText(err));
  }
  return Status::Ok();
}

}  // namespace pyperf
