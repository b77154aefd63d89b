// FlameGraphEncoder: the `flamegraph` format (ProfileEncoder.h), one
// self-contained HTML page per dump that works offline, opened from disk.
//
// The page (its template is flamegraph/: page.html, flamegraph.css,
// flamegraph.js, embedded in the binary) draws the dump as a tree, root at the
// top: "all" -> process "<comm>-<pid>" -> thread "<tid>" -> frames, root
// first. It has a search box (matching frames highlighted, their share of the
// samples shown), click-to-zoom, tooltips (full text, samples, percentages)
// and colours by kind: Python green, native orange, kernel blue, error
// markers red, processes lavender, threads grey-blue (legend on the page).
//
// The profile is embedded as JSON in <script type="application/json"
// id="pyperf-profile">, its frame texts read back with ParseStackText and
// merged into a tree here (see flamegraph.js for the layout of the data).
// '<', '>', '&', U+2028, U+2029 and control characters are \u-escaped, so no
// frame text can end the script element or break the JavaScript; bytes that
// are not UTF-8 become U+FFFD.
//
// A stack text ParseStackText rejects (or whose "<comm>-<pid>/<tid>" is not
// spelled canonically) keeps its samples: they are counted under one marker
// node "[Unparseable Stack]_[pe]" at the process level, and the texts
// themselves are kept in the data ("unparsed") so the page's collapsed
// stacks still add up to the dump.
#pragma once

#include <memory>

#include "ProfileEncoder.h"

namespace pyperf {

// The label of the node that holds the samples of unparseable stacks.

std::unique_ptr<ProfileEncoder> MakeFlameGraphEncoder();

}  // namespace pyperf
