// FlameGraphEncoder: see FlameGraphEncoder.h.
#include "FlameGraphEncoder.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "FrameIdentity.h"
#include "FrameSpelling.h"
#include "JsonText.h"

namespace ebpf::pyperf {

// Generated from flamegraph/ by pyperf_embed_files (CMakeLists.txt).
const std::vector<std::pair<std::string, std::string>>& EmbeddedFlameGraphTemplate();

namespace {

// Node kinds, as flamegraph.js's KINDS lists them.
enum NodeKind : int { kRoot = 0, kProcess, kThread, kPython, kNative, kKernel, kMarker, kTask };

// Frame kinds follow the page's levels in FrameKind's own order.
int KindOf(FrameKind kind) { return kPython + static_cast<int>(kind); }
static_assert(kPython + static_cast<int>(FrameKind::kNative) == kNative &&
                  kPython + static_cast<int>(FrameKind::kKernel) == kKernel &&
                  kPython + static_cast<int>(FrameKind::kMarker) == kMarker &&
                  kPython + static_cast<int>(FrameKind::kTask) == kTask,
              "FrameKind and the page's kinds must line up");

std::string_view TemplateFile(std::string_view name) {
  for (const auto& [path, content] : EmbeddedFlameGraphTemplate()) {
    if (path == name) return content;
  }
  return {};
}

void AppendUint(uint64_t value, std::string* out) {
  char buf[24];
  int n = std::snprintf(buf, sizeof(buf), "%" PRIu64, value);
  out->append(buf, static_cast<size_t>(n));
}

// The dump merged into a call tree: a node per (parent, name), a name per
// frame identity (FrameIdentity.h), process and thread.
class TreeBuilder {
 public:
  explicit TreeBuilder(const FrameDictionary& dictionary) : speller_(dictionary) {
    AddName(kRoot, "all", "");
    nodes_.push_back({-1, 0, 0});
  }

  void AddSample(const Sample& sample, uint64_t count) {
    total_ += count;
    // "<comm>-<pid>" and "<tid>", as the collapsed line's first token spells them.
    thread_.clear();
    speller_.AppendThread(sample, &thread_);
    const size_t slash = thread_.rfind('/');
    int32_t node = Child(0, ThreadName(kProcess, thread_.substr(0, slash)));
    node = Child(node, ThreadName(kThread, thread_.substr(slash + 1)));
    for (const SampleFrame& frame : sample.frames) node = Child(node, FrameName(frame));
    nodes_[node].self += count;
  }

  // The JSON object flamegraph.js reads.
  void AppendJson(const DumpedProfile& profile, std::string* out) const {
    out->append("{\"format\":\"pyperf-flamegraph\",\"version\":2,\"start\":\"");
    out->append(UtcTimeText(profile.start, 2));
    out->append("\",\"end\":\"");
    out->append(UtcTimeText(profile.end, 2));
    out->append("\",\"periodNs\":");
    AppendUint(profile.sample_period_ns, out);
    out->append(",\"totalSamples\":");
    AppendUint(total_, out);
    out->append(",\n\"names\":[");
    for (size_t i = 0; i < names_.size(); ++i) {
      if (i) out->append(i % 64 ? "," : ",\n");
      out->push_back('[');
      AppendUint(static_cast<uint64_t>(names_[i].kind), out);
      out->push_back(',');
      AppendJsonString(names_[i].label, out);
      if (!names_[i].title.empty()) {
        out->push_back(',');
        AppendJsonString(names_[i].title, out);
      }
      out->push_back(']');
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
    out->append("]}");
  }

 private:
  struct Name {
    int kind;
    std::string label;  // the box's text
    std::string title;  // the tooltip's, if not the label
  };
  struct Node {
    int32_t parent;
    uint32_t name;
    uint64_t self;
  };

  uint32_t AddName(int kind, std::string_view label, std::string title) {
    names_.push_back({kind, std::string(label), std::move(title)});
    return static_cast<uint32_t>(names_.size() - 1);
  }

  uint32_t ThreadName(int kind, const std::string& text) {
    auto& ids = kind == kProcess ? processes_ : threads_;
    auto it = ids.find(text);
    if (it == ids.end()) it = ids.emplace(text, AddName(kind, text, "")).first;
    return it->second;
  }

  // A Python frame is labelled by its display name and titled by its full
  // name, file and line; any other frame by its text.
  uint32_t FrameName(const SampleFrame& frame) {
    const uint32_t number = frames_.Number(frame);
    if (number < frame_names_.size()) return frame_names_[number];
    std::string title;
    if (frame.kind == FrameKind::kPython) {
      title.append(speller_.FullName(frame)).append(" (");
      title.append(speller_.Text(frame.file)).append(":");
      title.append(std::to_string(frame.line)).append(")");
    }
    frame_names_.push_back(AddName(KindOf(frame.kind), speller_.DisplayName(frame), title));
    return frame_names_.back();
  }

  int32_t Child(int32_t parent, uint32_t name) {
    uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(parent)) << 32) | name;
    auto [it, added] = children_.try_emplace(key, static_cast<int32_t>(nodes_.size()));
    if (added) nodes_.push_back({parent, name, 0});
    return it->second;
  }

  StackSpeller speller_;
  FrameTable frames_;
  std::vector<uint32_t> frame_names_;  // frames_ number -> names_ index
  std::unordered_map<std::string, uint32_t> processes_, threads_;
  std::vector<Name> names_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> children_;
  uint64_t total_ = 0;
  std::string thread_;
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
    TreeBuilder tree(*profile.dictionary);
    for (const StackCount& stack : profile.stacks) tree.AddSample(*stack.sample, stack.count);
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

}  // namespace ebpf::pyperf
