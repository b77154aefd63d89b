// FrameWriter: fills the caller's vector of NativeFrame for one unwind,
// reusing the strings of earlier unwinds (so the steady state allocates
// nothing), and writes the marker frames that stand for failures.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "native_unwind_types.h"

namespace ebpf {

class FrameWriter {
 public:
  FrameWriter(std::vector<NativeFrame>* out, std::vector<std::string>* spare)
      : out_(out), spare_(spare) {}
  NativeFrame& Next() {
    if (n_ == out_->size()) {
      out_->emplace_back();
      if (!spare_->empty()) {
        out_->back().name = std::move(spare_->back());
        spare_->pop_back();
      }
    }
    NativeFrame& f = (*out_)[n_++];
    f.name.clear();
    f.address = f.elf_address = f.sp = 0;
    f.symbolized = f.error = f.stop_symbol = false;
    return f;
  }
  // A marker frame saying what failed: `what`, or `<what> (<reason>)`. The
  // caller spells it as a marker.
  void AddMarker(NativeUnwindResult* result, const char* what, std::string_view reason) {
    NativeFrame& f = Next();
    f.name.assign(what);
    if (!reason.empty()) f.name.append(" (").append(reason).append(")");
    f.error = true;
    result->error = true;
  }
  void Finish() {
    for (size_t i = n_; i < out_->size(); ++i) spare_->push_back(std::move((*out_)[i].name));
    out_->resize(n_);
  }
  size_t size() const { return n_; }
  // Forgets the frames written so far (their strings are kept for reuse).
  void Rewind() { n_ = 0; }

 private:
  std::vector<NativeFrame>* out_;
  std::vector<std::string>* spare_;
  size_t n_ = 0;
};

}  // namespace ebpf
