// Checks PyOffsets' tables against the interpreters themselves: for each
// installed CPython (pyenv 2.7 .. 3.13, Debian's 3.11, and 3.13.x / 3.14 / 3.15 in the
// Debian roots of scripts/python-roots.sh, the free-threaded 3.13t of
// scripts/free-threaded-python.sh), a small C program is compiled
// against that interpreter's own headers (internal ones too), run, and every
// pyperf_offsets field it prints is compared with the table FindOffsets picks
// for the interpreter's exact version. The same probe checks the layout facts
// the BPF program hardcodes or relies on instead of taking from the table.
// What 3.13+ interpreters publish in _Py_DebugOffsets is checked by
// test_debug_offsets.cc.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "PyOffsets.h"
#include "status.h"
#include "support/header_probe.h"
#include "support/python_roots.h"
#include "support/test_support.h"

namespace ebpf::pyperf {
namespace {

using pyperf_test::FileExists;
using pyperf_test::InterpreterHeaders;

// How the probe reads one value from a given version's headers.
struct Probe {
  enum Kind { kAbsent, kOffsetOf, kSizeOf, kValue };
  Kind kind = kAbsent;
  std::string type;  // the struct, for kOffsetOf and kSizeOf
  std::string expr;  // member path for kOffsetOf; a C expression for kValue
};

Probe Absent() { return {}; }
Probe OffsetOf(std::string type, std::string member) {
  return {Probe::kOffsetOf, std::move(type), std::move(member)};
}
Probe SizeOf(std::string type) { return {Probe::kSizeOf, std::move(type), ""}; }
Probe Value(std::string expr) { return {Probe::kValue, "", std::move(expr)}; }
Probe Value(long value) { return Value(std::to_string(value)); }

bool Py3(const PythonVersion& v) { return v.major == 3; }
bool Py311To312(const PythonVersion& v) { return v.AtLeast(3, 11) && !v.AtLeast(3, 13); }

// Frame fields live in PyFrameObject up to 3.10, in _PyInterpreterFrame after.
Probe Frame(const PythonVersion& v, const char* old_member, const char* new_member) {
  if (v.AtLeast(3, 11)) return new_member ? OffsetOf("_PyInterpreterFrame", new_member) : Absent();
  return old_member ? OffsetOf("PyFrameObject", old_member) : Absent();
}

// One row per pyperf_offsets field: how to read it, and how many bytes the BPF
// program reads there (8 pointer / Py_ssize_t / long, 4 int or the unicode
// state word, 1 char; 0 for arrays, sizes and constants).
struct FieldSpec {
  const char* name;
  pp_s64 pyperf_offsets::*member;
  int width;
  std::function<Probe(const PythonVersion& v)> probe;
};

// A field read the same way in every version.
std::function<Probe(const PythonVersion&)> Always(Probe probe) {
  return [probe](const PythonVersion&) { return probe; };
}

// A field that exists from one version on.
std::function<Probe(const PythonVersion&)> Since(int major, int minor, Probe probe) {
  return [=](const PythonVersion& v) { return v.AtLeast(major, minor) ? probe : Absent(); };
}

// A field read one way in Python 2, another in Python 3.
std::function<Probe(const PythonVersion&)> Py2Or3(Probe py2, Probe py3) {
  return [=](const PythonVersion& v) { return Py3(v) ? py3 : py2; };
}

#define PYPERF_FIELD(name) #name, &pyperf_offsets::name

const std::vector<FieldSpec>& Fields() {
  static const std::vector<FieldSpec> fields = {
      // Which chain and string form to read is a choice per version, not a header value.
      {PYPERF_FIELD(frame_kind), 0,
       [](const PythonVersion& v) {
         return Value(v.AtLeast(3, 11) ? PYPERF_FRAME_INTERPRETER : PYPERF_FRAME_OBJECT);
       }},
      {PYPERF_FIELD(string_kind), 0,
       Py2Or3(Value(PYPERF_STRING_BYTES), Value(PYPERF_STRING_UNICODE))},
      {PYPERF_FIELD(object_type), 8, Always(OffsetOf("PyObject", "ob_type"))},
      {PYPERF_FIELD(type_name), 8, Always(OffsetOf("PyTypeObject", "tp_name"))},
      {PYPERF_FIELD(tuple_items), 0, Always(OffsetOf("PyTupleObject", "ob_item"))},
      {PYPERF_FIELD(var_object_size), 8, Always(OffsetOf("PyVarObject", "ob_size"))},
      {PYPERF_FIELD(string_data), 0,
       Py2Or3(OffsetOf("PyStringObject", "ob_sval"), SizeOf("PyASCIIObject"))},
      {PYPERF_FIELD(unicode_state), 4, Py2Or3(Absent(), OffsetOf("PyASCIIObject", "state"))},
      {PYPERF_FIELD(unicode_length), 8,
       Py2Or3(OffsetOf("PyStringObject", "ob_size"), OffsetOf("PyASCIIObject", "length"))},
      {PYPERF_FIELD(compact_unicode_data), 0, Py2Or3(Absent(), SizeOf("PyCompactUnicodeObject"))},
      {PYPERF_FIELD(code_filename), 8, Always(OffsetOf("PyCodeObject", "co_filename"))},
      {PYPERF_FIELD(code_name), 8, Always(OffsetOf("PyCodeObject", "co_name"))},
      {PYPERF_FIELD(code_firstlineno), 4, Always(OffsetOf("PyCodeObject", "co_firstlineno"))},
      {PYPERF_FIELD(code_argcount), 4, Always(OffsetOf("PyCodeObject", "co_argcount"))},
      {PYPERF_FIELD(code_varnames), 8,
       [](const PythonVersion& v) {
         return OffsetOf("PyCodeObject", v.AtLeast(3, 11) ? "co_localsplusnames" : "co_varnames");
       }},
      {PYPERF_FIELD(code_linetable), 8,
       [](const PythonVersion& v) {
         return OffsetOf("PyCodeObject", v.AtLeast(3, 10) ? "co_linetable" : "co_lnotab");
       }},
      {PYPERF_FIELD(code_code_adaptive), 0,
       Since(3, 11, OffsetOf("PyCodeObject", "co_code_adaptive"))},
      {PYPERF_FIELD(code_code), 8,
       [](const PythonVersion& v) {
         return v.AtLeast(3, 11) ? Absent() : OffsetOf("PyCodeObject", "co_code");
       }},
      {PYPERF_FIELD(bytes_data), 0,
       Py2Or3(OffsetOf("PyStringObject", "ob_sval"), OffsetOf("PyBytesObject", "ob_sval"))},
      // How lines are found is a choice per version: lnotab until 3.9 (signed
      // line deltas from 3.6), the 3.10 linetable, location entries after.
      {PYPERF_FIELD(line_table_format), 0,
       [](const PythonVersion& v) {
         if (v.AtLeast(3, 11)) return Value(PYPERF_LINES_LOCATIONS);
         if (v.AtLeast(3, 10)) return Value(PYPERF_LINES_LINETABLE);
         return Value(v.AtLeast(3, 6) ? PYPERF_LINES_LNOTAB_SIGNED : PYPERF_LINES_LNOTAB);
       }},
      // f_lasti counts 2-byte instructions on 3.10 only; the BPF program
      // reports bytes everywhere else.
      {PYPERF_FIELD(lasti_unit), 0,
       [](const PythonVersion& v) { return Value(v.AtLeast(3, 10) && !v.AtLeast(3, 11) ? 2 : 1); }},
      {PYPERF_FIELD(frame_back), 8,
       [](const PythonVersion& v) { return Frame(v, "f_back", "previous"); }},
      {PYPERF_FIELD(frame_code), 8,
       [](const PythonVersion& v) {
         return Frame(v, "f_code", v.AtLeast(3, 13) ? "f_executable" : "f_code");
       }},
      {PYPERF_FIELD(frame_localsplus), 0,
       [](const PythonVersion& v) { return Frame(v, "f_localsplus", "localsplus"); }},
      {PYPERF_FIELD(frame_lasti), 4,
       [](const PythonVersion& v) { return Frame(v, "f_lasti", nullptr); }},
      {PYPERF_FIELD(frame_prev_instr), 8,
       [](const PythonVersion& v) {
         return Frame(v, nullptr, v.AtLeast(3, 13) ? "instr_ptr" : "prev_instr");
       }},
      {PYPERF_FIELD(frame_owner), 1,
       [](const PythonVersion& v) { return Frame(v, nullptr, "owner"); }},
      // The lowest owner value of frames that are not Python calls: 3.12's
      // C-stack shims; 3.14 puts interpreter entry frames just below them;
      // 3.15 has no C-stack shims left.
      {PYPERF_FIELD(frame_owner_shim), 0,
       [](const PythonVersion& v) {
         if (v.AtLeast(3, 14)) return Value("FRAME_OWNED_BY_INTERPRETER");
         return v.AtLeast(3, 12) ? Value("FRAME_OWNED_BY_CSTACK") : Absent();
       }},
      // 3.11 says which frame an eval-loop call began with; 3.12 replaced the
      // flag by shim frames.
      {PYPERF_FIELD(frame_is_entry), 1,
       [](const PythonVersion& v) {
         return v.AtLeast(3, 11) && !v.AtLeast(3, 12) ? Frame(v, nullptr, "is_entry") : Absent();
       }},
      // 0 means "no tag": the BPF program masks unconditionally.
      {PYPERF_FIELD(stackref_tag_bits), 0,
       [](const PythonVersion& v) { return v.AtLeast(3, 14) ? Value("Py_TAG_BITS") : Value(0); }},
      {PYPERF_FIELD(tstate_frame), 8,
       [](const PythonVersion& v) {
         if (v.AtLeast(3, 13)) return OffsetOf("PyThreadState", "current_frame");
         return OffsetOf("PyThreadState", v.AtLeast(3, 11) ? "cframe" : "frame");
       }},
      {PYPERF_FIELD(cframe_current_frame), 8,
       [](const PythonVersion& v) {
         return Py311To312(v) ? OffsetOf("_PyCFrame", "current_frame") : Absent();
       }},
      {PYPERF_FIELD(tstate_next), 8, Always(OffsetOf("PyThreadState", "next"))},
      {PYPERF_FIELD(tstate_thread_id), 8, Always(OffsetOf("PyThreadState", "thread_id"))},
      {PYPERF_FIELD(tstate_native_thread_id), 8,
       Since(3, 11, OffsetOf("PyThreadState", "native_thread_id"))},
      {PYPERF_FIELD(interp_tstate_head), 8,
       [](const PythonVersion& v) {
         return OffsetOf("PyInterpreterState", v.AtLeast(3, 11) ? "threads.head" : "tstate_head");
       }},
      {PYPERF_FIELD(interp_next), 8, Always(OffsetOf("PyInterpreterState", "next"))},
      {PYPERF_FIELD(runtime_interp_main), 8,
       Since(3, 7, OffsetOf("_PyRuntimeState", "interpreters.main"))},
      {PYPERF_FIELD(runtime_interp_head), 8,
       Since(3, 7, OffsetOf("_PyRuntimeState", "interpreters.head"))},
      // --async-tasks: 0 in every table. Each process's come from its build's
      // .AsyncioDebug section and _Py_DebugOffsets (PyAsyncioOffsets.h);
      // test_debug_offsets.cc checks those against the headers,
      // test_py_asyncio_offsets.cc finds the sections.
      {PYPERF_FIELD(tstate_running_task), 0, Always(Value(0))},
      {PYPERF_FIELD(task_name), 0, Always(Value(0))},
      {PYPERF_FIELD(task_awaited_by), 0, Always(Value(0))},
      {PYPERF_FIELD(task_is_task), 0, Always(Value(0))},
      {PYPERF_FIELD(task_awaited_by_is_set), 0, Always(Value(0))},
      {PYPERF_FIELD(task_coro), 0, Always(Value(0))},
      {PYPERF_FIELD(gen_iframe), 0, Always(Value(0))},
      {PYPERF_FIELD(type_flags), 0, Always(Value(0))},
      {PYPERF_FIELD(long_tag), 0, Always(Value(0))},
      {PYPERF_FIELD(long_digits), 0, Always(Value(0))},
      {PYPERF_FIELD(set_table), 0, Always(Value(0))},
      {PYPERF_FIELD(set_mask), 0, Always(Value(0))},
  };
  return fields;
}

#undef PYPERF_FIELD

// Layout facts the BPF program hardcodes or relies on, checked from the
// version `since` on, through `until` (read_py_string's unicode state bits on
// every 3.x).
struct BpfAssumption {
  const char* name;
  const char* expr;
  long expected;
  PythonVersion since;
  PythonVersion until{99, 99, 0};  // the last minor it applies to
};
const std::vector<BpfAssumption>& BpfAssumptions() {
  static const std::vector<BpfAssumption> facts = {
      {"unicode_compact_bit", "StateBit(0)", 5, {3, 0, 0}},
      {"unicode_ascii_bit", "StateBit(1)", 6, {3, 0, 0}},
      {"unicode_kind_bit", "StateBit(2)", 2, {3, 0, 0}},
      // A legacy (not compact) string keeps a pointer to its characters
      // where a compact one's characters start.
      {"legacy_data_after_compact",
       "(long)offsetof(PyUnicodeObject, data) - (long)sizeof(PyCompactUnicodeObject)",
       0,
       {3, 0, 0}},
      {"compact_utf8_after_ascii",
       "(long)offsetof(PyCompactUnicodeObject, utf8) - (long)sizeof(PyASCIIObject)",
       8,
       {3, 0, 0}},
      // walk_python_stack finds a call's previous _PyCFrame right after its
      // current_frame (3.11, 3.12: the versions with a _PyCFrame).
      {"cframe_previous_after_current_frame",
       "(long)offsetof(_PyCFrame, previous) - (long)offsetof(_PyCFrame, current_frame)",
       8,
       {3, 11, 0},
       {3, 12, 0}},
      // walk_python_stack skips owners >= frame_owner_shim: every Python
      // call's owner must lie below it, every shim's at or above it.
      {"python_owners_below_shim",
       "FRAME_OWNED_BY_THREAD < FRAME_OWNED_BY_CSTACK && "
       "FRAME_OWNED_BY_GENERATOR < FRAME_OWNED_BY_CSTACK && "
       "FRAME_OWNED_BY_FRAME_OBJECT < FRAME_OWNED_BY_CSTACK",
       1,
       {3, 12, 0},
       {3, 14, 0}},
      {"python_owners_below_interpreter_shim",
       "FRAME_OWNED_BY_THREAD < FRAME_OWNED_BY_INTERPRETER && "
       "FRAME_OWNED_BY_GENERATOR < FRAME_OWNED_BY_INTERPRETER && "
       "FRAME_OWNED_BY_FRAME_OBJECT < FRAME_OWNED_BY_INTERPRETER",
       1,
       {3, 14, 0}},
      {"cstack_shim_above_interpreter_shim",
       "FRAME_OWNED_BY_CSTACK > FRAME_OWNED_BY_INTERPRETER",
       1,
       {3, 14, 0},
       {3, 14, 0}},
      // A _PyStackRef is one pointer-sized word, so masking the tag bits of
      // the word read at f_executable / localsplus gives the object.
      {"stackref_is_one_word", "sizeof(_PyStackRef) == sizeof(void *)", 1, {3, 14, 0}},
  };
  return facts;
}
bool Applies(const BpfAssumption& fact, const PythonVersion& v) {
  return v.AtLeast(fact.since.major, fact.since.minor) &&
         !v.AtLeast(fact.until.major, fact.until.minor + 1);
}

// Bit index of PyASCIIObject.state.compact (0), .ascii (1) or the lowest bit
// of .kind (2) in the state word.
constexpr const char kStateBitHelper[] = R"(
static long StateBit(int which) {
  PyASCIIObject o;
  unsigned int word = 0;
  memset(&o, 0, sizeof(o));
  if (which == 0) o.state.compact = 1; else if (which == 1) o.state.ascii = 1; else o.state.kind = 1;
  memcpy(&word, (char *)&o + offsetof(PyASCIIObject, state), sizeof(word));
  return word ? (long)__builtin_ctz(word) : -1L;
}
)";

// Internal headers holding the structs we need (PyInterpreterState moved
// there in 3.8; _PyRuntimeState is internal from its start in 3.7).
std::vector<const char*> InternalHeaders(const PythonVersion& v) {
  if (v.AtLeast(3, 14))
    return {"internal/pycore_frame.h", "internal/pycore_interp.h", "internal/pycore_runtime.h",
            "internal/pycore_stackref.h"};
  if (v.AtLeast(3, 11))
    return {"internal/pycore_frame.h", "internal/pycore_interp.h", "internal/pycore_runtime.h"};
  if (v.AtLeast(3, 9)) return {"internal/pycore_interp.h", "internal/pycore_runtime.h"};
  if (v.AtLeast(3, 8)) return {"internal/pycore_pystate.h"};
  if (v.AtLeast(3, 7)) return {"internal/pystate.h"};
  return {};
}

std::string ProbeSource(const PythonVersion& v) {
  std::ostringstream src;
  // The internal headers refuse to be included without it.
  if (!InternalHeaders(v).empty()) src << "#define Py_BUILD_CORE 1\n";
  src << "#include <Python.h>\n#include <frameobject.h>\n";
  for (const char* header : InternalHeaders(v)) src << "#include <" << header << ">\n";
  src << "#include <stddef.h>\n#include <stdio.h>\n#include <string.h>\n";
  if (Py3(v)) src << kStateBitHelper;
  src << "int main(void) {\n";
  // Each line: name value width (width -1 where it has no meaning).
  auto emit = [&src](const std::string& name, const std::string& value, const std::string& width) {
    src << "  printf(\"%s %ld %ld\\n\", \"" << name << "\", (long)(" << value << "), (long)("
        << width << "));\n";
  };
  for (const FieldSpec& field : Fields()) {
    Probe p = field.probe(v);
    switch (p.kind) {
      case Probe::kAbsent:
        break;
      case Probe::kOffsetOf:
        emit(field.name, "offsetof(" + p.type + ", " + p.expr + ")",
             "sizeof(((" + p.type + " *)0)->" + p.expr + ")");
        break;
      case Probe::kSizeOf:
        emit(field.name, "sizeof(" + p.type + ")", "-1");
        break;
      case Probe::kValue:
        emit(field.name, p.expr, "-1");
        break;
    }
  }
  for (const BpfAssumption& fact : BpfAssumptions()) {
    if (Applies(fact, v)) emit(std::string("bpf.") + fact.name, fact.expr, "-1");
  }
  src << "  return 0;\n}\n";
  return src.str();
}

struct ProbedValue {
  long value = 0;
  long width = -1;
};
using ProbeOutput = std::map<std::string, ProbedValue>;

// Compiles the probe against the interpreter's headers with the system cc and runs it.
Result<ProbeOutput> RunProbe(const InterpreterHeaders& info) {
  auto run = pyperf_test::CompileAndRunProbe(info, ProbeSource(info.version));
  if (!run.ok()) return run.status();
  ProbeOutput out;
  std::istringstream lines(*run);
  std::string name;
  ProbedValue value;
  while (lines >> name >> value.value >> value.width) out[name] = value;
  return out;
}

// Runs the probe for `python` and compares every field with FindOffsets' table.
// `expected_minor` ("3.11") guards against a mislabelled install.
// With `root`, `python` is an interpreter inside that Debian root.
void CheckInterpreterAgainstItsHeaders(const std::string& python, const std::string& expected_minor,
                                       const pyperf_test::PythonRoot* root = nullptr,
                                       bool free_threaded = false) {
  auto info = pyperf_test::QueryInterpreterHeaders(python, root);
  ASSERT_TRUE(info.ok()) << info.error();
  const PythonVersion& v = info->version;
  ASSERT_EQ(std::to_string(v.major) + "." + std::to_string(v.minor), expected_minor)
      << python << " reports " << v.ToString();
  if (!FileExists(info->include_dir + "/Python.h")) {
    PYPERF_SKIP_OR_FAIL("no headers for " + python + " " + v.ToString() + " in " +
                        info->include_dir + " (for Debian's interpreters: apt-get install python" +
                        expected_minor + "-dev)");
  }

  const pyperf_offsets* table = FindOffsets(v, free_threaded);
  ASSERT_NE(table, nullptr) << "no offsets table for Python " << v.ToString();
  EXPECT_EQ(OffsetsLayoutName(v, free_threaded), expected_minor + (free_threaded ? "t" : ""));

  auto probed = RunProbe(*info);
  ASSERT_TRUE(probed.ok()) << probed.error();

  for (const FieldSpec& field : Fields()) {
    pp_s64 in_table = table->*field.member;
    auto it = probed->find(field.name);
    if (field.probe(v).kind == Probe::kAbsent) {
      EXPECT_TRUE(it == probed->end()) << "probe printed " << field.name << " for " << v.ToString();
      EXPECT_EQ(in_table, -1) << field.name << " does not exist in " << v.ToString()
                              << " and must be -1";
      continue;
    }
    if (it == probed->end()) {
      ADD_FAILURE() << "probe printed no value for " << field.name;
      continue;
    }
    EXPECT_EQ(in_table, it->second.value) << field.name << " for Python " << v.ToString()
                                          << " (headers in " << info->include_dir << ")";
    if (field.width > 0) {
      EXPECT_EQ(it->second.width, field.width)
          << field.name << " in " << v.ToString() << " is not the size the BPF program reads";
    }
  }
  for (const BpfAssumption& fact : BpfAssumptions()) {
    if (!Applies(fact, v)) continue;
    auto it = probed->find(std::string("bpf.") + fact.name);
    ASSERT_NE(it, probed->end()) << fact.name;
    EXPECT_EQ(it->second.value, fact.expected)
        << fact.name << " in " << v.ToString() << " differs from what the BPF program assumes";
  }
}

class PyOffsetsAgainstHeaders : public ::testing::TestWithParam<std::string> {};

TEST_P(PyOffsetsAgainstHeaders, TableMatchesInterpreterHeaders) {
  const std::string& minor = GetParam();
  auto python = pyperf_test::PyenvInterpreter(minor);
  if (!python) {
    PYPERF_SKIP_OR_FAIL("no pyenv interpreter for Python " + minor + " under " +
                        pyperf_test::PyenvRoot() + "/versions");
  }
  CheckInterpreterAgainstItsHeaders(python->path, minor);
}

INSTANTIATE_TEST_SUITE_P(Pyenv, PyOffsetsAgainstHeaders,
                         ::testing::Values("2.7", "3.6", "3.7", "3.8", "3.9", "3.10", "3.11",
                                           "3.12", "3.13"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = "Python" + info.param;
                           for (char& c : name)
                             if (c == '.') c = '_';
                           return name;
                         });

// Debian's own 3.11 (3.11.2 on bookworm) is profiled too; its headers come
// from python3.11-dev.
TEST(PyOffsetsSystemPython, Debian311MatchesTable) {
  const std::string python = "/usr/bin/python3.11";
  if (!FileExists(python)) PYPERF_SKIP_OR_FAIL("no " + python + " on this machine");
  CheckInterpreterAgainstItsHeaders(python, "3.11");
}

// Newer CPythons from Debian's trixie (3.13.x) and sid (3.14, 3.15), in roots
// scripts/python-roots.sh builds (here, on first use) with their -dev headers.
class PyOffsetsDebianRoot : public ::testing::TestWithParam<std::string> {};

TEST_P(PyOffsetsDebianRoot, TableMatchesInterpreterHeaders) {
  std::string why;
  auto root = pyperf_test::EnsurePythonRoot(GetParam(), &why);
  if (!root) PYPERF_SKIP_OR_FAIL("no Debian " + GetParam() + " root: " + why);
  CheckInterpreterAgainstItsHeaders(root->python, root->minor, &*root);
}

INSTANTIATE_TEST_SUITE_P(Roots, PyOffsetsDebianRoot,
                         ::testing::Values("trixie", "sid", "sid/python3.15"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == '/' || c == '.') c = '_';
                           return name;
                         });

