// CollapsedEncoder: --format collapsed, gProfiler's format: one line per
// distinct stack, "<stack> <count>", spelled by StackSpeller (FrameSpelling.h)
// and sorted by stack. Samples that differ only in native addresses are one
// line, their counts summed.
#pragma once

#include <memory>

#include "ProfileEncoder.h"

namespace ebpf::pyperf {

std::unique_ptr<ProfileEncoder> MakeCollapsedEncoder();

}  // namespace ebpf::pyperf
