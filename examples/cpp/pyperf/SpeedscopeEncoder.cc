// SpeedscopeEncoder: see SpeedscopeEncoder.h. One pass numbers the distinct
// frames (FrameTable) and groups the samples by thread; a second writes the
// file through a buffer, so memory follows the dump's size.
#include "SpeedscopeEncoder.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "FrameIdentity.h"
#include "FrameSpelling.h"
#include "JsonText.h"

namespace ebpf::pyperf {
namespace {

uint64_t SaturatingMultiply(uint64_t a, uint64_t b) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a)
    return std::numeric_limits<uint64_t>::max();
  return a * b;
}

uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  return b > std::numeric_limits<uint64_t>::max() - a ? std::numeric_limits<uint64_t>::max()
                                                      : a + b;
}

// Buffered output to a FILE*: remembers the first write error.
class JsonWriter {
 public:
  explicit JsonWriter(std::FILE* out) : out_(out) { buffer_.reserve(kFlushAt + 4096); }
  std::string& buffer() { return buffer_; }
  void Raw(std::string_view text) {
    buffer_.append(text);
    MaybeFlush();
  }
  void String(std::string_view text) {
    AppendJsonString(text, &buffer_);
    MaybeFlush();
  }
  void Number(uint64_t value) {
    char text[24];
    int n = snprintf(text, sizeof(text), "%" PRIu64, value);
    buffer_.append(text, n);
    MaybeFlush();
  }
  bool Finish() {
    Flush();
    return ok_;
  }

 private:
  static constexpr size_t kFlushAt = 1 << 16;
  void MaybeFlush() {
    if (buffer_.size() >= kFlushAt) Flush();
  }
  void Flush() {
    if (ok_ && !buffer_.empty() &&
        std::fwrite(buffer_.data(), 1, buffer_.size(), out_) != buffer_.size())
      ok_ = false;
    buffer_.clear();
  }
  std::FILE* out_;
  std::string buffer_;
  bool ok_ = true;
};

struct ProfileSample {
  size_t first_frame;  // into the flat frame number list
  size_t frame_count;
  uint64_t weight;
};

struct Profile {
  std::string name;
  std::vector<ProfileSample> samples;
  uint64_t total = 0;
};

// A Python frame by its display name, file and line; any other by its text
// and suffix, so its kind stays visible.
void WriteFrame(const SampleFrame& frame, StackSpeller* speller, std::string* name,
                JsonWriter* out) {
  const bool python = frame.kind == FrameKind::kPython;
  name->assign(speller->DisplayName(frame));
  if (!python) name->append(FrameSuffix(frame.kind));
  out->Raw("{\"name\":");
  out->String(*name);
  if (python) {
    out->Raw(",\"file\":");
    out->String(speller->Text(frame.file));
    out->Raw(",\"line\":");
    out->Number(static_cast<uint64_t>(frame.line < 0 ? 0 : frame.line));
  }
  out->Raw("}");
}

class SpeedscopeEncoder final : public ProfileEncoder {
 public:
  ProfileFormat format() const override { return ProfileFormat::kSpeedscope; }

  bool Write(const DumpedProfile& dump, std::FILE* out) override {
    const bool timed = dump.sample_period_ns != 0;
    const uint64_t period = timed ? dump.sample_period_ns : 1;
    StackSpeller speller(*dump.dictionary);

    FrameTable frames;
    std::vector<uint32_t> stack_frames;  // every sample's frame numbers, root first
    // Threads by pid, tid and first token (a thread renamed within the
    // interval has one profile per name), in the profiles' order.
    std::map<std::tuple<uint32_t, uint32_t, std::string>, Profile> threads;
    std::string thread;
    for (const StackCount& stack : dump.stacks) {
      const Sample& sample = *stack.sample;
      const uint64_t weight = SaturatingMultiply(stack.count, period);
      thread.clear();
      speller.AppendThread(sample, &thread);
      Profile& profile = threads[{sample.pid, sample.tid, thread}];
      if (profile.name.empty()) profile.name = thread;
      profile.total = SaturatingAdd(profile.total, weight);
      const size_t first = stack_frames.size();
      for (const SampleFrame& frame : sample.frames) stack_frames.push_back(frames.Number(frame));
      // Samples that differ only in native addresses are next to each other
      // and one sample here, as they are one collapsed line.
      const size_t n = sample.frames.size();
      if (!profile.samples.empty()) {
        ProfileSample& last = profile.samples.back();
        const auto last_begin = stack_frames.begin() + last.first_frame;
        if (last.frame_count == n && last.first_frame + n == first &&
            std::equal(last_begin, last_begin + n, stack_frames.begin() + first)) {
          last.weight = SaturatingAdd(last.weight, weight);
          stack_frames.resize(first);
          continue;
        }
      }
      profile.samples.push_back({first, n, weight});
    }

    std::vector<const Profile*> profiles;
    profiles.reserve(threads.size());
    for (const auto& [key, profile] : threads) profiles.push_back(&profile);
    // An empty dump still has one (empty) profile: speedscope cannot open a
    // file without any.
    Profile no_samples;
    no_samples.name = "[No Samples]";
    if (profiles.empty()) profiles.push_back(&no_samples);
    size_t active = 0;
    for (size_t i = 1; i < profiles.size(); ++i)
      if (profiles[i]->total > profiles[active]->total) active = i;

    JsonWriter json(out);
    json.Raw(
        "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\","
        "\"exporter\":\"PyPerf\",\"name\":");
    json.String("PyPerf " + UtcTimeText(dump.start, 3) + " to " + UtcTimeText(dump.end, 3));
    json.Raw(",\"activeProfileIndex\":");
    json.Number(active);
    json.Raw(",\"shared\":{\"frames\":[");
    std::string name;
    for (uint32_t i = 0; i < frames.size(); ++i) {
      if (i) json.Raw(",");
      json.Raw("\n");
      WriteFrame(frames.frame(i), &speller, &name, &json);
    }
    json.Raw("]},\"profiles\":[");
    for (size_t p = 0; p < profiles.size(); ++p) {
      const Profile& profile = *profiles[p];
      json.Raw(p ? ",\n{" : "\n{");
      json.Raw("\"type\":\"sampled\",\"name\":");
      json.String(profile.name);
      json.Raw(timed ? ",\"unit\":\"nanoseconds\"" : ",\"unit\":\"none\"");
      json.Raw(",\"startValue\":0,\"endValue\":");
      json.Number(profile.total);
      json.Raw(",\"samples\":[");
      for (size_t s = 0; s < profile.samples.size(); ++s) {
        const ProfileSample& sample = profile.samples[s];
        json.Raw(s ? ",\n[" : "\n[");
        for (size_t f = 0; f < sample.frame_count; ++f) {
          if (f) json.Raw(",");
          json.Number(stack_frames[sample.first_frame + f]);
        }
        json.Raw("]");
      }
      json.Raw("],\"weights\":[");
      for (size_t s = 0; s < profile.samples.size(); ++s) {
        if (s) json.Raw(",");
        json.Number(profile.samples[s].weight);
      }
      json.Raw("]}");
    }
    json.Raw("]}\n");
    return json.Finish();
  }
};

}  // namespace

std::unique_ptr<ProfileEncoder> MakeSpeedscopeEncoder() {
  return std::make_unique<SpeedscopeEncoder>();
}

}  // namespace ebpf::pyperf
