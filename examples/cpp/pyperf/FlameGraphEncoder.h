// FlameGraphEncoder: the `flamegraph` format (ProfileEncoder.h), one
// self-contained HTML page per dump that works offline, opened from disk.
//
// The page (its template is flamegraph/: page.html, flamegraph.css,
// flamegraph.js, embedded in the binary) draws the dump as a tree, root at the
// top: "all" -> process "<comm>-<pid>" -> thread "<tid>" -> frames, root
// first. It has a search box (matching frames highlighted, their share of the
// samples shown), click-to-zoom, tooltips (full name, samples, percentages)
// and colours by kind: Python green, native orange, kernel blue, error
// markers red, processes lavender, threads grey-blue (legend on the page).
//
// Frames are named for people (FrameSpelling.h), not escaped: a Python box
// shows its display name ("demo_workload.RequestHandler.handle") and its
// tooltip the full name, file and line ("app.demo_workload.RequestHandler.
// handle (/app/demo_workload.py:15)_[p]"); any other frame its text. The tree
// merges frames by identity (FrameIdentity.h): Python frames of one display
// name in two files or lines are two boxes, native frames of one symbol at
// two addresses one box. Process and thread nodes are spelled as the
// collapsed line's first token spells them.
//
// The profile is embedded as JSON in <script type="application/json"
// id="pyperf-profile"> (see flamegraph.js for the layout of the data),
// written by AppendJsonString (JsonText.h): no frame text can end the script
// element or break the JavaScript, and the page is strict UTF-8.
#pragma once

#include <memory>

#include "ProfileEncoder.h"

namespace ebpf::pyperf {

std::unique_ptr<ProfileEncoder> MakeFlameGraphEncoder();

}  // namespace ebpf::pyperf
