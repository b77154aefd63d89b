// FlameGraphEncoder: see FlameGraphEncoder.h.
#include "FlameGraphEncoder.h"

#include <cerrno>
#include <cinttypes>
#include <ctime>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "FrameSpelling.h"

namespace pyperf {

// Generated from flamegraph/ by pyperf_embed_files (CMakeLists.txt).
const std::vector<std::pair<std::string, std::string>>& EmbeddedFlameGraphTemplate();

namespace {

// Node kinds, as flamegraph.js's KINDS lists them.
enum NodeKind : int { kRoot = 0, kProcess, kThread, kPython, kNative, kKernel, kMarker };

// Frame kinds follow the page's levels in FrameKind's own order.
int KindOf(FrameKind kind) { return kPython + static_cast<int>(kind); }
static_assert(kPython + static_cast<int>(FrameKind::kNative) == kNative &&
                  kPython + static_cast<int>(FrameKind::kKernel) == kKernel &&
                  kPython + static_cast<int>(FrameKind::kMarker) == kMarker,
              "FrameKind and the page's kinds must line up");

std::string_view TemplateFile(std::string_view name) {
  for (const auto& [path, content] : EmbeddedFlameGraphTemplate()) {
    if (path == name) return content;
  }
  return {};
}

// Appends `text` as the inside of a JSON string that is also safe inside an
// HTML <script> element and in JavaScript source: see the header comment.
void AppendJsonString(std::string_view text, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  auto escape_u = [out](unsigned code) {
    out->append("\\u");
    for (int shift = 12; shift >= 0; shift -= 4) out->push_back(kHex[(code >> shift) & 0xf]);
  };
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    unsigned char c = s[i];
    if (c < 0x80) {
      if (c == '"' || c == '\\') {
        out->push_back('\\');
        out->push_back(static_cast<char>(c));
      } else if (c < 0x20 || c == 0x7f || c == '<' || c == '>' || c == '&') {
        escape_u(c);
      } else {
        out->push_back(static_cast<char>(c));
      }
      ++i;
      continue;
    }
    // A strict UTF-8 sequence (no overlongs, surrogates or code points past
    // U+10FFFF) is copied; anything else becomes U+FFFD, one byte at a time.
    size_t len = 0;
    unsigned code = 0;
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
      code = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      code = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      code = c & 0x07;
    }
    bool valid = len > 0 && i + len <= n;
    for (size_t k = 1; valid && k < len; ++k) {
      if ((s[i + k] & 0xc0) != 0x80) valid = false;
      code = (code << 6) | (s[i + k] & 0x3f);
    }
    if (valid) {
      if ((len == 3 && (code < 0x800 || (code >= 0xd800 && code <= 0xdfff))) ||
          (len == 4 && (code < 0x10000 || code > 0x10ffff)))
        valid = false;
    }
    if (!valid) {
      escape_u(0xfffd);
      ++i;
      continue;
    }
    if (code == 0x2028 || code == 0x2029) {
      escape_u(code);
    } else {
      out->append(text.data() + i, len);
    }
    i += len;
  }
}

void AppendUint(uint64_t value, std::string* out) {
  char buf[24];
  int n = std::snprintf(buf, sizeof(buf), "%" PRIu64, value);
  out->append(buf, static_cast<size_t>(n));
}

// "YYYY-mm-ddTHH:MM:SS.ccZ".
std::string IsoUtc(std::chrono::system_clock::time_point time) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(time.time_since_epoch()).count();
  if (ms < 0) ms = 0;
  time_t seconds = static_cast<time_t>(ms / 1000);
  struct tm utc {};
  gmtime_r(&seconds, &utc);
  char buf[48];
  size_t n = std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(buf + n, sizeof(buf) - n, ".%02dZ", static_cast<int>((ms % 1000) / 10));
  return buf;
}

// The dump merged into a call tree: nodes by (parent, name), names interned.
class TreeBuilder {
 public:
  TreeBuilder() {
    Name(kRoot, "all");
    nodes_.push_back({-1, 0, 0});
  }

  void AddStack(std::string_view stack, uint64_t count) {
    total_ += count;
    if (!ParseStackText(stack, &head_, &frames_) || !Canonical(stack)) {
      unparsed_.emplace_back(stack, count);
      nodes_[Child(0, Name(kMarker, kUnparseableStack))].self += count;
      return;
    }
    // The first token up to the '/' is "<comm>-<pid>"; after it, the tid.
    std::string_view first = stack.substr(0, stack.find(kFrameSeparator));
    size_t slash = first.rfind('/');
    int32_t node = Child(0, Name(kProcess, first.substr(0, slash)));
    node = Child(node, Name(kThread, first.substr(slash + 1)));
    for (const SpelledFrame& frame : frames_)
      node = Child(node, Name(KindOf(frame.kind), frame.text));
    nodes_[node].self += count;
  }

