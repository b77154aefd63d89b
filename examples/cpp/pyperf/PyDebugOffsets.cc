// PyDebugOffsets: see PyDebugOffsets.h.
#include "PyDebugOffsets.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>

#include "PyOffsets.h"
#include "process_memory.h"

namespace pyperf {
namespace {

constexpr char kCookie[8] = {'x', 'd', 'e', 'b', 'u', 'g', 'p', 'y'};
constexpr size_t kCookieSize = sizeof(kCookie);
// No struct PyPerf reads is anywhere near this big; a larger size or offset
// means the bytes are not what we think.
constexpr uint64_t kMaxPlausibleSize = 1 << 20;
// Distinct merged layouts kept (the BPF side holds PYPERF_MAX_LAYOUTS).
constexpr size_t kMaxInternedLayouts = 64;

// _Py_DebugOffsets after `char cookie[8]`: uint64_t members, in declaration
// order, from Include/internal/pycore_runtime.h (3.13) and
// Include/internal/pycore_debug_offsets.h (3.14), up to unicode_object, the
// last group PyPerf reads. Later members are appended in later minors.
constexpr const char* kMembers313[] = {
    "version",
    "free_threaded",
    "runtime_state.size",
    "runtime_state.finalizing",
    "runtime_state.interpreters_head",
    "interpreter_state.size",
    "interpreter_state.id",
    "interpreter_state.next",
    "interpreter_state.threads_head",
    "interpreter_state.gc",
    "interpreter_state.imports_modules",
    "interpreter_state.sysdict",
    "interpreter_state.builtins",
    "interpreter_state.ceval_gil",
    "interpreter_state.gil_runtime_state",
    "interpreter_state.gil_runtime_state_enabled",
    "interpreter_state.gil_runtime_state_locked",
    "interpreter_state.gil_runtime_state_holder",
    "thread_state.size",
    "thread_state.prev",
    "thread_state.next",
    "thread_state.interp",
    "thread_state.current_frame",
    "thread_state.thread_id",
    "thread_state.native_thread_id",
    "thread_state.datastack_chunk",
    "thread_state.status",
    "interpreter_frame.size",
    "interpreter_frame.previous",
    "interpreter_frame.executable",
    "interpreter_frame.instr_ptr",
    "interpreter_frame.localsplus",
    "interpreter_frame.owner",
    "code_object.size",
    "code_object.filename",
    "code_object.name",
    "code_object.qualname",
    "code_object.linetable",
    "code_object.firstlineno",
    "code_object.argcount",
    "code_object.localsplusnames",
    "code_object.localspluskinds",
    "code_object.co_code_adaptive",
    "pyobject.size",
    "pyobject.ob_type",
    "type_object.size",
    "type_object.tp_name",
    "type_object.tp_repr",
    "type_object.tp_flags",
    "tuple_object.size",
    "tuple_object.ob_item",
    "tuple_object.ob_size",
    "list_object.size",
    "list_object.ob_item",
    "list_object.ob_size",
    "dict_object.size",
    "dict_object.ma_keys",
    "dict_object.ma_values",
    "float_object.size",
    "float_object.ob_fval",
    "long_object.size",
    "long_object.lv_tag",
    "long_object.ob_digit",
    "bytes_object.size",
    "bytes_object.ob_size",
    "bytes_object.ob_sval",
    "unicode_object.size",
    "unicode_object.state",
    "unicode_object.length",
    "unicode_object.asciiobject_size",
};

// 3.14 added threads_main, code_object_generation and tlbc_generation to
// interpreter_state, stackpointer and tlbc_index to interpreter_frame, co_tlbc
// to code_object, and the set_object group.
constexpr const char* kMembers314[] = {
    "version",
    "free_threaded",
    "runtime_state.size",
    "runtime_state.finalizing",
    "runtime_state.interpreters_head",
    "interpreter_state.size",
    "interpreter_state.id",
    "interpreter_state.next",
    "interpreter_state.threads_head",
    "interpreter_state.threads_main",
    "interpreter_state.gc",
    "interpreter_state.imports_modules",
    "interpreter_state.sysdict",
    "interpreter_state.builtins",
    "interpreter_state.ceval_gil",
    "interpreter_state.gil_runtime_state",
    "interpreter_state.gil_runtime_state_enabled",
    "interpreter_state.gil_runtime_state_locked",
    "interpreter_state.gil_runtime_state_holder",
    "interpreter_state.code_object_generation",
    "interpreter_state.tlbc_generation",
    "thread_state.size",
    "thread_state.prev",
    "thread_state.next",
    "thread_state.interp",
    "thread_state.current_frame",
    "thread_state.thread_id",
    "thread_state.native_thread_id",
    "thread_state.datastack_chunk",
    "thread_state.status",
    "interpreter_frame.size",
    "interpreter_frame.previous",
    "interpreter_frame.executable",
    "interpreter_frame.instr_ptr",
    "interpreter_frame.localsplus",
    "interpreter_frame.owner",
    "interpreter_frame.stackpointer",
    "interpreter_frame.tlbc_index",
    "code_object.size",
    "code_object.filename",
    "code_object.name",
    "code_object.qualname",
    "code_object.linetable",
    "code_object.firstlineno",
    "code_object.argcount",
    "code_object.localsplusnames",
    "code_object.localspluskinds",
    "code_object.co_code_adaptive",
    "code_object.co_tlbc",
    "pyobject.size",
    "pyobject.ob_type",
    "type_object.size",
    "type_object.tp_name",
    "type_object.tp_repr",
    "type_object.tp_flags",
    "tuple_object.size",
    "tuple_object.ob_item",
    "tuple_object.ob_size",
    "list_object.size",
    "list_object.ob_item",
    "list_object.ob_size",
    "set_object.size",
    "set_object.used",
    "set_object.table",
    "set_object.mask",
    "dict_object.size",
    "dict_object.ma_keys",
    "dict_object.ma_values",
    "float_object.size",
    "float_object.ob_fval",
    "long_object.size",
    "long_object.lv_tag",
    "long_object.ob_digit",
    "bytes_object.size",
    "bytes_object.ob_size",
    "bytes_object.ob_sval",
    "unicode_object.size",
    "unicode_object.state",
    "unicode_object.length",
    "unicode_object.asciiobject_size",
};

template <size_t N>
std::vector<DebugOffsetsMember> LayoutOf(const char* const (&members)[N]) {
  std::vector<DebugOffsetsMember> layout;
  layout.reserve(N);
  for (size_t i = 0; i < N; ++i) layout.push_back({members[i], kCookieSize + i * sizeof(uint64_t)});
  return layout;
}

#define PYPERF_COVERED(field) #field, &pyperf_offsets::field

uint64_t LittleEndian64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string Hex(uint64_t v) {
  char buf[24];
  snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// Stable storage for merged layouts: equal offsets give one pointer.
const pyperf_offsets* Intern(const pyperf_offsets& o, const pyperf_offsets* table) {
  if (std::memcmp(&o, table, sizeof(o)) == 0) return table;
  static std::mutex mu;
  static std::deque<pyperf_offsets> interned;
  std::lock_guard<std::mutex> lock(mu);
  for (const pyperf_offsets& existing : interned) {
    if (std::memcmp(&existing, &o, sizeof(o)) == 0) return &existing;
  }
  if (interned.size() >= kMaxInternedLayouts) return nullptr;
  interned.push_back(o);
  return &interned.back();
}

}  // namespace

const std::vector<DebugOffsetsMember>& DebugOffsetsLayout(const PythonVersion& v) {
  static const std::vector<DebugOffsetsMember> none;
  static const std::vector<DebugOffsetsMember> layout313 = LayoutOf(kMembers313);
  static const std::vector<DebugOffsetsMember> layout314 = LayoutOf(kMembers314);
  if (v.major != 3) return none;
  if (v.minor == 13) return layout313;
  if (v.minor == 14) return layout314;
  return none;
}

const std::vector<DebugOffsetsCoverage>& DebugOffsetsCoverageTable() {
  static const std::vector<DebugOffsetsCoverage> coverage = {
      {PYPERF_COVERED(object_type), "pyobject.ob_type", "pyobject.size", 8},
      {PYPERF_COVERED(type_name), "type_object.tp_name", "type_object.size", 8},
      {PYPERF_COVERED(tuple_items), "tuple_object.ob_item", "tuple_object.size", 0},
      // PyVarObject.ob_size, as the tuple's ob_base.ob_size
      {PYPERF_COVERED(var_object_size), "tuple_object.ob_size", "tuple_object.size", 8},
      {PYPERF_COVERED(string_data), "unicode_object.asciiobject_size", "unicode_object.size", 0},
      {PYPERF_COVERED(unicode_state), "unicode_object.state", "unicode_object.size", 4},
      {PYPERF_COVERED(unicode_length), "unicode_object.length", "unicode_object.size", 8},
      {PYPERF_COVERED(code_filename), "code_object.filename", "code_object.size", 8},
      {PYPERF_COVERED(code_name), "code_object.name", "code_object.size", 8},
      {PYPERF_COVERED(code_firstlineno), "code_object.firstlineno", "code_object.size", 4},
      {PYPERF_COVERED(code_argcount), "code_object.argcount", "code_object.size", 4},
      {PYPERF_COVERED(code_varnames), "code_object.localsplusnames", "code_object.size", 8},
      {PYPERF_COVERED(code_linetable), "code_object.linetable", "code_object.size", 8},
      {PYPERF_COVERED(code_code_adaptive), "code_object.co_code_adaptive", "code_object.size", 0},
      {PYPERF_COVERED(bytes_data), "bytes_object.ob_sval", "bytes_object.size", 0},
      {PYPERF_COVERED(frame_back), "interpreter_frame.previous", "interpreter_frame.size", 8},
      {PYPERF_COVERED(frame_code), "interpreter_frame.executable", "interpreter_frame.size", 8},
      {PYPERF_COVERED(frame_localsplus), "interpreter_frame.localsplus", "interpreter_frame.size",
       0},
      {PYPERF_COVERED(frame_prev_instr), "interpreter_frame.instr_ptr", "interpreter_frame.size",
       8},
      {PYPERF_COVERED(frame_owner), "interpreter_frame.owner", "interpreter_frame.size", 1},
      {PYPERF_COVERED(tstate_frame), "thread_state.current_frame", "thread_state.size", 8},
      {PYPERF_COVERED(tstate_next), "thread_state.next", "thread_state.size", 8},
      {PYPERF_COVERED(tstate_thread_id), "thread_state.thread_id", "thread_state.size", 8},
      {PYPERF_COVERED(tstate_native_thread_id), "thread_state.native_thread_id",
       "thread_state.size", 8},
      {PYPERF_COVERED(interp_tstate_head), "interpreter_state.threads_head",
       "interpreter_state.size", 8},
      {PYPERF_COVERED(interp_next), "interpreter_state.next", "interpreter_state.size", 8},
      {PYPERF_COVERED(runtime_interp_head), "runtime_state.interpreters_head", "runtime_state.size",
       8},
  };
  return coverage;
}

#undef PYPERF_COVERED

std::optional<uint64_t> DebugOffsets::Get(const std::string& path) const {
  auto it = values.find(path);
  if (it == values.end()) return std::nullopt;
  return it->second;
}

Result<DebugOffsets> ParseDebugOffsets(const PythonVersion& expected, const void* data,
                                       size_t size) {
  const auto& layout = DebugOffsetsLayout(expected);
  if (layout.empty())
    return Status::Error("CPython " + expected.ToString() +
                         " has no _Py_DebugOffsets PyPerf knows");
  const auto* bytes = static_cast<const unsigned char*>(data);
  size_t needed = layout.back().position + sizeof(uint64_t);
  if (size < needed)
    return Status::Error("_Py_DebugOffsets needs " + std::to_string(needed) + " bytes, got " +
                         std::to_string(size));
  if (std::memcmp(bytes, kCookie, kCookieSize) != 0)
    return Status::Error("no \"xdebugpy\" cookie at the start of _PyRuntime");
  DebugOffsets out;
  for (const DebugOffsetsMember& m : layout)
    out.values[m.path] = LittleEndian64(bytes + m.position);
  out.version_hex = out.values["version"];
  out.version = PythonVersion::FromHex(out.version_hex);
  out.free_threaded = out.values["free_threaded"] != 0;
  if (!(out.version == expected)) {
    return Status::Error("_Py_DebugOffsets says CPython " + out.version.ToString() + " (" +
                         Hex(out.version_hex) + ") but the binary says " + expected.ToString());
  }
  return out;
}

Result<DebugOffsets> ReadDebugOffsets(pid_t pid, uint64_t py_runtime,
                                      const PythonVersion& expected) {
  const auto& layout = DebugOffsetsLayout(expected);
  if (layout.empty())
    return Status::Error("CPython " + expected.ToString() +
                         " has no _Py_DebugOffsets PyPerf knows");
  std::vector<unsigned char> buf(layout.back().position + sizeof(uint64_t));
  errno = 0;
  if (!ReadProcessMemory(pid, py_runtime, buf.data(), buf.size())) {
    int err = errno;
    return Status::Error("cannot read _Py_DebugOffsets at " + Hex(py_runtime) + " in pid " +
                         std::to_string(pid) + ": " + (err ? std::strerror(err) : "short read"));
  }
  return ParseDebugOffsets(expected, buf.data(), buf.size());
}

Result<pyperf_offsets> MergeDebugOffsets(const pyperf_offsets& table, const DebugOffsets& debug) {
  // The table was picked for the build kind the process states; its object
  // header must be the process's (a Py_TRACE_REFS build's is not either kind's).
  auto ob_type = debug.Get("pyobject.ob_type");
  if (!ob_type || *ob_type != static_cast<uint64_t>(table.object_type)) {
    return Status::Error("_Py_DebugOffsets puts PyObject.ob_type at " +
                         (ob_type ? std::to_string(*ob_type) : std::string("?")) + ", not at " +
                         std::to_string(table.object_type) + " as in a release " +
                         (debug.free_threaded ? "free-threaded" : "GIL") + " build of CPython " +
                         debug.version.ToString() + " (a Py_DEBUG or Py_TRACE_REFS build?)");
  }
  pyperf_offsets merged = table;
  for (const DebugOffsetsCoverage& c : DebugOffsetsCoverageTable()) {
    auto value = debug.Get(c.member);
    auto size = debug.Get(c.size_member);
    if (!value || !size) return Status::Error(std::string("_Py_DebugOffsets lacks ") + c.member);
    if (*size == 0 || *size > kMaxPlausibleSize || *value + c.width > *size) {
      return Status::Error(std::string("implausible _Py_DebugOffsets: ") + c.member + " = " +
                           std::to_string(*value) + " in a struct of " + std::to_string(*size) +
                           " bytes");
    }
    merged.*c.member_of_offsets = static_cast<pp_s64>(*value);
  }
  // PyCompactUnicodeObject is a PyASCIIObject, utf8_length and utf8, then a
  // legacy string's data pointer: derived from the published PyASCIIObject
  // size, whatever the object header.
  merged.compact_unicode_data = merged.string_data + 16;
  if (static_cast<uint64_t>(merged.compact_unicode_data) + 8 > *debug.Get("unicode_object.size")) {
    return Status::Error(
        "implausible _Py_DebugOffsets: PyCompactUnicodeObject outside "
        "PyUnicodeObject");
  }
  if (table.runtime_interp_main >= 0 && table.runtime_interp_head >= 0) {
    merged.runtime_interp_main =
        merged.runtime_interp_head + (table.runtime_interp_main - table.runtime_interp_head);
    uint64_t runtime_size = *debug.Get("runtime_state.size");
    if (static_cast<uint64_t>(merged.runtime_interp_main) + 8 > runtime_size)
      return Status::Error("implausible _Py_DebugOffsets: interpreters.main outside _PyRuntime");
  }
  return merged;
}

Result<ProcessOffsets> OffsetsForProcess(const PythonProcessInfo& info) {
  const pyperf_offsets* table = FindOffsets(info.version);
  if (!table) return Status::Error("CPython " + info.version.ToString() + " is not supported");
  std::string layout_name = OffsetsLayoutName(info.version);
  if (DebugOffsetsLayout(info.version).empty())
    return ProcessOffsets{table, "table " + layout_name};
  if (!info.symbols.py_runtime) return Status::Error("_PyRuntime not found in " + info.module.path);
  auto debug = ReadDebugOffsets(info.pid, *info.symbols.py_runtime, info.version);
  if (!debug.ok()) return debug.status();
  if (debug->free_threaded) {
    table = FindOffsets(info.version, /*free_threaded=*/true);
    layout_name = OffsetsLayoutName(info.version, /*free_threaded=*/true);
    if (!table) {
      return Status::Error("CPython " + info.version.ToString() +
                           " is a free-threaded build; PyPerf supports free-threaded 3.13 only");
    }
  }
  auto merged = MergeDebugOffsets(*table, *debug);
  if (!merged.ok()) return merged.status();
  const pyperf_offsets* offsets = Intern(*merged, table);
  if (!offsets) return Status::Error("too many distinct CPython layouts from _Py_DebugOffsets");
  return ProcessOffsets{offsets, "_Py_DebugOffsets + table " + layout_name};
}

}  // namespace pyperf
