// PyDebugOffsets: see PyDebugOffsets.h.
#include "PyDebugOffsets.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>

#include "PyAsyncioOffsets.h"
#include "PyOffsets.h"
#include "process_memory.h"

namespace ebpf::pyperf {
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
// Include/internal/pycore_debug_offsets.h (3.14+), up to gen_object, the
// last group PyPerf reads (--async-tasks: a coroutine's frame). Each member is listed once, with
// the first minor that has it: a minor adds members (in the middle of a group too) and drops none
// so far, so a new minor is a new kNewestMinor and its new members here.
struct KnownMember {
  const char* path;
  int since_minor;  // of 3.x
};
constexpr int kFirstMinor = 13;
constexpr int kNewestMinor = 15;
constexpr KnownMember kMembers[] = {
    {"version", 13},
    {"free_threaded", 13},
    {"runtime_state.size", 13},
    {"runtime_state.finalizing", 13},
    {"runtime_state.interpreters_head", 13},
    {"interpreter_state.size", 13},
    {"interpreter_state.id", 13},
    {"interpreter_state.next", 13},
    {"interpreter_state.threads_head", 13},
    {"interpreter_state.threads_main", 14},
    {"interpreter_state.gc", 13},
    {"interpreter_state.imports_modules", 13},
    {"interpreter_state.sysdict", 13},
    {"interpreter_state.builtins", 13},
    {"interpreter_state.ceval_gil", 13},
    {"interpreter_state.gil_runtime_state", 13},
    {"interpreter_state.gil_runtime_state_enabled", 13},
    {"interpreter_state.gil_runtime_state_locked", 13},
    {"interpreter_state.gil_runtime_state_holder", 13},
    {"interpreter_state.code_object_generation", 14},
    {"interpreter_state.tlbc_generation", 14},
    {"thread_state.size", 13},
    {"thread_state.prev", 13},
    {"thread_state.next", 13},
    {"thread_state.interp", 13},
    {"thread_state.current_frame", 13},
    {"thread_state.base_frame", 15},
    {"thread_state.last_profiled_frame", 15},
    {"thread_state.last_profiled_frame_seq", 15},
    {"thread_state.thread_id", 13},
    {"thread_state.native_thread_id", 13},
    {"thread_state.datastack_chunk", 13},
    {"thread_state.status", 13},
    {"thread_state.holds_gil", 15},
    {"thread_state.gil_requested", 15},
    {"thread_state.current_exception", 15},
    {"thread_state.exc_state", 15},
    {"err_stackitem.exc_value", 15},
    {"interpreter_frame.size", 13},
    {"interpreter_frame.previous", 13},
    {"interpreter_frame.executable", 13},
    {"interpreter_frame.instr_ptr", 13},
    {"interpreter_frame.localsplus", 13},
    {"interpreter_frame.owner", 13},
    {"interpreter_frame.stackpointer", 14},
    {"interpreter_frame.tlbc_index", 14},
    {"code_object.size", 13},
    {"code_object.filename", 13},
    {"code_object.name", 13},
    {"code_object.qualname", 13},
    {"code_object.linetable", 13},
    {"code_object.firstlineno", 13},
    {"code_object.argcount", 13},
    {"code_object.localsplusnames", 13},
    {"code_object.localspluskinds", 13},
    {"code_object.co_code_adaptive", 13},
    {"code_object.co_tlbc", 14},
    {"pyobject.size", 13},
    {"pyobject.ob_type", 13},
    {"type_object.size", 13},
    {"type_object.tp_name", 13},
    {"type_object.tp_repr", 13},
    {"type_object.tp_flags", 13},
    {"type_object.tp_basicsize", 15},
    {"type_object.tp_dictoffset", 15},
    {"heap_type_object.size", 15},
    {"heap_type_object.ht_cached_keys", 15},
    {"tuple_object.size", 13},
    {"tuple_object.ob_item", 13},
    {"tuple_object.ob_size", 13},
    {"list_object.size", 13},
    {"list_object.ob_item", 13},
    {"list_object.ob_size", 13},
    {"set_object.size", 14},
    {"set_object.used", 14},
    {"set_object.table", 14},
    {"set_object.mask", 14},
    {"dict_object.size", 13},
    {"dict_object.ma_keys", 13},
    {"dict_object.ma_values", 13},
    {"float_object.size", 13},
    {"float_object.ob_fval", 13},
    {"long_object.size", 13},
    {"long_object.lv_tag", 13},
    {"long_object.ob_digit", 13},
    {"bytes_object.size", 13},
    {"bytes_object.ob_size", 13},
    {"bytes_object.ob_sval", 13},
    {"unicode_object.size", 13},
    {"unicode_object.state", 13},
    {"unicode_object.length", 13},
    {"unicode_object.asciiobject_size", 13},
    {"unicode_object.compactunicodeobject_size", 15},
    {"gc.size", 13},
    {"gc.collecting", 13},
    {"gc.frame", 15},
    {"gc.generation_stats_size", 15},
    {"gc.generation_stats", 15},
    {"gen_object.size", 14},
    {"gen_object.gi_name", 14},
    {"gen_object.gi_iframe", 14},
    {"gen_object.gi_frame_state", 14},
};

// The members 3.`minor` has, at their byte positions.
std::vector<DebugOffsetsMember> LayoutOf(int minor) {
  std::vector<DebugOffsetsMember> layout;
  for (const KnownMember& m : kMembers) {
    if (m.since_minor <= minor)
      layout.push_back({m.path, kCookieSize + layout.size() * sizeof(uint64_t)});
  }
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
  static const auto by_minor = [] {
    std::map<int, std::vector<DebugOffsetsMember>> layouts;
    for (int minor = kFirstMinor; minor <= kNewestMinor; ++minor) layouts[minor] = LayoutOf(minor);
    return layouts;
  }();
  if (v.major != 3) return none;
  auto it = by_minor.find(v.minor);
  return it == by_minor.end() ? none : it->second;
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
  // sizeof(PyCompactUnicodeObject), where a non-ASCII compact string's
  // characters start: published from 3.15 on; before, derived from the
  // published PyASCIIObject size (it is a PyASCIIObject, utf8_length and utf8),
  // whatever the object header.
  merged.compact_unicode_data = static_cast<pp_s64>(
      debug.Get("unicode_object.compactunicodeobject_size").value_or(merged.string_data + 16));
  if (static_cast<uint64_t>(merged.compact_unicode_data) <=
          static_cast<uint64_t>(merged.string_data) ||
      static_cast<uint64_t>(merged.compact_unicode_data) + 8 > *debug.Get("unicode_object.size")) {
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

Result<ProcessOffsets> OffsetsForProcess(const PythonProcessInfo& info, bool asyncio) {
  const pyperf_offsets* table = FindOffsets(info.version);
  if (!table) return Status::Error("CPython " + info.version.ToString() + " is not supported");
  std::string layout_name = OffsetsLayoutName(info.version);
  if (DebugOffsetsLayout(info.version).empty())
    return ProcessOffsets{table, "table " + layout_name,
                          "CPython " + info.version.ToString() + " keeps no asyncio task state"};
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
  std::string source = "_Py_DebugOffsets + table " + layout_name;
  // 3.14+: asyncio's task layout, where the build publishes it; without it the
  // process is profiled as before and --async-tasks says it is not available.
  std::string asyncio_unavailable = "not asked for";
  auto found = asyncio ? FindAsyncioDebugOffsets(info)
                       : Result<AsyncioDebugOffsets>(Status::Error(asyncio_unavailable));
  if (found.ok()) {
    auto with = WithAsyncioOffsets(*merged, *found, *debug);
    if (with.ok()) {
      *merged = *with;
      source += " + " + std::string(kAsyncioDebugSection);
    } else {
      asyncio_unavailable = with.status().message();
    }
  } else {
    asyncio_unavailable = found.status().message();
  }
  const pyperf_offsets* offsets = Intern(*merged, table);
  if (!offsets) return Status::Error("too many distinct CPython layouts from _Py_DebugOffsets");
  return ProcessOffsets{offsets, source, asyncio_unavailable};
}

}  // namespace ebpf::pyperf