// The free-threaded 3.13t of scripts/free-threaded-python.sh (its pyconfig.h
// defines Py_GIL_DISABLED, so the probe sees the free-threaded layout).
TEST(PyOffsetsFreeThreaded, Python313tMatchesTable) {
  std::string why;
  auto python = pyperf_test::FreeThreadedPython(&why);
  if (!python) PYPERF_SKIP_OR_FAIL("no free-threaded CPython: " + why);
  CheckInterpreterAgainstItsHeaders(*python, "3.13", nullptr, /*free_threaded=*/true);
}

TEST(PyOffsetsLookup, OnlyFreeThreaded313HasAFreeThreadedTable) {
  EXPECT_NE(FindOffsets(PythonVersion{3, 13, 5}, true), FindOffsets(PythonVersion{3, 13, 5}));
  EXPECT_EQ(OffsetsLayoutName(PythonVersion{3, 13, 0}, true), "3.13t");
  for (PythonVersion v :
       {PythonVersion{3, 12, 0}, PythonVersion{3, 14, 0}, PythonVersion{3, 15, 2}}) {
    EXPECT_EQ(FindOffsets(v, true), nullptr) << v.ToString();
    EXPECT_EQ(OffsetsLayoutName(v, true), "") << v.ToString();
  }
}

TEST(PyOffsetsLookup, UnknownVersionsHaveNoTable) {
  for (PythonVersion v : {PythonVersion{3, 99, 0}, PythonVersion{2, 6, 9}, PythonVersion{3, 5, 10},
                          PythonVersion{3, 16, 0}, PythonVersion{4, 0, 0}, PythonVersion{}}) {
    EXPECT_EQ(FindOffsets(v), nullptr) << v.ToString();
    EXPECT_EQ(OffsetsLayoutName(v), "") << v.ToString();
  }
}

