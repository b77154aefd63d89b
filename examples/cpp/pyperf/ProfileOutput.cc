// ProfileOutput: see ProfileOutput.h.
#include "ProfileOutput.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <ctime>
#include <utility>
#include <tuple>
#include <vector>

#include "FrameSpelling.h"
#include "ProfileEncoders.h"

namespace ebpf::pyperf {
namespace {

int64_t CentisSinceEpoch(ProfileOutput::Clock::time_point time) {
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

ProfileOutput::ProfileOutput(std::string path, std::FILE* stream,
                             const std::vector<ProfileFormat>& formats)
    : path_(std::move(path)), stream_(stream) {
  for (ProfileFormat format : formats) encoders_.push_back(MakeProfileEncoder(format));
}

ProfileOutput::~ProfileOutput() = default;

std::string ProfileOutput::Timestamp(Clock::time_point time) {
  return FormatCentis(CentisSinceEpoch(time));
}

Status ProfileOutput::Start(Clock::time_point interval_start) {
  interval_start_ = interval_start;
  if (path_.empty()) return Status::Ok();
  return OpenTransient();
}

Status ProfileOutput::OpenTransient() {
  file_.reset();
  // "e": close-on-exec, so helpers we spawn do not inherit the output file.
  file_.reset(std::fopen(path_.c_str(), "we"));
  if (!file_) {
    return Status::Error("cannot create output file " + path_ + ": " + ErrnoText(errno) +
                         " (check that its directory exists and is writable)");
  }
  return Status::Ok();
}

void ProfileOutput::Add(const Sample& sample, uint64_t count) {
  auto it = counts_.find(sample);  // no allocation for a sample already seen
  if (it == counts_.end()) {
    counts_.emplace(sample, count);
  } else {
    it->second += count;
  }
  pending_samples_ += count;
}

DumpedProfile ProfileOutput::Collect(Clock::time_point now) const {
  DumpedProfile profile;
  // In the order of the collapsed lines, so output is deterministic and every
  // format lists stacks alike: spelled once here to sort.
  StackSpeller speller(dictionary_);
  std::vector<std::pair<std::string, StackCount>> spelled;
  spelled.reserve(counts_.size());
  for (const auto& [sample, count] : counts_) {
    spelled.emplace_back(std::string(), StackCount{&sample, count});
    speller.AppendCollapsedStack(sample, &spelled.back().first);
  }
  std::sort(spelled.begin(), spelled.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    // The same line: native addresses differ; any fixed order will do.
    const auto& fa = a.second.sample->frames;
    const auto& fb = b.second.sample->frames;
    return std::lexicographical_compare(
        fa.begin(), fa.end(), fb.begin(), fb.end(), [](const SampleFrame& x, const SampleFrame& y) {
          return std::tie(x.object, x.address) < std::tie(y.object, y.address);
        });
  });
  profile.stacks.reserve(spelled.size());
  for (const auto& entry : spelled) profile.stacks.push_back(entry.second);
  profile.dictionary = &dictionary_;
  profile.start = interval_start_;
  profile.end = now;
  profile.sample_period_ns = sample_period_ns_;
  return profile;
}

void ProfileOutput::Clear() {
  counts_.clear();
  dictionary_.Clear();
  pending_samples_ = 0;
}

int64_t ProfileOutput::FreeStamp(int64_t centis) const {
  centis = std::max(centis, last_stamp_centis_ + 1);
  // A leftover file may hold a name; bump past it (bounded: 10 s of names;
  // past that the rename reports the name taken).
  for (int attempt = 0; attempt < 1000; ++attempt, ++centis) {
    bool free = true;
    for (const auto& encoder : encoders_) {
      std::string name = path_ + "." + FormatCentis(centis) +
                         std::string(ProfileFormatExtension(encoder->format()));
      if (access(name.c_str(), F_OK) == 0) free = false;
    }
    if (free) break;
  }
  return centis;
}

Result<std::string> ProfileOutput::RenameTransient(int64_t stamp, std::string_view extension) {
  std::string target = path_ + "." + FormatCentis(stamp) + std::string(extension);
  if (RenameNoReplace(path_.c_str(), target.c_str()) == 0) return target;
  return Status::Error("cannot rename " + path_ + " to " + target + ": " + ErrnoText(errno) +
                       " (check that its directory exists and is writable)");
}

Result<ProfileOutput::DumpInfo> ProfileOutput::Dump(Clock::time_point now) {
  return DumpInterval(now, /*reopen=*/true);
}

Result<ProfileOutput::DumpInfo> ProfileOutput::FinalDump(Clock::time_point now) {
  return DumpInterval(now, /*reopen=*/false);
}

Result<ProfileOutput::DumpInfo> ProfileOutput::DumpInterval(Clock::time_point now, bool reopen) {
  DumpInfo info;
  for (const auto& entry : counts_) {
    info.samples += entry.second;
    info.lines++;
  }
  const DumpedProfile profile = Collect(now);
  if (path_.empty()) {
    if (stream_ == nullptr) return Status::Error("no output path and no output stream");
    bool ok = encoders_.front()->Write(profile, stream_);
    ok = ok && std::fflush(stream_) == 0 && !std::ferror(stream_);
    int err = errno;
    // A stream cannot take back what it emitted: drop rather than repeat.
    Clear();
    interval_start_ = now;
    if (!ok) {
      return Status::Error("cannot write " +
                           std::string(ProfileFormatName(encoders_.front()->format())) +
                           " output: " + ErrnoText(err));
    }
    return info;
  }

  // Each format goes to the transient PATH and reaches a PATH.<stamp> name
  // only by the rename, once every byte was written and the close reported
  // no error: a file under a name gProfiler reads is always complete. (No
  // fsync: a reader on this host sees the written pages, and an fsync could
  // stall the thread that polls the events for as long as the disk is busy.)
  const int64_t stamp = FreeStamp(CentisSinceEpoch(interval_start_));
  Status failed = Status::Ok();
  for (const auto& encoder : encoders_) {
    Status written = WriteTransient(encoder.get(), profile);
    Result<std::string> renamed =
        written.ok() ? RenameTransient(stamp, ProfileFormatExtension(encoder->format()))
                     : Result<std::string>(written);
    if (!renamed.ok()) {
      failed = Status::Error(renamed.error());
      break;
    }
    info.files.push_back(std::move(renamed).value());
    if (reopen || &encoder != &encoders_.back()) {
      Status reopened = OpenTransient();
      if (!reopened.ok() && &encoder == &encoders_.back()) {
        info.warning = reopened.message() + "; the next dump tries again";
      }
    }
  }
  if (!info.files.empty()) last_stamp_centis_ = stamp;
  if (!failed.ok()) {
    // PATH may hold part of a file: empty it for the next dump, or, at the
    // last one, remove it (a PATH left behind would tell a caller that waits
    // for it that the next PyPerf on this PATH is ready before it is).
    if (reopen) {
      Status reopened = OpenTransient();
      (void)reopened;  // the first error is the one to report; the next Dump retries
    } else {
      file_.reset();
      unlink(path_.c_str());
    }
    std::string count = std::to_string(pending_samples_);
    if (!info.files.empty()) {
      // Delivered in some formats: keeping them would repeat them there.
      std::string message = failed.message() + "; its " + count + " samples are only in";
      for (const auto& file : info.files) message += " " + file;
      Clear();
      interval_start_ = now;
      return Status::Error(message);
    }
    const char* fate = reopen ? " samples are kept for the next dump" : " samples are lost";
    return Status::Error(failed.message() + "; its " + count + fate);
  }
  info.file = info.files.front();
  // Delivered: these samples belong to those files and to no later one.
  Clear();
  interval_start_ = now;
  return info;
}

Status ProfileOutput::WriteTransient(ProfileEncoder* encoder, const DumpedProfile& profile) {
  // A previous failure may have left no transient file open.
  if (!file_) {
    Status opened = OpenTransient();
    if (!opened.ok()) return opened;
  }
  bool written = encoder->Write(profile, file_.get());
  written = written && std::fflush(file_.get()) == 0 && !std::ferror(file_.get());
  int err = errno;
  // fclose can report a delayed write error (e.g. ENOSPC on NFS), so check it too.
  std::FILE* raw = file_.release();
  if (std::fclose(raw) != 0 && written) {
    written = false;
    err = errno;
  }
  if (!written) return Status::Error("cannot write " + path_ + ": " + ErrnoText(err));
  return Status::Ok();
}

}  // namespace ebpf::pyperf
