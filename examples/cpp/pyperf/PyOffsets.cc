// Per-layout CPython offset tables (x86-64, release GIL builds; 3.13t's is in
// PyOffsetsFreeThreaded.cc), every pyperf_offsets field, -1 where absent. Values
// come from each interpreter's headers: tests/cc/test_py_offsets.cc checks them.
//
// Verified against: 2.7.18, 3.6.15, 3.7.16, 3.8.18, 3.9.18, 3.10.13,
// 3.11.2 (Debian) and 3.11.7 (identical), 3.12.1, 3.13.0 and 3.13.5
// (Debian trixie), 3.14.10 and 3.15.2 (Debian sid). Within a minor the fields used here
// have not moved in any final release (public structs are ABI-frozen; the
// internal ones we read sit before anything patch releases touched, e.g.
// 3.7.4 grew _PyRuntimeState only after `interpreters`), so a table covers its
// whole minor. A patch release that moves a field gets its own table and a
// micro range in kLayouts.
//
// From 3.13 on an interpreter publishes most offsets itself (_Py_DebugOffsets);
// PyDebugOffsets.cc keeps from these tables only what that does not cover.
#include "PyOffsets.h"

#include <climits>

namespace ebpf::pyperf {
namespace {

constexpr pyperf_offsets kPython27 = [] {
  pyperf_offsets o{};
  o.frame_kind = PYPERF_FRAME_OBJECT;
  o.string_kind = PYPERF_STRING_BYTES;
  o.object_type = 8;
  o.type_name = 24;
  o.tuple_items = 24;
  o.var_object_size = 16;
  o.string_data = 36;  // PyStringObject.ob_sval
  o.unicode_state = -1;
  o.unicode_length = 16;  // PyStringObject.ob_size
  o.compact_unicode_data = -1;
  o.code_filename = 80;
  o.code_name = 88;
  o.code_firstlineno = 96;
  o.code_argcount = 16;
  o.code_varnames = 56;
  o.code_linetable = 104;  // co_lnotab
  o.code_code_adaptive = -1;
  o.code_code = 32;
  o.bytes_data = 36;
  o.line_table_format = PYPERF_LINES_LNOTAB;
  o.lasti_unit = 1;
  o.frame_back = 24;
  o.frame_code = 32;
  o.frame_localsplus = 376;
  o.frame_lasti = 120;
  o.frame_prev_instr = -1;
  o.frame_owner = -1;
  o.frame_owner_shim = -1;
  o.frame_is_entry = -1;
  o.stackref_tag_bits = 0;
  o.tstate_frame = 16;
  o.cframe_current_frame = -1;
  o.tstate_next = 0;  // 2.7 has no `prev`: next comes first
  o.tstate_thread_id = 144;
  o.tstate_native_thread_id = -1;
  o.interp_tstate_head = 8;
  o.interp_next = 0;
  o.runtime_interp_main = -1;  // no _PyRuntime: interp_head is a static in pystate.c
  o.runtime_interp_head = -1;
  return o;
}();

constexpr pyperf_offsets kPython36 = [] {
  pyperf_offsets o{};
  o.frame_kind = PYPERF_FRAME_OBJECT;
  o.string_kind = PYPERF_STRING_UNICODE;
  o.object_type = 8;
  o.type_name = 24;
  o.tuple_items = 24;
  o.var_object_size = 16;
  o.string_data = 48;
  o.unicode_state = 32;
  o.unicode_length = 16;
  o.compact_unicode_data = 72;
  o.code_filename = 96;
  o.code_name = 104;
  o.code_firstlineno = 36;
  o.code_argcount = 16;
  o.code_varnames = 64;
  o.code_linetable = 112;  // co_lnotab
  o.code_code_adaptive = -1;
  o.code_code = 40;
  o.bytes_data = 32;
  o.line_table_format = PYPERF_LINES_LNOTAB_SIGNED;
  o.lasti_unit = 1;
  o.frame_back = 24;
  o.frame_code = 32;
  o.frame_localsplus = 376;
  o.frame_lasti = 120;
  o.frame_prev_instr = -1;
  o.frame_owner = -1;
  o.frame_owner_shim = -1;
  o.frame_is_entry = -1;
  o.stackref_tag_bits = 0;
  o.tstate_frame = 24;
  o.cframe_current_frame = -1;
  o.tstate_next = 8;
  o.tstate_thread_id = 152;
  o.tstate_native_thread_id = -1;
  o.interp_tstate_head = 8;
  o.interp_next = 0;
  o.runtime_interp_main = -1;  // _PyRuntime arrives in 3.7
  o.runtime_interp_head = -1;
  return o;
}();

constexpr pyperf_offsets kPython37 = [] {
  pyperf_offsets o{};
  o.frame_kind = PYPERF_FRAME_OBJECT;
  o.string_kind = PYPERF_STRING_UNICODE;
  o.object_type = 8;
  o.type_name = 24;
  o.tuple_items = 24;
  o.var_object_size = 16;
  o.string_data = 48;
  o.unicode_state = 32;
  o.unicode_length = 16;
  o.compact_unicode_data = 72;
  o.code_filename = 96;
  o.code_name = 104;
  o.code_firstlineno = 36;
  o.code_argcount = 16;
  o.code_varnames = 64;
  o.code_linetable = 112;  // co_lnotab
  o.code_code_adaptive = -1;
  o.code_code = 40;
  o.bytes_data = 32;
  o.line_table_format = PYPERF_LINES_LNOTAB_SIGNED;
  o.lasti_unit = 1;
  o.frame_back = 24;
  o.frame_code = 32;
  o.frame_localsplus = 360;
  o.frame_lasti = 104;
  o.frame_prev_instr = -1;
  o.frame_owner = -1;
  o.frame_owner_shim = -1;
  o.frame_is_entry = -1;
  o.stackref_tag_bits = 0;
  o.tstate_frame = 24;
  o.cframe_current_frame = -1;
  o.tstate_next = 8;
  o.tstate_thread_id = 176;
  o.tstate_native_thread_id = -1;
  o.interp_tstate_head = 8;
  o.interp_next = 0;
  o.runtime_interp_main = 32;
  o.runtime_interp_head = 24;
  return o;
}();

constexpr pyperf_offsets kPython38 = [] {
  pyperf_offsets o{};
  o.frame_kind = PYPERF_FRAME_OBJECT;
  o.string_kind = PYPERF_STRING_UNICODE;
  o.object_type = 8;
  o.type_name = 24;
  o.tuple_items = 24;
  o.var_object_size = 16;
  o.string_data = 48;
  o.unicode_state = 32;
  o.unicode_length = 16;
  o.compact_unicode_data = 72;
  o.code_filename = 104;
  o.code_name = 112;
  o.code_firstlineno = 40;
  o.code_argcount = 16;
  o.code_varnames = 72;
  o.code_linetable = 120;  // co_lnotab
  o.code_code_adaptive = -1;
  o.code_code = 48;
  o.bytes_data = 32;
  o.line_table_format = PYPERF_LINES_LNOTAB_SIGNED;
  o.lasti_unit = 1;
  o.frame_back = 24;
  o.frame_code = 32;
  o.frame_localsplus = 360;
  o.frame_lasti = 104;
  o.frame_prev_instr = -1;
  o.frame_owner = -1;
  o.frame_owner_shim = -1;
  o.frame_is_entry = -1;
  o.stackref_tag_bits = 0;
  o.tstate_frame = 24;
  o.cframe_current_frame = -1;
  o.tstate_next = 8;
  o.tstate_thread_id = 176;
  o.tstate_native_thread_id = -1;
  o.interp_tstate_head = 8;
  o.interp_next = 0;
  o.runtime_interp_main = 40;
  o.runtime_interp_head = 32;
  return o;
}();

// Same values as 3.8; kept apart so each minor's table is checked on its own.
constexpr pyperf_offsets kPython39 = [] {
  pyperf_offsets o{};
  o.frame_kind = PYPERF_FRAME_OBJECT;
  o.string_kind = PYPERF_STRING_UNICODE;
  o.object_type = 8;
  o.type_name = 24;
  o.tuple_items = 24;
  o.var_object_size = 16;
  o.string_data = 48;
  o.unicode_state = 32;
  o.unicode_length = 16;
  o.compact_unicode_data = 72;
  o.code_filename = 104;
  o.code_name = 112;
  o.code_firstlineno = 40;
  o.code_argcount = 16;
  o.code_varnames = 72;
  o.code_linetable = 120;  // co_lnotab
  o.code_code_adaptive = -1;
  o.code_code = 48;
  o.bytes_data = 32;
  o.line_table_format = PYPERF_LINES_LNOTAB_SIGNED;
  o.lasti_unit = 1;
  o.frame_back = 24;
  o.frame_code = 32;
  o.frame_localsplus = 360;
  o.frame_lasti = 104;
  o.frame_prev_instr = -1;
  o.frame_owner = -1;
  o.frame_owner_shim = -1;
  o.frame_is_entry = -1;
  o.stackref_tag_bits = 0;
  o.tstate_frame = 24;
  o.cframe_current_frame = -1;
  o.tstate_next = 8;
  o.tstate_thread_id = 176;
  o.tstate_native_thread_id = -1;
  o.interp_tstate_head = 8;
  o.interp_next = 0;
  o.runtime_interp_main = 40;
  o.runtime_interp_head = 32;
  return o;
}();

constexpr pyperf_offsets kPython310 = [] {
  pyperf_offsets o{};
  o.frame_kind = PYPERF_FRAME_OBJECT;
  o.string_kind = PYPERF_STRING_UNICODE;
  o.object_type = 8;
  o.type_name = 24;
  o.tuple_items = 24;
  o.var_object_size = 16;
  o.string_data = 48;
  o.unicode_state = 32;
  o.unicode_length = 16;
  o.compact_unicode_data = 72;
  o.code_filename = 104;
  o.code_name = 112;
  o.code_firstlineno = 40;
  o.code_argcount = 16;
  o.code_varnames = 72;
  o.code_linetable = 120;  // co_linetable (new format; co_lnotab is computed)
  o.code_code_adaptive = -1;
  o.code_code = 48;
  o.bytes_data = 32;
  o.line_table_format = PYPERF_LINES_LINETABLE;
  o.lasti_unit = 2;
  o.frame_back = 24;
  o.frame_code = 32;
  o.frame_localsplus = 352;
  o.frame_lasti = 96;  // counts code units from 3.10 on, bytes before
  o.frame_prev_instr = -1;
  o.frame_owner = -1;
  o.frame_owner_shim = -1;
  o.frame_is_entry = -1;
  o.stackref_tag_bits = 0;
  o.tstate_frame = 24;
  o.cframe_current_frame = -1;
  o.tstate_next = 8;
  o.tstate_thread_id = 176;
  o.tstate_native_thread_id = -1;
  o.interp_tstate_head = 8;
  o.interp_next = 0;
  o.runtime_interp_main = 40;
  o.runtime_interp_head = 32;
  return o;
}();

constexpr pyperf_offsets kPython311 = [] {
  pyperf_offsets o{};
  o.frame_kind = PYPERF_FRAME_INTERPRETER;
  o.string_kind = PYPERF_STRING_UNICODE;
  o.object_type = 8;
  o.type_name = 24;
  o.tuple_items = 24;
  o.var_object_size = 16;
  o.string_data = 48;
  o.unicode_state = 32;
  o.unicode_length = 16;
  o.compact_unicode_data = 72;
  o.code_filename = 112;
  o.code_name = 120;
  o.code_firstlineno = 72;
  o.code_argcount = 56;
  o.code_varnames = 96;    // co_localsplusnames
  o.code_linetable = 136;  // co_linetable
  o.code_code_adaptive = 184;
  o.code_code = -1;
  o.bytes_data = 32;
  o.line_table_format = PYPERF_LINES_LOCATIONS;
  o.lasti_unit = 1;
  o.frame_back = 48;  // _PyInterpreterFrame.previous
  o.frame_code = 32;
  o.frame_localsplus = 72;
  o.frame_lasti = -1;
  o.frame_prev_instr = 56;
  o.frame_owner = 69;
  o.frame_owner_shim = -1;  // no shim frames yet: entry frames are real code
  o.frame_is_entry = 68;  // 3.11 only: the byte before owner
  o.stackref_tag_bits = 0;
  o.tstate_frame = 56;  // ->cframe
  o.cframe_current_frame = 8;
  o.tstate_next = 8;
  o.tstate_thread_id = 152;
  o.tstate_native_thread_id = 160;
  o.interp_tstate_head = 16;  // threads.head (already in 3.11)
  o.interp_next = 0;
  o.runtime_interp_main = 48;
  o.runtime_interp_head = 40;
  return o;
}();

constexpr pyperf_offsets kPython312 = [] {
  pyperf_offsets o{};
  o.frame_kind = PYPERF_FRAME_INTERPRETER;
  o.string_kind = PYPERF_STRING_UNICODE;
  o.object_type = 8;
  o.type_name = 24;
  o.tuple_items = 24;
  o.var_object_size = 16;
  o.string_data = 40;  // wstr gone from PyASCIIObject
  o.unicode_state = 32;
  o.unicode_length = 16;
  o.compact_unicode_data = 56;
  o.code_filename = 112;
  o.code_name = 120;
  o.code_firstlineno = 68;
  o.code_argcount = 52;
  o.code_varnames = 96;    // co_localsplusnames
  o.code_linetable = 136;  // co_linetable
  o.code_code_adaptive = 192;
  o.code_code = -1;
  o.bytes_data = 32;
  o.line_table_format = PYPERF_LINES_LOCATIONS;
  o.lasti_unit = 1;
  o.frame_back = 8;
  o.frame_code = 0;
  o.frame_localsplus = 72;
  o.frame_lasti = -1;
  o.frame_prev_instr = 56;
  o.frame_owner = 70;
  o.frame_owner_shim = 3;  // FRAME_OWNED_BY_CSTACK
  o.frame_is_entry = -1;
  o.stackref_tag_bits = 0;
  o.tstate_frame = 56;  // ->cframe
  o.cframe_current_frame = 0;
  o.tstate_next = 8;
  o.tstate_thread_id = 136;
  o.tstate_native_thread_id = 144;
  o.interp_tstate_head = 72;  // threads.head
  o.interp_next = 0;
  o.runtime_interp_main = 48;
  o.runtime_interp_head = 40;
  return o;
}();

constexpr pyperf_offsets kPython313 = [] {
  pyperf_offsets o{};
  o.frame_kind = PYPERF_FRAME_INTERPRETER;
  o.string_kind = PYPERF_STRING_UNICODE;
  o.object_type = 8;
  o.type_name = 24;
  o.tuple_items = 24;
  o.var_object_size = 16;
  o.string_data = 40;
  o.unicode_state = 32;
  o.unicode_length = 16;
  o.compact_unicode_data = 56;
  o.code_filename = 112;
  o.code_name = 120;
  o.code_firstlineno = 68;
  o.code_argcount = 52;
  o.code_varnames = 96;    // co_localsplusnames
  o.code_linetable = 136;  // co_linetable
  o.code_code_adaptive = 200;
  o.code_code = -1;
  o.bytes_data = 32;
  o.line_table_format = PYPERF_LINES_LOCATIONS;
  o.lasti_unit = 1;
  o.frame_back = 8;
  o.frame_code = 0;  // f_executable: not always a code object
  o.frame_localsplus = 72;
  o.frame_lasti = -1;
  o.frame_prev_instr = 56;  // instr_ptr
  o.frame_owner = 70;
  o.frame_owner_shim = 3;  // FRAME_OWNED_BY_CSTACK
  o.frame_is_entry = -1;
  o.stackref_tag_bits = 0;
  o.tstate_frame = 72;  // ->current_frame, no _PyCFrame any more
  o.cframe_current_frame = -1;
  o.tstate_next = 8;
  o.tstate_thread_id = 152;
  o.tstate_native_thread_id = 160;
  o.interp_tstate_head = 7344;  // threads.head, after the ceval state moved to the front
  o.interp_next = 7264;
  o.runtime_interp_main = 640;  // after _Py_DebugOffsets at the start of _PyRuntime
  o.runtime_interp_head = 632;
  return o;
}();

// From 3.14 on, each minor is the one before plus what it changed.
//
// 3.14: f_executable and localsplus hold _PyStackRef (tag bits in the low two
// bits), interpreter entry frames get their own owner value below the C-stack
// one (frame_owner_shim stays 3: FRAME_OWNED_BY_INTERPRETER, where 3.13 had
// FRAME_OWNED_BY_CSTACK; 4 is now the C-stack shim), tuples grew a cached hash
// before ob_item.
constexpr pyperf_offsets kPython314 = [] {
  pyperf_offsets o = kPython313;
  o.tuple_items = 32;  // tuples cache their hash (ob_hash) from 3.14
  o.code_code_adaptive = 208;
  o.frame_localsplus = 80;
  o.frame_owner = 74;
  o.stackref_tag_bits = 3;
  o.interp_next = 7272;
  o.runtime_interp_main = 816;
  o.runtime_interp_head = 808;
  return o;
}();

// 3.15: PyThreadState grew base_frame and the last-profiled-frame fields
// before thread_id, PyInterpreterState and _PyRuntimeState moved their lists;
// FRAME_OWNED_BY_CSTACK is gone, so interpreter entry frames are the only
// shims (frame_owner_shim stays 3, FRAME_OWNED_BY_INTERPRETER, now the
// highest owner).
constexpr pyperf_offsets kPython315 = [] {
  pyperf_offsets o = kPython314;
  o.tstate_thread_id = 176;
  o.tstate_native_thread_id = 184;
  o.interp_tstate_head = 7336;  // threads.head
  o.interp_next = 7264;
  o.runtime_interp_main = 944;
  o.runtime_interp_head = 936;
  return o;
}();

constexpr int kAnyMicro = INT_MAX;

struct Layout {
  const char* name;
  int major;
  int minor;
  int first_micro;  // inclusive
  int last_micro;   // inclusive
  const pyperf_offsets* offsets;
};

constexpr Layout kLayouts[] = {
    {"2.7", 2, 7, 0, kAnyMicro, &kPython27},    {"3.6", 3, 6, 0, kAnyMicro, &kPython36},
    {"3.7", 3, 7, 0, kAnyMicro, &kPython37},    {"3.8", 3, 8, 0, kAnyMicro, &kPython38},
    {"3.9", 3, 9, 0, kAnyMicro, &kPython39},    {"3.10", 3, 10, 0, kAnyMicro, &kPython310},
    {"3.11", 3, 11, 0, kAnyMicro, &kPython311}, {"3.12", 3, 12, 0, kAnyMicro, &kPython312},
    {"3.13", 3, 13, 0, kAnyMicro, &kPython313}, {"3.14", 3, 14, 0, kAnyMicro, &kPython314},
    {"3.15", 3, 15, 0, kAnyMicro, &kPython315},
};

const Layout* FindLayout(const PythonVersion& v) {
  for (const Layout& layout : kLayouts) {
    if (v.major == layout.major && v.minor == layout.minor && v.micro >= layout.first_micro &&
        v.micro <= layout.last_micro)
      return &layout;
  }
  return nullptr;
}

}  // namespace

const pyperf_offsets* FindOffsets(const PythonVersion& v, bool free_threaded) {
  if (free_threaded) return FindFreeThreadedOffsets(v);
  const Layout* layout = FindLayout(v);
  return layout ? layout->offsets : nullptr;
}

std::string OffsetsLayoutName(const PythonVersion& v, bool free_threaded) {
  const Layout* layout = FindLayout(v);
  if (!layout || (free_threaded && !FindFreeThreadedOffsets(v))) return "";
  return std::string(layout->name) + (free_threaded ? "t" : "");
}

}  // namespace ebpf::pyperf
