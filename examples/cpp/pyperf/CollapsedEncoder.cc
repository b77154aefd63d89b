// CollapsedEncoder: see CollapsedEncoder.h.
#include "CollapsedEncoder.h"

#include <cinttypes>
#include <string>

#include "FrameSpelling.h"

namespace ebpf::pyperf {
namespace {

// DumpedProfile lists samples that differ only in native addresses next to
// each other: they spell one line.
class CollapsedEncoder final : public ProfileEncoder {
 public:
  ProfileFormat format() const override { return ProfileFormat::kCollapsed; }
  bool Write(const DumpedProfile& profile, std::FILE* out) override {
    StackSpeller speller(*profile.dictionary);
    std::string line, next;
    uint64_t count = 0;
    auto flush = [&] {
      if (count == 0) return true;
      return std::fwrite(line.data(), 1, line.size(), out) == line.size() &&
             std::fprintf(out, " %" PRIu64 "\n", count) >= 0;
    };
    for (const StackCount& stack : profile.stacks) {
      next.clear();
      speller.AppendCollapsedStack(*stack.sample, &next);
      if (count != 0 && next == line) {
        count += stack.count;
        continue;
      }
      if (!flush()) return false;
      line.swap(next);
      count = stack.count;
    }
    return flush();
  }
};

}  // namespace

std::unique_ptr<ProfileEncoder> MakeCollapsedEncoder() { return std::make_unique<CollapsedEncoder>(); }

}  // namespace ebpf::pyperf
