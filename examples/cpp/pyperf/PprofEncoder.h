// PprofEncoder: --format pprof, a dump as a gzip'd profile.proto (pprof's
// format, https://github.com/google/pprof/blob/main/proto/profile.proto), for
// `go tool pprof` and the tools that read it.
//
// The profile:
//  - sample types samples/count and cpu/nanoseconds (count x period); period
//    type cpu/nanoseconds, period = the sample period; time_nanos and
//    duration_nanos = the interval. pprof shows the last sample type, CPU
//    time, unless told otherwise (-sample_index=samples).
//  - one sample per distinct stack, locations leaf first, with the labels
//    pid and tid (numeric) and comm (string).
//  - function names are the frame texts without their kind suffix (_[p],
//    _[pn], _[k], _[pe]): pprof users expect bare names; the kind shows in
//    the rest of the location:
//      Python  "module.Class.function", its file as the function's filename,
//              the frame's line as the line; no mapping. (start_line is left
//              0: the stack holds the sampled line, not the function's first.)
//      native  the symbol text; a mapping for the file it came from (path,
//              build-id if the file has one, has_functions) with the frame's
//              address in the file as the location's address, when
//              DumpedProfile::native_origins knows the frame; otherwise no
//              mapping.
//      kernel  the symbol text, in the mapping "[kernel.kallsyms]".
//      marker  its text ("[Truncated Python Stack]", ...), no mapping. Its
//              system_name is left empty, so pprof keeps the text as it is
//              (pprof simplifies names that look like C++ when system_name
//              equals name: the Python, native and kernel functions carry
//              system_name = name, so pprof shows C++ symbols as it always
//              does, without parameters and templates).
//    A frame with an empty text is named "<unknown>" (without system_name),
//    as pprof itself names a frame it knows nothing of.
//  - pprof drops labels with an empty string or a zero: a sample of an empty
//    comm has no comm label (pids and tids are never 0).
//  - a stack text ParseStackText rejects (never one PyPerf builds) is counted,
//    with every other such stack, in one sample whose only frame is
//    kUnparseableStack (FrameSpelling.h), without labels, so no sample is lost; a stack
//    with a head and no frame gets the kNoFrames marker, as pprof does not
//    show a sample without locations.
// Strings are deduplicated in the string table (index 0 is ""), and so are
// functions, locations and mappings; every string is strict UTF-8. The file
// is written with zlib's fastest level: it is written in the sampling thread.
#pragma once

#include <memory>
#include <string_view>

#include "ProfileEncoder.h"

namespace pyperf {

// The frame standing for the stacks that could not be read back.
// The name of a frame whose text is empty.
inline constexpr std::string_view kPprofUnnamedFrame = "<unknown>";
// The mapping of kernel frames.
inline constexpr std::string_view kPprofKernelMapping = "[kernel.kallsyms]";

std::unique_ptr<ProfileEncoder> MakePprofEncoder();

}  // namespace pyperf
