// PythonFrameFormat: how a Python frame is spelled in a collapsed stack,
//   <module>.<Class.>function (<file>:<line>)_[p]
// e.g. "json.decoder.JSONDecoder.decode (/usr/lib/python3.11/json/decoder.py:332)_[p]".
// The "_[p]" suffix marks a Python frame for gProfiler, as "_[k]" marks kernel
// frames. Called when a symbol is first seen (the result is cached), not per
// sample.
#pragma once

#include <string>
#include <string_view>

namespace pyperf {

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

// The frame text. `class_name` may be empty (a plain function); an empty
// module (empty file) drops the "<module>." prefix. Characters that would
// break the collapsed format (';' separates frames, a newline ends the line)
// become '_'.
std::string FormatPythonFrame(const std::string& file, const std::string& function,
                              const std::string& class_name, int line);

}  // namespace pyperf
