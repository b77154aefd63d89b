// PyDebugOffsets against the interpreters themselves. For every CPython 3.13+
// on the machine (pyenv's 3.13, 3.13.x / 3.14 / 3.15 in the Debian roots of
// scripts/python-roots.sh, run as containers, and the free-threaded 3.13t of
// scripts/free-threaded-python.sh):
//  - the member positions PyPerf uses to decode _Py_DebugOffsets are the
//    header's offsetof(_Py_DebugOffsets, member);
//  - what PyPerf reads from a live process's _PyRuntime equals, member by
//    member, the offsetof/sizeof the interpreter's own headers give;
//  - merging those values into the version's table gives the table back (so
//    the table and the process agree today), with the table only supplying
//    what _Py_DebugOffsets does not cover.
// Plus the decoder's checks on made-up bytes: cookie, version, free-threaded
// builds, implausible values, and a patch release that moved a field.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "PyDebugOffsets.h"
#include "PyOffsets.h"
#include "PythonProcess.h"
#include "support/header_probe.h"
#include "support/python_roots.h"
#include "support/test_support.h"

namespace ebpf::pyperf {
namespace {

using pyperf_test::ChildProcess;
using pyperf_test::InterpreterHeaders;
using pyperf_test::PythonRoot;

// What the headers say each member PyPerf reads must hold, as C expressions
// (transcribed from _Py_DebugOffsets' initialiser in pycore_runtime_init.h /
// pycore_debug_offsets.h).
const std::map<std::string, std::string>& ExpectedFromHeaders() {
  static const std::map<std::string, std::string> expected = {
      {"version", "PY_VERSION_HEX"},
      {"free_threaded", "_Py_Debug_Free_Threaded"},
      {"runtime_state.size", "sizeof(_PyRuntimeState)"},
      {"runtime_state.interpreters_head", "offsetof(_PyRuntimeState, interpreters.head)"},
      {"interpreter_state.size", "sizeof(PyInterpreterState)"},
      {"interpreter_state.next", "offsetof(PyInterpreterState, next)"},
      {"interpreter_state.threads_head", "offsetof(PyInterpreterState, threads.head)"},
      {"thread_state.size", "sizeof(PyThreadState)"},
      {"thread_state.next", "offsetof(PyThreadState, next)"},
      {"thread_state.current_frame", "offsetof(PyThreadState, current_frame)"},
      {"thread_state.thread_id", "offsetof(PyThreadState, thread_id)"},
      {"thread_state.native_thread_id", "offsetof(PyThreadState, native_thread_id)"},
      {"interpreter_frame.size", "sizeof(_PyInterpreterFrame)"},
      {"interpreter_frame.previous", "offsetof(_PyInterpreterFrame, previous)"},
      {"interpreter_frame.executable", "offsetof(_PyInterpreterFrame, f_executable)"},
      {"interpreter_frame.instr_ptr", "offsetof(_PyInterpreterFrame, instr_ptr)"},
      {"interpreter_frame.localsplus", "offsetof(_PyInterpreterFrame, localsplus)"},
      {"interpreter_frame.owner", "offsetof(_PyInterpreterFrame, owner)"},
      {"code_object.size", "sizeof(PyCodeObject)"},
      {"code_object.filename", "offsetof(PyCodeObject, co_filename)"},
      {"code_object.name", "offsetof(PyCodeObject, co_name)"},
      {"code_object.linetable", "offsetof(PyCodeObject, co_linetable)"},
      {"code_object.firstlineno", "offsetof(PyCodeObject, co_firstlineno)"},
      {"code_object.argcount", "offsetof(PyCodeObject, co_argcount)"},
      {"code_object.localsplusnames", "offsetof(PyCodeObject, co_localsplusnames)"},
      {"code_object.co_code_adaptive", "offsetof(PyCodeObject, co_code_adaptive)"},
      {"gen_object.gi_iframe", "offsetof(PyGenObject, gi_iframe)"},
      {"type_object.tp_flags", "offsetof(PyTypeObject, tp_flags)"},
      {"long_object.lv_tag", "offsetof(PyLongObject, long_value.lv_tag)"},
      {"long_object.ob_digit", "offsetof(PyLongObject, long_value.ob_digit)"},
      {"set_object.table", "offsetof(PySetObject, table)"},
      {"set_object.mask", "offsetof(PySetObject, mask)"},
      {"pyobject.size", "sizeof(PyObject)"},
      {"pyobject.ob_type", "offsetof(PyObject, ob_type)"},
      {"type_object.size", "sizeof(PyTypeObject)"},
      {"type_object.tp_name", "offsetof(PyTypeObject, tp_name)"},
      {"tuple_object.size", "sizeof(PyTupleObject)"},
      {"tuple_object.ob_item", "offsetof(PyTupleObject, ob_item)"},
      {"tuple_object.ob_size", "offsetof(PyTupleObject, ob_base.ob_size)"},
      {"bytes_object.size", "sizeof(PyBytesObject)"},
      {"bytes_object.ob_sval", "offsetof(PyBytesObject, ob_sval)"},
      {"unicode_object.size", "sizeof(PyUnicodeObject)"},
      {"unicode_object.state", "offsetof(PyUnicodeObject, _base._base.state)"},
      {"unicode_object.length", "offsetof(PyUnicodeObject, _base._base.length)"},
      {"unicode_object.asciiobject_size", "sizeof(PyASCIIObject)"},
      {"unicode_object.compactunicodeobject_size", "sizeof(PyCompactUnicodeObject)"},
  };
  return expected;
}

// The members PyPerf reads from `v`'s _Py_DebugOffsets: the covered ones,
// their struct sizes, the header, and sizeof(PyCompactUnicodeObject) where
// published.
std::vector<std::string> MembersPyPerfReads(const PythonVersion& v) {
  std::vector<std::string> members = {"version", "free_threaded", "runtime_state.size"};
  for (const DebugOffsetsMember& m : DebugOffsetsLayout(v)) {
    const std::string path = m.path;
    // --async-tasks (PyAsyncioOffsets.h) reads these where they are published.
    if (path == "unicode_object.compactunicodeobject_size" || path == "gen_object.gi_iframe" ||
        (v.AtLeast(3, 14) && (path == "type_object.tp_flags" || path == "long_object.lv_tag" ||
                              path == "long_object.ob_digit" || path == "set_object.table" ||
                              path == "set_object.mask")))
      members.push_back(m.path);
  }
  for (const DebugOffsetsCoverage& c : DebugOffsetsCoverageTable()) {
    for (const char* m : {c.member, c.size_member}) {
      if (std::find(members.begin(), members.end(), m) == members.end()) members.push_back(m);
    }
  }
  return members;
}

std::string ProbeSource(const PythonVersion& v) {
  std::ostringstream src;
  src << "#define Py_BUILD_CORE 1\n#include <Python.h>\n"
         "#include <internal/pycore_frame.h>\n#include <internal/pycore_interp.h>\n"
         "#include <internal/pycore_runtime.h>\n#include <stddef.h>\n#include <stdio.h>\n"
         "int main(void) {\n";
  for (const DebugOffsetsMember& m : DebugOffsetsLayout(v)) {
    src << "  printf(\"position %s %lu\\n\", \"" << m.path
        << "\", (unsigned long)offsetof(_Py_DebugOffsets, " << m.path << "));\n";
  }
  for (const auto& [member, expr] : ExpectedFromHeaders()) {
    const auto& layout = DebugOffsetsLayout(v);
    bool in_layout = std::any_of(layout.begin(), layout.end(),
                                 [&](const DebugOffsetsMember& m) { return member == m.path; });
    if (!in_layout) continue;  // a member this version does not publish
    src << "  printf(\"value %s %lu\\n\", \"" << member << "\", (unsigned long)(" << expr
        << "));\n";
  }
  // runtime_interp_main is not in _Py_DebugOffsets: derived from the table.
  src << "  printf(\"value interpreters.main %lu\\n\", "
         "(unsigned long)offsetof(_PyRuntimeState, interpreters.main));\n";
  src << "  return 0;\n}\n";
  return src.str();
}

struct HeaderFacts {
  std::map<std::string, uint64_t> positions;
  std::map<std::string, uint64_t> values;
};

Result<HeaderFacts> ProbeHeaders(const InterpreterHeaders& headers) {
  auto out = pyperf_test::CompileAndRunProbe(headers, ProbeSource(headers.version));
  if (!out.ok()) return out.status();
  HeaderFacts facts;
  std::istringstream in(*out);
  std::string kind, name;
  uint64_t value;
  while (in >> kind >> name >> value)
    (kind == "position" ? facts.positions : facts.values)[name] = value;
  return facts;
}

// An interpreter with _Py_DebugOffsets: pyenv's 3.13, or one in a Debian root.
struct Case {
  std::string name;
  std::string pyenv_minor;     // pyenv case
  std::string suite;           // root case
  bool free_threaded = false;  // scripts/free-threaded-python.sh's 3.13t
};
std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

class DebugOffsetsAgainstHeaders : public ::testing::TestWithParam<Case> {
 protected:
  // Finds the interpreter and its headers; false (after a skip or failure) if absent.
  bool Resolve() {
    const Case& c = GetParam();
    if (c.free_threaded) {
      std::string why;
      auto path = pyperf_test::FreeThreadedPython(&why);
      if (!path) {
        Skip("no free-threaded CPython: " + why);
        return false;
      }
      python_ = *path;
    } else if (!c.pyenv_minor.empty()) {
      auto interp = pyperf_test::PyenvInterpreter(c.pyenv_minor);
      if (!interp) {
        Skip("no pyenv interpreter for Python " + c.pyenv_minor);
        return false;
      }
      python_ = interp->path;
    } else {
      std::string why;
      auto root = pyperf_test::EnsurePythonRoot(c.suite, &why);
      if (!root) {
        Skip("no Debian " + c.suite + " root: " + why);
        return false;
      }
      root_ = *root;
      python_ = root_->python;
    }
    auto headers = pyperf_test::QueryInterpreterHeaders(python_, root_ ? &*root_ : nullptr);
    if (!headers.ok()) {
      ADD_FAILURE() << headers.error();
      return false;
    }
    headers_ = *headers;
    if (!pyperf_test::FileExists(headers_.include_dir + "/Python.h")) {
      Skip("no headers in " + headers_.include_dir);
      return false;
    }
    return true;
  }
  void Skip(const std::string& why) {
    if (pyperf_test::StrictMode()) {
      ADD_FAILURE() << "PYPERF_TEST_STRICT=1 and this test cannot run: " << why;
    } else {
      skipped_ = why;
    }
  }
  std::vector<std::string> Argv(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {python_};
    argv.insert(argv.end(), args.begin(), args.end());
    return root_ ? pyperf_test::ContainerArgv(*root_, argv) : argv;
  }

