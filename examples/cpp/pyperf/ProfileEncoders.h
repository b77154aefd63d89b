// ProfileEncoders: the encoder of each --format (ProfileEncoder.h), the one
// place that knows them all.
#pragma once

#include <memory>

#include "ProfileEncoder.h"

namespace ebpf::pyperf {

std::unique_ptr<ProfileEncoder> MakeProfileEncoder(ProfileFormat format);

}  // namespace ebpf::pyperf