  // The JSON object flamegraph.js reads.
  void AppendJson(const DumpedProfile& profile, std::string* out) const {
    out->append("{\"format\":\"pyperf-flamegraph\",\"version\":1,\"start\":\"");
    out->append(IsoUtc(profile.start));
    out->append("\",\"end\":\"");
    out->append(IsoUtc(profile.end));
    out->append("\",\"periodNs\":");
    AppendUint(profile.sample_period_ns, out);
    out->append(",\"totalSamples\":");
    AppendUint(total_, out);
    out->append(",\n\"names\":[");
    for (size_t i = 0; i < names_.size(); ++i) {
      if (i) out->append(i % 64 ? "," : ",\n");
      out->push_back('[');
      AppendUint(static_cast<uint64_t>(names_[i].first), out);
      out->append(",\"");
      AppendJsonString(names_[i].second, out);
      out->append("\"]");
    }
    out->append("],\n\"nodes\":[");
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (i) out->append(i % 64 ? "," : ",\n");
      if (nodes_[i].parent < 0) {
        out->append("-1");
      } else {
        AppendUint(static_cast<uint64_t>(nodes_[i].parent), out);
      }
      out->push_back(',');
      AppendUint(nodes_[i].name, out);
      out->push_back(',');
      AppendUint(nodes_[i].self, out);
    }
    out->append("],\n\"unparsed\":[");
    for (size_t i = 0; i < unparsed_.size(); ++i) {
      if (i) out->append(",\n");
      out->append("[\"");
      AppendJsonString(unparsed_[i].first, out);
      out->append("\",");
      AppendUint(unparsed_[i].second, out);
      out->push_back(']');
    }
    out->append("]}");
  }

 private:
  struct Node {
    int32_t parent;
    uint32_t name;
    uint64_t self;
  };
  struct PairHash {
    size_t operator()(const std::pair<int, std::string_view>& key) const {
      return std::hash<std::string_view>()(key.second) * 31 + static_cast<size_t>(key.first);
    }
  };

  // Whether the first token is spelled as StackText spells it (ParseStackText
  // accepts leading zeros; two spellings of one thread would merge).
  bool Canonical(std::string_view stack) const {
    std::string_view first = stack.substr(0, stack.find(kFrameSeparator));
    std::string expected(head_.comm);
    expected += '-';
    expected += std::to_string(head_.pid);
    expected += '/';
    expected += std::to_string(head_.tid);
    return first == expected;
  }

  uint32_t Name(int kind, std::string_view text) {
    auto [it, added] = name_ids_.try_emplace({kind, text}, static_cast<uint32_t>(names_.size()));
    if (added) names_.emplace_back(kind, text);
    return it->second;
  }

  int32_t Child(int32_t parent, uint32_t name) {
    uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(parent)) << 32) | name;
    auto [it, added] = children_.try_emplace(key, static_cast<int32_t>(nodes_.size()));
    if (added) nodes_.push_back({parent, name, 0});
    return it->second;
  }

  // Views into the profile's stack texts (alive while Write runs) and the
  // static marker text.
  std::vector<std::pair<int, std::string_view>> names_;
  std::unordered_map<std::pair<int, std::string_view>, uint32_t, PairHash> name_ids_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> children_;
  std::vector<std::pair<std::string_view, uint64_t>> unparsed_;
  uint64_t total_ = 0;
  StackHead head_;
  std::vector<SpelledFrame> frames_;
};

bool WriteAll(std::string_view text, std::FILE* out) {
  return std::fwrite(text.data(), 1, text.size(), out) == text.size();
}

class FlameGraphEncoder final : public ProfileEncoder {
 public:
  ProfileFormat format() const override { return ProfileFormat::kFlameGraph; }

  bool Write(const DumpedProfile& profile, std::FILE* out) override {
    std::string_view page = TemplateFile("flamegraph/page.html");
    std::string_view style = TemplateFile("flamegraph/flamegraph.css");
    std::string_view script = TemplateFile("flamegraph/flamegraph.js");
    TreeBuilder tree;
    for (const auto& [stack, count] : profile.stacks) tree.AddStack(stack, count);
    std::string json;
    tree.AppendJson(profile, &json);

    // The template's placeholders, in the order they appear.
    const std::pair<std::string_view, std::string_view> parts[] = {
        {"@@PYPERF_STYLE@@", style}, {"@@PYPERF_DATA@@", json}, {"@@PYPERF_SCRIPT@@", script}};
    size_t pos = 0;
    for (const auto& [placeholder, content] : parts) {
      size_t at = page.find(placeholder, pos);
      if (at == std::string_view::npos) {
        errno = EINVAL;  // a broken build: the template lost a placeholder
        return false;
      }
      if (!WriteAll(page.substr(pos, at - pos), out) || !WriteAll(content, out)) return false;
      pos = at + placeholder.size();
    }
    return WriteAll(page.substr(pos), out);
  }
};

}  // namespace

std::unique_ptr<ProfileEncoder> MakeFlameGraphEncoder() {
  return std::make_unique<FlameGraphEncoder>();
}

}  // namespace pyperf
