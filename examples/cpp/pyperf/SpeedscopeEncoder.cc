// SpeedscopeEncoder: see SpeedscopeEncoder.h. One pass reads every stack back
// (ParseStackText), numbering distinct frames and grouping stacks by thread;
// a second writes the file through a buffer, so memory follows the dump's size.
#include "SpeedscopeEncoder.h"

#include <time.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <limits>
#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "FrameSpelling.h"
#include "PythonFrameFormat.h"

namespace pyperf {
namespace {

constexpr char kHex[] = "0123456789abcdef";

void AppendUnicodeEscape(uint32_t code, std::string* out) {
  out->append("\\u");
  for (int shift = 12; shift >= 0; shift -= 4) out->push_back(kHex[(code >> shift) & 0xf]);
}

bool IsContinuation(unsigned char c) { return (c & 0xc0) == 0x80; }

// The length of the well-formed UTF-8 sequence starting at `s[i]` (2..4), or 0.
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  auto at = [&](size_t k) -> unsigned char { return i + k < s.size() ? s[i + k] : 0; };
  unsigned char c = at(0);
  if (c >= 0xc2 && c <= 0xdf) return IsContinuation(at(1)) ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) {
    unsigned char lo = c == 0xe0 ? 0xa0 : 0x80,
                  hi = c == 0xed ? 0x9f : 0xbf;  // no overlongs, no surrogates
    return at(1) >= lo && at(1) <= hi && IsContinuation(at(2)) ? 3 : 0;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    unsigned char lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;  // <= U+10FFFF
    return at(1) >= lo && at(1) <= hi && IsContinuation(at(2)) && IsContinuation(at(3)) ? 4 : 0;
  }
  return 0;
}

uint64_t SaturatingMultiply(uint64_t a, uint64_t b) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a)
    return std::numeric_limits<uint64_t>::max();
  return a * b;
}

uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  return b > std::numeric_limits<uint64_t>::max() - a ? std::numeric_limits<uint64_t>::max()
                                                      : a + b;
}