TEST(PyOffsetsLookup, EveryMicroOfAMinorUsesThatMinorsTable) {
  for (const char* minor :
       {"2.7", "3.6", "3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14", "3.15"}) {
    PythonVersion first;
    ASSERT_EQ(std::sscanf(minor, "%d.%d", &first.major, &first.minor), 2);
    PythonVersion later = first;
    later.micro = 42;
    ASSERT_NE(FindOffsets(first), nullptr) << minor;
    EXPECT_EQ(FindOffsets(later), FindOffsets(first)) << minor;
    EXPECT_EQ(OffsetsLayoutName(first), minor);
  }
}

TEST(PyOffsetsSchema, ProbeCoversEveryField) {
  static_assert(sizeof(pyperf_offsets) % sizeof(pp_s64) == 0, "pyperf_offsets is all pp_s64");
  constexpr size_t kFields = sizeof(pyperf_offsets) / sizeof(pp_s64);
  pyperf_offsets o{};
  std::set<size_t> covered;
  for (const FieldSpec& field : Fields()) {
    auto at = reinterpret_cast<const char*>(&(o.*field.member)) - reinterpret_cast<const char*>(&o);
    EXPECT_TRUE(covered.insert(static_cast<size_t>(at)).second) << field.name << " listed twice";
  }
  EXPECT_EQ(covered.size(), kFields) << "a pyperf_offsets field has no probe in test_py_offsets.cc";
}

}  // namespace
}  // namespace ebpf::pyperf