  std::string python_;
  std::optional<PythonRoot> root_;
  InterpreterHeaders headers_;
  std::string skipped_;
};

#define RESOLVE_OR_RETURN()                            \
  do {                                                 \
    if (!Resolve()) {                                  \
      if (!skipped_.empty()) GTEST_SKIP() << skipped_; \
      return;                                          \
    }                                                  \
  } while (0)

TEST_P(DebugOffsetsAgainstHeaders, MemberPositionsMatchTheHeader) {
  RESOLVE_OR_RETURN();
  const auto& layout = DebugOffsetsLayout(headers_.version);
  ASSERT_FALSE(layout.empty()) << "PyPerf knows no _Py_DebugOffsets for "
                               << headers_.version.ToString();
  auto facts = ProbeHeaders(headers_);
  ASSERT_TRUE(facts.ok()) << facts.error();
  for (const DebugOffsetsMember& m : layout) {
    auto it = facts->positions.find(m.path);
    ASSERT_NE(it, facts->positions.end()) << m.path;
    EXPECT_EQ(m.position, it->second)
        << "_Py_DebugOffsets." << m.path << " in " << headers_.version.ToString();
  }
}

TEST_P(DebugOffsetsAgainstHeaders, LiveValuesMatchTheHeaders) {
  RESOLVE_OR_RETURN();
  auto facts = ProbeHeaders(headers_);
  ASSERT_TRUE(facts.ok()) << facts.error();

  ChildProcess python(Argv({"-c",
                            "import sys, time\n"
                            "sys.stdout.write('ready\\n'); sys.stdout.flush()\n"
                            "time.sleep(120)\n"}));
  ASSERT_TRUE(
      pyperf_test::WaitFor([&] { return python.Stdout() == "ready\n"; }, std::chrono::seconds(20)))
      << "interpreter did not start: " << python.Stderr();
  pid_t pid = python.pid();
  if (root_) {
    // ChildProcess is unshare; its one child is the interpreter (host pid).
    auto children = pyperf_test::ChildPids(python.pid());
    ASSERT_EQ(children.size(), 1u);
    pid = children[0];
  }
  auto info = InspectPythonProcess(pid);
  ASSERT_TRUE(info.ok()) << info.error();
  ASSERT_EQ(info->version, headers_.version);
  ASSERT_TRUE(info->symbols.py_runtime.has_value());

  auto debug = ReadDebugOffsets(pid, *info->symbols.py_runtime, info->version);
  ASSERT_TRUE(debug.ok()) << debug.error();
  EXPECT_EQ(debug->free_threaded, GetParam().free_threaded);
  EXPECT_EQ(debug->version, headers_.version);
  for (const std::string& member : MembersPyPerfReads(info->version)) {
    auto read = debug->Get(member);
    auto expected = facts->values.find(member);
    ASSERT_TRUE(read.has_value()) << member;
    ASSERT_NE(expected, facts->values.end()) << "no header expression for " << member;
    EXPECT_EQ(*read, expected->second) << "_Py_DebugOffsets." << member << " read from pid " << pid
                                       << " (" << headers_.version.ToString() << ")";
  }

  // Merged into the version's table: the table agrees with the process, and
  // interpreters.main (from the table's distance to head) is the header's.
  const pyperf_offsets* table = FindOffsets(info->version, debug->free_threaded);
  ASSERT_NE(table, nullptr);
  auto merged = MergeDebugOffsets(*table, *debug);
  ASSERT_TRUE(merged.ok()) << merged.error();
  EXPECT_EQ(merged->runtime_interp_main,
            static_cast<pp_s64>(facts->values.at("interpreters.main")));
  EXPECT_EQ(std::memcmp(&*merged, table, sizeof(pyperf_offsets)), 0)
      << "the table for " << info->version.ToString() << " disagrees with the process";

  auto resolved = OffsetsForProcess(*info, /*asyncio=*/true);
  ASSERT_TRUE(resolved.ok()) << resolved.error();
  const std::string source =
      "_Py_DebugOffsets + table " + OffsetsLayoutName(info->version, debug->free_threaded);
  if (!info->version.AtLeast(3, 14)) {
    EXPECT_EQ(resolved->source, source);
    EXPECT_EQ(resolved->offsets, table) << "equal offsets share the table's pointer";
    EXPECT_EQ(resolved->offsets->tstate_running_task, 0) << "no asyncio task state before 3.14";
    return;
  }
  // 3.14+: the table and the process's asyncio layout (PyAsyncioOffsets.h),
  // its coroutine frame the header's PyGenObject.gi_iframe.
  EXPECT_EQ(resolved->source, source + " + .AsyncioDebug") << resolved->asyncio_unavailable;
  EXPECT_EQ(std::memcmp(resolved->offsets, table, offsetof(pyperf_offsets, tstate_running_task)),
            0);
  EXPECT_GT(resolved->offsets->tstate_running_task, 0);
  const std::pair<pp_s64 pyperf_offsets::*, const char*> published[] = {
      {&pyperf_offsets::gen_iframe, "gen_object.gi_iframe"},
      {&pyperf_offsets::type_flags, "type_object.tp_flags"},
      {&pyperf_offsets::long_tag, "long_object.lv_tag"},
      {&pyperf_offsets::long_digits, "long_object.ob_digit"},
      {&pyperf_offsets::set_table, "set_object.table"},
      {&pyperf_offsets::set_mask, "set_object.mask"}};
  for (const auto& [field, member] : published)
    EXPECT_EQ(resolved->offsets->*field, static_cast<pp_s64>(facts->values.at(member))) << member;
}

INSTANTIATE_TEST_SUITE_P(
    Interpreters, DebugOffsetsAgainstHeaders,
    ::testing::Values(Case{"pyenv_3_13", "3.13", ""}, Case{"trixie_3_13", "", "trixie"},
                      Case{"sid_3_14", "", "sid"}, Case{"sid_3_15", "", "sid/python3.15"},
                      Case{"free_threaded_3_13t", "", "", true}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// Every member PyPerf reads has a header expression to be checked against.
TEST(DebugOffsetsCoverage, EveryMemberReadHasAHeaderExpression) {
  for (int minor : {13, 14, 15}) {
    for (const std::string& member : MembersPyPerfReads(PythonVersion{3, minor, 0}))
      EXPECT_EQ(ExpectedFromHeaders().count(member), 1u) << member << " of 3." << minor;
  }
}

TEST(DebugOffsetsCoverage, OnlyVersionsWithDebugOffsetsHaveALayout) {
  EXPECT_TRUE(DebugOffsetsLayout(PythonVersion{3, 12, 1}).empty());
  EXPECT_TRUE(DebugOffsetsLayout(PythonVersion{2, 7, 18}).empty());
  EXPECT_TRUE(DebugOffsetsLayout(PythonVersion{3, 16, 0}).empty());
  EXPECT_TRUE(DebugOffsetsLayout(PythonVersion{4, 13, 0}).empty());
  EXPECT_FALSE(DebugOffsetsLayout(PythonVersion{3, 13, 0}).empty());
  EXPECT_FALSE(DebugOffsetsLayout(PythonVersion{3, 14, 0}).empty());
  EXPECT_FALSE(DebugOffsetsLayout(PythonVersion{3, 15, 0}).empty());
}

// Where each member the fakes below write lies in _Py_DebugOffsets (3.13,
// 3.14, 3.15), and the struct's size up to the last member PyPerf reads, as
// literals: offsetof() from the interpreters' own headers (pyenv's 3.13.0
// pycore_runtime.h, Debian sid's 3.14 and 3.15 pycore_debug_offsets.h), not
// PyPerf's layout, so a member PyPerf places wrongly makes the made-up bytes
// disagree with it.
struct LiteralPosition {
  const char* member;
  size_t in313, in314, in315;
};
constexpr LiteralPosition kLiteralPositions[] = {
    {"version", 8, 8, 8},
    {"free_threaded", 16, 16, 16},
    {"runtime_state.size", 24, 24, 24},
    {"runtime_state.interpreters_head", 40, 40, 40},
    {"interpreter_state.size", 48, 48, 48},
    {"interpreter_state.next", 64, 64, 64},
    {"interpreter_state.threads_head", 72, 72, 72},
    {"thread_state.size", 152, 176, 176},
    {"thread_state.next", 168, 192, 192},
    {"thread_state.current_frame", 184, 208, 208},
    {"thread_state.thread_id", 192, 216, 240},
    {"thread_state.native_thread_id", 200, 224, 248},
    {"interpreter_frame.size", 224, 248, 312},
    {"interpreter_frame.previous", 232, 256, 320},
    {"interpreter_frame.executable", 240, 264, 328},
    {"interpreter_frame.instr_ptr", 248, 272, 336},
    {"interpreter_frame.localsplus", 256, 280, 344},
    {"interpreter_frame.owner", 264, 288, 352},
    {"code_object.size", 272, 312, 376},
    {"code_object.filename", 280, 320, 384},
    {"code_object.name", 288, 328, 392},
    {"code_object.linetable", 304, 344, 408},
    {"code_object.firstlineno", 312, 352, 416},
    {"code_object.argcount", 320, 360, 424},
    {"code_object.localsplusnames", 328, 368, 432},
    {"code_object.co_code_adaptive", 344, 384, 448},
    {"pyobject.size", 352, 400, 464},
    {"pyobject.ob_type", 360, 408, 472},
    {"type_object.size", 368, 416, 480},
    {"type_object.tp_name", 376, 424, 488},
    {"tuple_object.size", 400, 448, 544},
    {"tuple_object.ob_item", 408, 456, 552},
    {"tuple_object.ob_size", 416, 464, 560},
    {"bytes_object.size", 512, 592, 688},
    {"bytes_object.ob_sval", 528, 608, 704},
    {"unicode_object.size", 536, 616, 712},
    {"unicode_object.state", 544, 624, 720},
    {"unicode_object.length", 552, 632, 728},
    {"unicode_object.asciiobject_size", 560, 640, 736},
};
// The struct's bytes through the last member PyPerf reads (gc.collecting on
// 3.13; gen_object.gi_frame_state, for --async-tasks, from 3.14).
constexpr size_t kLiteralBytes313 = 584, kLiteralBytes314 = 696, kLiteralBytes315 = 824;
constexpr size_t kCompactUnicodeSizePosition315 = 744;

size_t LiteralBytes(const PythonVersion& v) {
  return v.minor == 13 ? kLiteralBytes313 : v.minor == 14 ? kLiteralBytes314 : kLiteralBytes315;
}

std::map<std::string, size_t> LiteralPositionsOf(const PythonVersion& v) {
  std::map<std::string, size_t> positions;
  for (const LiteralPosition& p : kLiteralPositions)
    positions[p.member] = v.minor == 13 ? p.in313 : v.minor == 14 ? p.in314 : p.in315;
  if (v.minor >= 15)
    positions["unicode_object.compactunicodeobject_size"] = kCompactUnicodeSizePosition315;
  return positions;
}

// Which pyperf_offsets field each _Py_DebugOffsets member must feed, as the
// headers' names say (written out here, not taken from
// DebugOffsetsCoverageTable()).
const std::vector<std::pair<std::string, pp_s64 pyperf_offsets::*>>& FieldsByMember() {
  static const std::vector<std::pair<std::string, pp_s64 pyperf_offsets::*>> fields = {
      {"pyobject.ob_type", &pyperf_offsets::object_type},
      {"type_object.tp_name", &pyperf_offsets::type_name},
      {"tuple_object.ob_item", &pyperf_offsets::tuple_items},
      {"tuple_object.ob_size", &pyperf_offsets::var_object_size},
      {"unicode_object.asciiobject_size", &pyperf_offsets::string_data},
      {"unicode_object.state", &pyperf_offsets::unicode_state},
      {"unicode_object.length", &pyperf_offsets::unicode_length},
      {"code_object.filename", &pyperf_offsets::code_filename},
      {"code_object.name", &pyperf_offsets::code_name},
      {"code_object.firstlineno", &pyperf_offsets::code_firstlineno},
      {"code_object.argcount", &pyperf_offsets::code_argcount},
      {"code_object.localsplusnames", &pyperf_offsets::code_varnames},
      {"code_object.linetable", &pyperf_offsets::code_linetable},
      {"code_object.co_code_adaptive", &pyperf_offsets::code_code_adaptive},
      {"bytes_object.ob_sval", &pyperf_offsets::bytes_data},
      {"interpreter_frame.previous", &pyperf_offsets::frame_back},
      {"interpreter_frame.executable", &pyperf_offsets::frame_code},
      {"interpreter_frame.localsplus", &pyperf_offsets::frame_localsplus},
      {"interpreter_frame.instr_ptr", &pyperf_offsets::frame_prev_instr},
      {"interpreter_frame.owner", &pyperf_offsets::frame_owner},
      {"thread_state.current_frame", &pyperf_offsets::tstate_frame},
      {"thread_state.next", &pyperf_offsets::tstate_next},
      {"thread_state.thread_id", &pyperf_offsets::tstate_thread_id},
      {"thread_state.native_thread_id", &pyperf_offsets::tstate_native_thread_id},
      {"interpreter_state.threads_head", &pyperf_offsets::interp_tstate_head},
      {"interpreter_state.next", &pyperf_offsets::interp_next},
      {"runtime_state.interpreters_head", &pyperf_offsets::runtime_interp_head},
  };
  return fields;
}

// Made-up _Py_DebugOffsets bytes for `v` (3.13, 3.14 or 3.15) holding the
// table's values, as an interpreter whose layout matches the table would
// publish them; every struct size is 64 KiB, room for any offset of the tables.
std::vector<unsigned char> FakeDebugOffsets(const PythonVersion& v, const pyperf_offsets& table,
                                            bool free_threaded = false) {
  const auto positions = LiteralPositionsOf(v);
  std::vector<unsigned char> bytes(LiteralBytes(v), 0);
  std::memcpy(bytes.data(), "xdebugpy", 8);
  auto put = [&](const std::string& member, uint64_t value) {
    auto it = positions.find(member);
    if (it == positions.end()) {
      ADD_FAILURE() << "no literal position for " << member;
      return;
    }
    for (int i = 0; i < 8; ++i) bytes[it->second + i] = (value >> (8 * i)) & 0xff;
  };
  put("version",
      (uint64_t(v.major) << 24) | (uint64_t(v.minor) << 16) | (uint64_t(v.micro) << 8) | 0xf0);
  put("free_threaded", free_threaded ? 1 : 0);
  for (const auto& [member, field] : FieldsByMember())
    put(member, static_cast<uint64_t>(table.*field));
  if (v.minor >= 15)
    put("unicode_object.compactunicodeobject_size",
        static_cast<uint64_t>(table.compact_unicode_data));
  for (const char* size :
       {"runtime_state.size", "interpreter_state.size", "thread_state.size",
        "interpreter_frame.size", "code_object.size", "pyobject.size", "type_object.size",
        "tuple_object.size", "bytes_object.size", "unicode_object.size"})
    put(size, 1 << 16);
  return bytes;
}

// The literal layout is the headers' where they can be asked: the fakes
// test PyPerf against the interpreters, not against a stale transcription.
TEST_P(DebugOffsetsAgainstHeaders, TheTestsLiteralPositionsMatchTheHeader) {
  RESOLVE_OR_RETURN();
  auto facts = ProbeHeaders(headers_);
  ASSERT_TRUE(facts.ok()) << facts.error();
  for (const auto& [member, position] : LiteralPositionsOf(headers_.version)) {
    auto it = facts->positions.find(member);
    ASSERT_NE(it, facts->positions.end()) << member << " is not probed";
    EXPECT_EQ(position, it->second) << member << " in " << headers_.version.ToString();
  }
}

TEST(ParseDebugOffsets, RoundTripsTheTable) {
  for (PythonVersion v :
       {PythonVersion{3, 13, 0}, PythonVersion{3, 14, 0}, PythonVersion{3, 15, 2}}) {
    const pyperf_offsets* table = FindOffsets(v);
    ASSERT_NE(table, nullptr);
    auto bytes = FakeDebugOffsets(v, *table);
    auto debug = ParseDebugOffsets(v, bytes.data(), bytes.size());
    ASSERT_TRUE(debug.ok()) << debug.error();
    auto merged = MergeDebugOffsets(*table, *debug);
    ASSERT_TRUE(merged.ok()) << merged.error();
    EXPECT_EQ(std::memcmp(&*merged, table, sizeof(pyperf_offsets)), 0) << v.ToString();
  }
}

TEST(ParseDebugOffsets, APatchReleaseThatMovesAFieldIsFollowed) {
  PythonVersion v{3, 13, 9};
  const pyperf_offsets* table = FindOffsets(v);
  ASSERT_NE(table, nullptr);
  pyperf_offsets moved = *table;
  moved.tstate_frame += 16;         // a field grew in PyThreadState
  moved.runtime_interp_head += 64;  // and _PyRuntimeState grew before `interpreters`
  auto bytes = FakeDebugOffsets(v, moved);
  auto debug = ParseDebugOffsets(v, bytes.data(), bytes.size());
  ASSERT_TRUE(debug.ok()) << debug.error();
  auto merged = MergeDebugOffsets(*table, *debug);
  ASSERT_TRUE(merged.ok()) << merged.error();
  EXPECT_EQ(merged->tstate_frame, table->tstate_frame + 16);
  EXPECT_EQ(merged->runtime_interp_head, table->runtime_interp_head + 64);
  EXPECT_EQ(merged->runtime_interp_main, table->runtime_interp_main + 64);
  // Not covered by _Py_DebugOffsets: from the table.
  EXPECT_EQ(merged->compact_unicode_data, table->compact_unicode_data);
  EXPECT_EQ(merged->frame_owner_shim, table->frame_owner_shim);
  EXPECT_EQ(merged->stackref_tag_bits, table->stackref_tag_bits);
  EXPECT_EQ(merged->frame_is_entry, table->frame_is_entry);
}

// 3.15 publishes sizeof(PyCompactUnicodeObject): a process whose strings grew
// a field is followed; 3.13 and 3.14 publish none, and it stays derived.
TEST(ParseDebugOffsets, APublishedCompactUnicodeSizeIsFollowed) {
  PythonVersion v{3, 15, 2};
  const pyperf_offsets* table = FindOffsets(v);
  ASSERT_NE(table, nullptr);
  pyperf_offsets moved = *table;
  moved.compact_unicode_data += 8;
  auto bytes = FakeDebugOffsets(v, moved);
  auto debug = ParseDebugOffsets(v, bytes.data(), bytes.size());
  ASSERT_TRUE(debug.ok()) << debug.error();
  auto merged = MergeDebugOffsets(*table, *debug);
  ASSERT_TRUE(merged.ok()) << merged.error();
  EXPECT_EQ(merged->compact_unicode_data, table->compact_unicode_data + 8);

  PythonVersion old{3, 14, 0};
  auto old_bytes = FakeDebugOffsets(old, *FindOffsets(old));
  auto old_debug = ParseDebugOffsets(old, old_bytes.data(), old_bytes.size());
  ASSERT_TRUE(old_debug.ok()) << old_debug.error();
  EXPECT_FALSE(old_debug->Get("unicode_object.compactunicodeobject_size").has_value());
  auto old_merged = MergeDebugOffsets(*FindOffsets(old), *old_debug);
  ASSERT_TRUE(old_merged.ok()) << old_merged.error();
  EXPECT_EQ(old_merged->compact_unicode_data, old_merged->string_data + 16);
}

TEST(ParseDebugOffsets, RejectsAWrongCookie) {
  PythonVersion v{3, 14, 0};
  auto bytes = FakeDebugOffsets(v, *FindOffsets(v));
  bytes[0] = 'y';
  auto debug = ParseDebugOffsets(v, bytes.data(), bytes.size());
  ASSERT_FALSE(debug.ok());
  EXPECT_NE(debug.error().find("cookie"), std::string::npos) << debug.error();
}

TEST(ParseDebugOffsets, RejectsAnotherVersion) {
  auto bytes = FakeDebugOffsets(PythonVersion{3, 13, 2}, *FindOffsets(PythonVersion{3, 13, 2}));
  auto debug = ParseDebugOffsets(PythonVersion{3, 13, 1}, bytes.data(), bytes.size());
  ASSERT_FALSE(debug.ok());
  EXPECT_NE(debug.error().find("3.13.2"), std::string::npos) << debug.error();
}

TEST(ParseDebugOffsets, RejectsAShortBuffer) {
  PythonVersion v{3, 13, 0};
  auto bytes = FakeDebugOffsets(v, *FindOffsets(v));
  EXPECT_FALSE(ParseDebugOffsets(v, bytes.data(), bytes.size() - 1).ok());
  EXPECT_FALSE(ParseDebugOffsets(PythonVersion{3, 12, 0}, bytes.data(), bytes.size()).ok());
}

TEST(MergeDebugOffsets, FreeThreaded313UsesItsOwnTable) {
  PythonVersion v{3, 13, 5};
  const pyperf_offsets* table = FindOffsets(v, /*free_threaded=*/true);
  ASSERT_NE(table, nullptr);
  auto bytes = FakeDebugOffsets(v, *table, /*free_threaded=*/true);
  auto debug = ParseDebugOffsets(v, bytes.data(), bytes.size());
  ASSERT_TRUE(debug.ok()) << debug.error();
  EXPECT_TRUE(debug->free_threaded);
  auto merged = MergeDebugOffsets(*table, *debug);
  ASSERT_TRUE(merged.ok()) << merged.error();
  EXPECT_EQ(std::memcmp(&*merged, table, sizeof(pyperf_offsets)), 0);
  EXPECT_EQ(merged->compact_unicode_data, 72);  // after a 32-byte object header
  // The GIL table's 16-byte object header does not fit the process.
  auto wrong = MergeDebugOffsets(*FindOffsets(v), *debug);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().find("ob_type"), std::string::npos) << wrong.error();
}

TEST(MergeDebugOffsets, RejectsAnOffsetOutsideItsStruct) {
  PythonVersion v{3, 13, 0};
  pyperf_offsets bad = *FindOffsets(v);
  bad.tstate_thread_id = 1 << 24;
  auto bytes = FakeDebugOffsets(v, bad);
  auto debug = ParseDebugOffsets(v, bytes.data(), bytes.size());
  ASSERT_TRUE(debug.ok()) << debug.error();
  auto merged = MergeDebugOffsets(*FindOffsets(v), *debug);
  ASSERT_FALSE(merged.ok());
  EXPECT_NE(merged.error().find("thread_state.thread_id"), std::string::npos) << merged.error();
}

}  // namespace
}  // namespace ebpf::pyperf