// "2026-12-03T15:09:56.123Z".
std::string UtcTime(std::chrono::system_clock::time_point when) {
  int64_t ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(when.time_since_epoch()).count();
  int64_t seconds = ms / 1000, millis = ms % 1000;
  if (millis < 0) millis += 1000, seconds -= 1;
  time_t t = static_cast<time_t>(seconds);
  struct tm tm;
  if (gmtime_r(&t, &tm) == nullptr) return "?";
  char text[64];
  size_t n = strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(text + n, sizeof(text) - n, ".%03dZ", static_cast<int>(millis));
  return text;
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
    AppendSpeedscopeJsonString(text, &buffer_);
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

struct Frame {
  FrameKind kind;
  std::string_view text;     // without the suffix
  std::string_view spelled;  // with it
};

struct Sample {
  size_t first_frame;  // into the flat frame index list
  size_t frame_count;
  uint64_t weight;
};

struct Profile {
  std::string_view name;
  std::vector<Sample> samples;
  uint64_t total = 0;
};

void WriteFrame(const Frame& frame, JsonWriter* out) {
  if (frame.kind == FrameKind::kPython) {
    PythonFrameParts parts;
    // Named by its parts only when they spell the text back exactly: what a
    // consumer rebuilds from name, file and line is then the frame PyPerf
    // printed.
    if (ParsePythonFrameText(frame.text, &parts)) {
      std::string rebuilt;
      rebuilt.reserve(frame.text.size());
      rebuilt.append(parts.name).append(" (").append(parts.file).append(":");
      rebuilt.append(std::to_string(parts.line)).append(")");
      if (rebuilt == frame.text) {
        out->Raw("{\"name\":");
        out->String(parts.name);
        out->Raw(",\"file\":");
        out->String(parts.file);
        out->Raw(",\"line\":");
        out->Number(static_cast<uint64_t>(parts.line));
        out->Raw("}");
        return;
      }
    }
  }
  out->Raw("{\"name\":");
  out->String(frame.spelled);
  out->Raw("}");
}

class SpeedscopeEncoder final : public ProfileEncoder {
 public:
  ProfileFormat format() const override { return ProfileFormat::kSpeedscope; }

  bool Write(const DumpedProfile& dump, std::FILE* out) override {
    const bool timed = dump.sample_period_ns != 0;
    const uint64_t period = timed ? dump.sample_period_ns : 1;

    std::vector<Frame> frames;
    std::unordered_map<std::string_view, uint32_t> frame_numbers;
    std::vector<uint32_t> stack_frames;  // every sample's frame numbers, root first
    // Threads by pid, tid and first token (as spelled: the comm, and the ids
    // however written), in the profiles' order.
    std::map<std::tuple<uint32_t, uint32_t, std::string_view>, Profile> threads;
    Profile unparseable;
    unparseable.name = kUnparseableStacksProfile;
    const std::string unparseable_frame = SpellFrame(FrameKind::kMarker, kUnparseableStack);

    StackHead head;
    std::vector<SpelledFrame> spelled;
    for (const auto& [stack, count] : dump.stacks) {
      uint64_t weight = SaturatingMultiply(count, period);
      if (!ParseStackText(stack, &head, &spelled)) {
        // Kept, visibly, so the file's total is the dump's.
        auto [it, added] = frame_numbers.try_emplace(unparseable_frame, frames.size());
        if (added) frames.push_back({FrameKind::kMarker, {}, unparseable_frame});
        unparseable.samples.push_back({stack_frames.size(), 1, weight});
        unparseable.total = SaturatingAdd(unparseable.total, weight);
        stack_frames.push_back(it->second);
        continue;
      }
      std::string_view first_token = stack.substr(0, stack.find(kFrameSeparator));
      Profile& profile = threads[{head.pid, head.tid, first_token}];
      profile.name = first_token;
      profile.samples.push_back({stack_frames.size(), spelled.size(), weight});
      profile.total = SaturatingAdd(profile.total, weight);
      for (const SpelledFrame& frame : spelled) {
        // The suffix follows the text in the stack: the whole frame is one view.
        std::string_view whole(frame.text.data(),
                               frame.text.size() + FrameSuffix(frame.kind).size());
        auto [it, added] = frame_numbers.try_emplace(whole, frames.size());
        if (added) frames.push_back({frame.kind, frame.text, whole});
        stack_frames.push_back(it->second);
      }
    }
    frame_numbers = {};

    std::vector<const Profile*> profiles;
    profiles.reserve(threads.size() + 1);
    for (const auto& [key, profile] : threads) profiles.push_back(&profile);
    if (!unparseable.samples.empty()) profiles.push_back(&unparseable);
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
    json.String("PyPerf " + UtcTime(dump.start) + " to " + UtcTime(dump.end));
    json.Raw(",\"activeProfileIndex\":");
    json.Number(active);
    json.Raw(",\"shared\":{\"frames\":[");
    for (size_t i = 0; i < frames.size(); ++i) {
      if (i) json.Raw(",");
      json.Raw("\n");
      WriteFrame(frames[i], &json);
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
        const Sample& sample = profile.samples[s];
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

void AppendSpeedscopeJsonString(std::string_view text, std::string* out) {
  out->push_back('"');
  for (size_t i = 0; i < text.size();) {
    unsigned char c = text[i];
    if (c < 0x80) {
      // JSON's two-character escapes: kEscaped[k] is written as a backslash
      // and kEscapeLetters[k].
      static constexpr std::string_view kEscaped = "\"\\\n\r\t", kEscapeLetters = "\"\\nrt";
      const size_t escape = kEscaped.find(static_cast<char>(c));
      if (escape != std::string_view::npos) {
        out->push_back('\\');
        out->push_back(kEscapeLetters[escape]);
      } else if (c < 0x20 || c == 0x7f || c == '<' || c == '>' || c == '&') {
        AppendUnicodeEscape(c, out);
      } else {
        out->push_back(static_cast<char>(c));
      }
      ++i;
      continue;
    }
    size_t length = Utf8SequenceLength(text, i);
    if (length == 0) {
      AppendUnicodeEscape(0xfffd, out);  // not UTF-8: one byte at a time
      ++i;
      continue;
    }
    // U+2028 and U+2029 end a line in JavaScript source older than ES2019.
    if (length == 3 && c == 0xe2 && static_cast<unsigned char>(text[i + 1]) == 0x80 &&
        (static_cast<unsigned char>(text[i + 2]) & 0xfe) == 0xa8) {
      AppendUnicodeEscape(static_cast<unsigned char>(text[i + 2]) == 0xa8 ? 0x2028 : 0x2029, out);
    } else {
      out->append(text.substr(i, length));
    }
    i += length;
  }
  out->push_back('"');
}

std::unique_ptr<ProfileEncoder> MakeSpeedscopeEncoder() {
  return std::make_unique<SpeedscopeEncoder>();
}

}  // namespace pyperf
