// PythonFrameFormat: the text of a Python frame,
//   <module>.<Class.>function (<file>:<line>)
// e.g. "json.decoder.JSONDecoder.decode (/usr/lib/python3.11/json/decoder.py:332)",
// printed with the Python suffix (FrameSpelling.h). Called when a symbol is
// first seen (the result is cached), not per sample.
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

// The whole frame, spelled as FrameSpelling's SpellFrame spells a Python
// frame (suffix included, ';' and line breaks turned into '_'). `class_name`
// may be empty (a plain function); an empty module (empty file) drops the
// "<module>." prefix.
std::string FormatPythonFrame(const std::string& file, const std::string& function,
                              const std::string& class_name, int line);

// A Python frame's text read back (the frame as FormatPythonFrame spells it,
// without the suffix): "<name> (<file>:<line>)". A path may hold " (" too, so
// the split chosen is the first whose name starts with the file's module
// name, as FormatPythonFrame wrote it. False if `text` has no such split.
struct PythonFrameParts {
  std::string_view name;  // module.Class.function
  std::string_view file;
  int line = 0;
};
bool ParsePythonFrameText(std::string_view text, PythonFrameParts* out);

}  // namespace pyperf
