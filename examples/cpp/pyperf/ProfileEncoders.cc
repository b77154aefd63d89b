// ProfileEncoders: see ProfileEncoders.h.
#include "ProfileEncoders.h"

#include "CollapsedEncoder.h"
#include "FlameGraphEncoder.h"
#include "PprofEncoder.h"
#include "SpeedscopeEncoder.h"

namespace ebpf::pyperf {

std::unique_ptr<ProfileEncoder> MakeProfileEncoder(ProfileFormat format) {
  switch (format) {
    case ProfileFormat::kCollapsed:
      break;
    case ProfileFormat::kFlameGraph:
      return MakeFlameGraphEncoder();
    case ProfileFormat::kSpeedscope:
      return MakeSpeedscopeEncoder();
    case ProfileFormat::kPprof:
      return MakePprofEncoder();
  }
  return MakeCollapsedEncoder();
}

}  // namespace ebpf::pyperf
