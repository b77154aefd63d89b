// SpeedscopeEncoder: a dump as speedscope's JSON file format
// (https://www.speedscope.app/file-format-schema.json), opened by dropping the
// file on https://www.speedscope.app or with the `speedscope` CLI.
//
// The file:
//  - "shared.frames": every distinct frame of the dump once, by identity
//    (FrameIdentity.h: native frames that differ only in address are one).
//    Frames are named for people (FrameSpelling.h), not escaped: a Python
//    frame by its display name ("demo_workload.RequestHandler.handle") with
//    its "file" and "line"; every other frame by its text and suffix
//    ("do_syscall_64_[k]", "PyObject_Call_[pn]",
//    "[Truncated Python Stack]_[pe]"), so its kind stays visible.
//  - "profiles": one "sampled" profile per thread, named "<comm>-<pid>/<tid>"
//    exactly as the collapsed output's first token spells it, ordered by pid,
//    tid (then that name: a thread renamed within the interval has one
//    profile per name). Each stack is one sample, root first (samples that
//    differ only in native addresses are one), weighted count x
//    sample_period_ns in "nanoseconds"; startValue is 0 and endValue the
//    profile's total weight (speedscope takes endValue - startValue as the
//    sampled profile's total). With sample_period_ns == 0 the unit is "none"
//    and the weights are the counts.
//  - "activeProfileIndex" is the profile with the most weight; "exporter" is
//    "PyPerf"; "name" gives the interval in UTC.
//
// So a consumer reads a frame back as "<name> (<file>:<line>)_[p]" if it has
// a file and line, else as its name.
//
// Strings are written by AppendJsonString (JsonText.h): strict UTF-8 JSON
// that may also be pasted into a page's <script>.
#pragma once

#include <memory>

#include "ProfileEncoder.h"

namespace ebpf::pyperf {

std::unique_ptr<ProfileEncoder> MakeSpeedscopeEncoder();

}  // namespace ebpf::pyperf
