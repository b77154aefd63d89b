// The offsets table of free-threaded CPython 3.13 (3.13t, `--disable-gil`,
// Py_GIL_DISABLED), kept apart from PyOffsets.cc's GIL tables.
//
// Free-threaded objects start with a 32-byte PyObject header (ob_tid, flags,
// ob_mutex, ob_gc_bits, ob_ref_local, ob_ref_shared, then ob_type at 24)
// instead of 16, so every object field lies 16 bytes later than in 3.13; the
// frame, thread-state, interpreter and runtime structs do not change, nor do
// the PEP 393 state bits. Verified against 3.13.5 built from Debian trixie's
// source (scripts/free-threaded-python.sh) by tests/cc/test_py_offsets.cc.
// A running 3.13t publishes most of these in _Py_DebugOffsets (with
// free_threaded = 1); PyDebugOffsets.cc keeps from here only the rest
// (sizeof(PyCompactUnicodeObject), the shim owner, interpreters.main).
#include "PyOffsets.h"

namespace ebpf::pyperf {
namespace {

constexpr pyperf_offsets kPython313FreeThreaded = [] {
  pyperf_offsets o{};
  o.frame_kind = PYPERF_FRAME_INTERPRETER;
  o.string_kind = PYPERF_STRING_UNICODE;
  o.object_type = 24;
  o.type_name = 40;
  o.tuple_items = 40;
  o.var_object_size = 32;
  o.string_data = 56;
  o.unicode_state = 48;
  o.unicode_length = 32;
  o.compact_unicode_data = 72;
  o.code_filename = 128;
  o.code_name = 136;
  o.code_firstlineno = 84;
  o.code_argcount = 68;
  o.code_varnames = 112;   // co_localsplusnames
  o.code_linetable = 152;  // co_linetable
  o.code_code_adaptive = 216;
  o.code_code = -1;
  o.bytes_data = 48;
  o.line_table_format = PYPERF_LINES_LOCATIONS;
  o.lasti_unit = 1;  // no thread-local bytecode in 3.13t: instr_ptr is in co_code_adaptive
  o.frame_back = 8;
  o.frame_code = 0;  // f_executable, a plain PyObject * (no _PyStackRef before 3.14)
  o.frame_localsplus = 72;
  o.frame_lasti = -1;
  o.frame_prev_instr = 56;  // instr_ptr
  o.frame_owner = 70;
  o.frame_owner_shim = 3;  // FRAME_OWNED_BY_CSTACK
  o.frame_is_entry = -1;
  o.stackref_tag_bits = 0;
  o.tstate_frame = 72;  // ->current_frame
  o.cframe_current_frame = -1;
  o.tstate_next = 8;
  o.tstate_thread_id = 152;
  o.tstate_native_thread_id = 160;
  o.interp_tstate_head = 7344;  // threads.head
  o.interp_next = 7264;
  o.runtime_interp_main = 640;
  o.runtime_interp_head = 632;
  return o;
}();

}  // namespace

const pyperf_offsets* FindFreeThreadedOffsets(const PythonVersion& v) {
  if (v.major == 3 && v.minor == 13) return &kPython313FreeThreaded;
  return nullptr;
}

}  // namespace ebpf::pyperf
