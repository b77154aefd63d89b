/* Types shared by PyPerf's BPF program (PyPerfBPFProgram.c, compiled by libbcc)
 * and its user-space side. Plain C, fixed-width fields, no padding surprises:
 * the same bytes are written by one side and read by the other. */
#ifndef PYPERF_BPF_SHARED_H
#define PYPERF_BPF_SHARED_H

#ifdef __cplusplus
#include <cstdint>
typedef int64_t pp_s64;
typedef uint64_t pp_u64;
typedef int32_t pp_s32;
typedef uint32_t pp_u32;
typedef uint8_t pp_u8;
#else
typedef s64 pp_s64;
typedef u64 pp_u64;
typedef s32 pp_s32;
typedef u32 pp_u32;
typedef u8 pp_u8;
#endif

/* How a CPython version lays out what the profiler reads. Byte offsets inside
 * the named struct; -1 where the field does not exist in that version. One
 * table per layout lives in PyOffsets.cc (data, checked against each
 * interpreter's own headers by tests/cc/test_py_offsets.cc). */
enum pyperf_frame_kind {
  PYPERF_FRAME_OBJECT = 0,       /* PyFrameObject chain: 2.7 .. 3.10 */
  PYPERF_FRAME_INTERPRETER = 1,  /* _PyInterpreterFrame chain: 3.11 .. */
};
enum pyperf_string_kind {
  PYPERF_STRING_BYTES = 0,   /* 2.7 PyStringObject: char data at string_data */
  PYPERF_STRING_UNICODE = 1, /* 3.x PEP 393 PyUnicode (compact ASCII / compact) */
};

struct pyperf_offsets {
  pp_s64 frame_kind;  /* enum pyperf_frame_kind */
  pp_s64 string_kind; /* enum pyperf_string_kind */

  /* PyObject / PyVarObject / PyTypeObject */
  pp_s64 object_type;      /* PyObject.ob_type */
  pp_s64 type_name;        /* PyTypeObject.tp_name (const char *) */
  pp_s64 tuple_items;      /* PyTupleObject.ob_item */
  pp_s64 var_object_size;  /* PyVarObject.ob_size */

  /* strings */
  pp_s64 string_data;          /* 2.7: PyStringObject.ob_sval; 3.x: sizeof(PyASCIIObject) */
  pp_s64 unicode_state;        /* PyASCIIObject.state (3.x) */
  pp_s64 unicode_length;       /* PyASCIIObject.length (3.x); PyVarObject.ob_size on 2.7 */
  pp_s64 compact_unicode_data; /* sizeof(PyCompactUnicodeObject) (3.x) */

  /* PyCodeObject */
  pp_s64 code_filename;     /* co_filename */
  pp_s64 code_name;         /* co_name */
  pp_s64 code_firstlineno;  /* co_firstlineno (int) */
  pp_s64 code_argcount;     /* co_argcount (int) */
  pp_s64 code_varnames;     /* co_varnames (<= 3.10) or co_localsplusnames (3.11+): tuple */
  pp_s64 code_linetable;    /* co_lnotab (<= 3.9) or co_linetable (3.10+): bytes */
  pp_s64 code_code_adaptive;/* co_code_adaptive (3.11+): first instruction */
  pp_s64 code_code;         /* co_code (<= 3.10): bytes */

  /* frames */
  pp_s64 frame_back;       /* PyFrameObject.f_back / _PyInterpreterFrame.previous */
  pp_s64 frame_code;       /* f_code (<= 3.12) / f_executable (3.13+) */
  pp_s64 frame_localsplus; /* f_localsplus / localsplus */
  pp_s64 frame_lasti;      /* PyFrameObject.f_lasti (int, <= 3.10) */
  pp_s64 frame_prev_instr; /* _PyInterpreterFrame.prev_instr (3.11, 3.12) / instr_ptr (3.13+) */
  pp_s64 frame_owner;      /* _PyInterpreterFrame.owner (char, 3.11+) */
  pp_s64 frame_owned_by_cstack; /* owner value of C-stack shim frames (3.12+: 3), else -1 */

  /* PyThreadState / PyInterpreterState / _PyRuntimeState */
  pp_s64 tstate_frame;        /* tstate->frame (<= 3.10), ->cframe (3.11, 3.12), ->current_frame (3.13+) */
  pp_s64 cframe_current_frame;/* _PyCFrame.current_frame (3.11, 3.12), else -1 */
  pp_s64 tstate_next;         /* PyThreadState.next */
  pp_s64 tstate_thread_id;    /* PyThreadState.thread_id (pthread_self of the thread) */
  pp_s64 tstate_native_thread_id; /* PyThreadState.native_thread_id (3.11+), else -1 */
  pp_s64 interp_tstate_head;  /* interp->tstate_head (<= 3.11) / interp->threads.head (3.12+) */
  pp_s64 interp_next;         /* PyInterpreterState.next */
  pp_s64 runtime_interp_main; /* _PyRuntimeState.interpreters.main (3.7+), else -1 */
  pp_s64 runtime_interp_head; /* _PyRuntimeState.interpreters.head (3.7+), else -1 */
};

#endif /* PYPERF_BPF_SHARED_H */
