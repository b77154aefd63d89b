// PprofEncoder: --format pprof, a dump as a gzip'd profile.proto (pprof's
// format, https://github.com/google/pprof/blob/main/proto/profile.proto), for
// `go tool pprof` and the tools that read it.
//
// The profile:
//  - sample types samples/count and cpu/nanoseconds (count x period); period
//    type cpu/nanoseconds, period = the sample period; time_nanos and
//    duration_nanos = the interval. pprof shows the last sample type, CPU
//    time, unless told otherwise (-sample_index=samples).
//  - one sample per distinct Sample of the dump (so two samples that differ
//    only in a native frame's address are two pprof samples, which pprof
//    sums where it shows them alike), locations leaf first, with the labels
//    pid and tid (numeric) and comm (string; none for an empty comm, as pprof
//    drops empty labels anyway).
//  - functions are named for people, spelled by StackSpeller
//    (FrameSpelling.h), without the collapsed text's kind suffixes or
//    escaping; the kind shows in the rest of the location:
//      Python  name "demo_workload.RequestHandler.handle" (the file's base
//              name and the qualified name), system_name the full name
//              "srv.app.demo_workload.RequestHandler.handle"; the source file
//              as the function's filename and the frame's line as the line;
//              no mapping. (start_line is left 0: a frame holds the sampled
//              line, not the function's first.)
//      native  name = system_name = the symbol. A frame in a known mapped file
//              has a location per (file, address, symbol): the mapping for
//              the file (path, build-id if the file has one, has_functions)
//              and the frame's address in the file, so two frames of one
//              function at different addresses are two locations of one
//              function. A frame in no known file: no mapping, address 0, one
//              location per symbol.
//      kernel  name = system_name = the symbol, in the mapping
//              "[kernel.kallsyms]".
//      marker  its text ("[Truncated Python Stack]", ...), no mapping. Its
//              system_name is left empty, so pprof keeps the text as it is
//              (pprof simplifies names that look like C++ when system_name
//              equals name: the native and kernel functions carry
//              system_name = name, so pprof shows C++ symbols as it always
//              does, without parameters and templates).
//    A frame with an empty name is named "<unknown>" (without system_name),
//    as pprof itself names a frame it knows nothing of. A sample without
//    frames gets the kNoFrames marker, as pprof does not show a sample
//    without locations.
//  - mappings go by the samples under them, most first (pprof takes the
//    first for the main binary: the interpreter's), the kernel's last.
// Strings are deduplicated in the string table (index 0 is ""), and so are
// functions, locations and mappings; every string is strict UTF-8. The file
// is written with zlib's fastest level: it is written in the sampling thread.
#pragma once

#include <memory>
#include <string_view>

#include "ProfileEncoder.h"

namespace ebpf::pyperf {

// The name of a frame whose name is empty.
inline constexpr std::string_view kPprofUnnamedFrame = "<unknown>";
// The mapping of kernel frames.
inline constexpr std::string_view kPprofKernelMapping = "[kernel.kallsyms]";
// The file name of an asyncio task's function ("request-7 (handle)").
inline constexpr std::string_view kPprofTaskFile = "<task>";

std::unique_ptr<ProfileEncoder> MakePprofEncoder();

}  // namespace ebpf::pyperf
