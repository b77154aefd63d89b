// PythonFrameFormat: the module a Python source file is named by in a frame,
//   <module>.<Class.>function (<file>:<line>)
// e.g. "json.decoder.JSONDecoder.decode (/usr/lib/python3.11/json/decoder.py:332)"
// (FrameSpelling.h spells the frame). Called once per file and dump.
#pragma once

#include <string>
#include <string_view>

namespace ebpf::pyperf {

// The dotted module name for a source file path:
//  - everything up to and including the last "lib/pythonX.Y/" (also lib64,
//    "python3", and free-threaded "pythonX.Yt"), "site-packages/" or
//    "dist-packages/" is removed: /usr/lib/python3.11/json/decoder.py ->
//    json.decoder; /app/site-packages/requests/api.py -> requests.api;
//  - otherwise leading "/" and "./" are removed, so a script outside any
//    library directory is named by its path: /work/x/app.py -> work.x.app
//    (an absolute path does not become a name starting with '.');
//  - a ".py" suffix is removed, "/" becomes ".", and a package's
//    "pkg/__init__.py" is named "pkg", as Python names it;
//  - "<frozen importlib._bootstrap>" -> importlib._bootstrap; other names in
//    angle brackets ("<string>", "<stdin>") are kept as they are.
std::string PythonModuleName(std::string_view file);

}  // namespace ebpf::pyperf
