// SpeedscopeEncoder: a dump as speedscope's JSON file format
// (https://www.speedscope.app/file-format-schema.json), opened by dropping the
// file on https://www.speedscope.app or with the `speedscope` CLI.
//
// The file:
//  - "shared.frames": every distinct frame of the dump once. A Python frame is
//    named "module.Class.function" with its "file" and "line" (as
//    ParsePythonFrameText reads them); every other frame is named by its
//    spelling with its suffix ("do_syscall_64_[k]", "PyObject_Call_[pn]",
//    "[Truncated Python Stack]_[pe]"), so its kind stays visible. A Python
//    frame whose text does not read back exactly is named by its spelling,
//    "<text>_[p]", without file and line.
//  - "profiles": one "sampled" profile per thread, named by the stack's first
//    token "<comm>-<pid>/<tid>" exactly as the collapsed output spells it,
//    ordered by pid, tid (then comm: a thread renamed within the interval has
//    one profile per name). Each stack is one sample, root first, weighted
//    count x sample_period_ns in "nanoseconds"; startValue is 0 and endValue
//    the profile's total weight (speedscope takes endValue - startValue as the
//    sampled profile's total). With sample_period_ns == 0 the unit is "none"
//    and the weights are the counts.
//  - A stack ParseStackText rejects is not dropped: its samples go to a last
//    profile named kUnparseableStacksProfile, as one frame
//    kUnparseableStack (FrameSpelling.h), so the dump's total stays whole and visible.
//  - "activeProfileIndex" is the profile with the most weight; "exporter" is
//    "PyPerf"; "name" gives the interval in UTC.
//
// So a consumer reads a frame back as PyPerf spelled it: a frame with "file"
// and "line" is "<name> (<file>:<line>)_[p]", any other is its name.
//
// Strings are written as strict UTF-8 JSON: '"', '\\', control characters,
// U+2028/U+2029 and '<', '>', '&' (harmless in JSON, but the file may be
// pasted into a page's <script>) are escaped; bytes that are not UTF-8
// become U+FFFD.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "ProfileEncoder.h"

namespace pyperf {

inline constexpr std::string_view kUnparseableStacksProfile = "[Unparseable Stacks]";

std::unique_ptr<ProfileEncoder> MakeSpeedscopeEncoder();

// Appends `text` as a JSON string literal (quotes included), escaped as above.
void AppendSpeedscopeJsonString(std::string_view text, std::string* out);

}  // namespace pyperf
