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
typedef uint16_t pp_u16;
typedef uint8_t pp_u8;
#else
typedef s64 pp_s64;
typedef u64 pp_u64;
typedef s32 pp_s32;
typedef u32 pp_u32;
typedef u16 pp_u16;
typedef u8 pp_u8;
#endif

/* How a CPython version lays out what the profiler reads. Byte offsets inside
 * the named struct; -1 where the field does not exist in that version. One
 * table per layout lives in PyOffsets.cc (data, checked against each
 * interpreter's own headers by tests/cc/test_py_offsets.cc). */
enum pyperf_frame_kind {
  PYPERF_FRAME_OBJECT = 0,      /* PyFrameObject chain: 2.7 .. 3.10 */
  PYPERF_FRAME_INTERPRETER = 1, /* _PyInterpreterFrame chain: 3.11 .. */
};
/* How a code object maps instruction offsets to lines (user space only). */
enum pyperf_line_table_format {
  PYPERF_LINES_LNOTAB = 0,        /* co_lnotab, unsigned line deltas (2.7) */
  PYPERF_LINES_LNOTAB_SIGNED = 1, /* co_lnotab, signed line deltas (3.6 .. 3.9) */
  PYPERF_LINES_LINETABLE = 2,     /* co_linetable of 3.10 */
  PYPERF_LINES_LOCATIONS = 3,     /* co_linetable location entries (3.11+) */
};
enum pyperf_string_kind {
  PYPERF_STRING_BYTES = 0,   /* 2.7 PyStringObject: char data at string_data */
  PYPERF_STRING_UNICODE = 1, /* 3.x PEP 393 PyUnicode (compact ASCII / compact) */
};

struct pyperf_offsets {
  pp_s64 frame_kind;  /* enum pyperf_frame_kind */
  pp_s64 string_kind; /* enum pyperf_string_kind */

  /* PyObject / PyVarObject / PyTypeObject */
  pp_s64 object_type;     /* PyObject.ob_type */
  pp_s64 type_name;       /* PyTypeObject.tp_name (const char *) */
  pp_s64 tuple_items;     /* PyTupleObject.ob_item */
  pp_s64 var_object_size; /* PyVarObject.ob_size */

  /* strings */
  pp_s64 string_data;          /* 2.7: PyStringObject.ob_sval; 3.x: sizeof(PyASCIIObject) */
  pp_s64 unicode_state;        /* PyASCIIObject.state (3.x) */
  pp_s64 unicode_length;       /* PyASCIIObject.length (3.x); PyVarObject.ob_size on 2.7 */
  pp_s64 compact_unicode_data; /* sizeof(PyCompactUnicodeObject) (3.x) */

  /* PyCodeObject */
  pp_s64 code_filename;      /* co_filename */
  pp_s64 code_name;          /* co_name */
  pp_s64 code_firstlineno;   /* co_firstlineno (int) */
  pp_s64 code_argcount;      /* co_argcount (int) */
  pp_s64 code_varnames;      /* co_varnames (<= 3.10) or co_localsplusnames (3.11+): tuple */
  pp_s64 code_linetable;     /* co_lnotab (<= 3.9) or co_linetable (3.10+): bytes */
  pp_s64 code_code_adaptive; /* co_code_adaptive (3.11+): first instruction */
  pp_s64 code_code;          /* co_code (<= 3.10): bytes */
  pp_s64 bytes_data;         /* where a bytes object's data starts (the line table's):
                                PyBytesObject.ob_sval; 2.7 PyStringObject.ob_sval */
  pp_s64 line_table_format;  /* enum pyperf_line_table_format */
  pp_s64 lasti_unit;         /* bytes per unit of pyperf_frame.lasti: 2 on 3.10
                                (f_lasti counts instructions), else 1 */

  /* frames */
  pp_s64 frame_back;        /* PyFrameObject.f_back / _PyInterpreterFrame.previous */
  pp_s64 frame_code;        /* f_code (<= 3.12) / f_executable (3.13+) */
  pp_s64 frame_localsplus;  /* f_localsplus / localsplus */
  pp_s64 frame_lasti;       /* PyFrameObject.f_lasti (int, <= 3.10) */
  pp_s64 frame_prev_instr;  /* _PyInterpreterFrame.prev_instr (3.11, 3.12) / instr_ptr (3.13+) */
  pp_s64 frame_owner;       /* _PyInterpreterFrame.owner (char, 3.11+) */
  pp_s64 frame_owner_shim;  /* owners >= this are shims, not Python calls: FRAME_OWNED_BY_CSTACK
                               (3.12, 3.13), FRAME_OWNED_BY_INTERPRETER (3.14+); else -1 */
  pp_s64 frame_is_entry;    /* _PyInterpreterFrame.is_entry (bool, 3.11 only), else -1 */
  pp_s64 stackref_tag_bits; /* Py_TAG_BITS of the _PyStackRef in f_executable and localsplus
                               (3.14+), cleared before use as a pointer; else 0 */

  /* PyThreadState / PyInterpreterState / _PyRuntimeState */
  pp_s64 tstate_frame; /* tstate->frame (<= 3.10), ->cframe (3.11, 3.12), ->current_frame (3.13+) */
  pp_s64 cframe_current_frame;    /* _PyCFrame.current_frame (3.11, 3.12), else -1 */
  pp_s64 tstate_next;             /* PyThreadState.next */
  pp_s64 tstate_thread_id;        /* PyThreadState.thread_id (pthread_self of the thread) */
  pp_s64 tstate_native_thread_id; /* PyThreadState.native_thread_id (3.11+), else -1 */
  pp_s64 interp_tstate_head;      /* interp->tstate_head (<= 3.11) / interp->threads.head (3.12+) */
  pp_s64 interp_next;             /* PyInterpreterState.next */
  pp_s64 runtime_interp_main;     /* _PyRuntimeState.interpreters.main (3.7+), else -1 */
  pp_s64 runtime_interp_head;     /* _PyRuntimeState.interpreters.head (3.7+), else -1 */

  /* asyncio tasks (--async-tasks, 3.14+): 0 where the process does not
   * publish them (PyAsyncioOffsets.h). The first group is the _asyncio
   * module's _Py_AsyncioModuleDebugOffsets, the rest _Py_DebugOffsets. */
  pp_s64 tstate_running_task;    /* _PyThreadStateImpl.asyncio_running_task */
  pp_s64 task_name;              /* TaskObj.task_name (a str, or an int: "Task-<int>") */
  pp_s64 task_awaited_by;        /* TaskObj.task_awaited_by (a task, or a set of them) */
  pp_s64 task_is_task;           /* TaskObj.task_is_task (char, 1 for a task) */
  pp_s64 task_awaited_by_is_set; /* TaskObj.task_awaited_by_is_set (char) */
  pp_s64 task_coro;              /* TaskObj.task_coro */
  pp_s64 gen_iframe;             /* PyGenObject.gi_iframe: a coroutine's own frame */
  pp_s64 type_flags;             /* PyTypeObject.tp_flags */
  pp_s64 long_tag;               /* PyLongObject.long_value.lv_tag */
  pp_s64 long_digits;            /* PyLongObject.long_value.ob_digit */
  pp_s64 set_table;              /* PySetObject.table */
  pp_s64 set_mask;               /* PySetObject.mask */
};

/* Upper bounds shared by both sides. */
#define PYPERF_MAX_LAYOUTS 16          /* offset tables loaded into py_offsets */
#define PYPERF_MAX_PROCESSES 4096      /* py_procs: processes profiled at once */
#define PYPERF_MAX_THREAD_STATES 16384 /* thread_states: tids whose state is cached (LRU) */
#define PYPERF_MAX_EXEC_TIMES 32768    /* exec_times: pids whose last exec is known (LRU) */
#define PYPERF_MAX_FRAMES 128          /* Python frames per sample (power of two) */
#define PYPERF_CLASS_LEN 32
#define PYPERF_FUNCTION_LEN 64
#define PYPERF_FILE_LEN 256
#define PYPERF_MAX_TASKS 8      /* tasks of a sample's chain (--async-tasks) */
#define PYPERF_TASK_NAME_LEN 64 /* bytes of a task's name an event holds */

/* What user space tells the BPF program about one profiled process. */
struct pyperf_proc_info {
  pp_u64 interp_addr; /* address holding the PyInterpreterState* whose threads are walked */
  pp_u64 code_type;   /* address of PyCode_Type: frames whose code is of another type are skipped */
  /* exec_times[pid] when user space began inspecting the process (0: none
   * known): a sample that finds another value comes from a later exec, whose
   * memory this entry does not describe. */
  pp_u64 exec_time;
  pp_u32 layout; /* index into py_offsets */
  pp_u32 pad;
};

/* How the BPF program copied a string, so user space can decode it exactly:
 * the PEP 393 kind of a 3.x str (bytes per character) or UTF-8 bytes (a 2.7
 * str; a type's tp_name). */
enum pyperf_text_encoding {
  PYPERF_TEXT_NONE = 0,         /* no string object (a NULL pointer) */
  PYPERF_TEXT_LATIN1 = 1,       /* PyUnicode_1BYTE_KIND (compact ASCII too) */
  PYPERF_TEXT_UCS2 = 2,         /* PyUnicode_2BYTE_KIND */
  PYPERF_TEXT_UCS4 = 4,         /* PyUnicode_4BYTE_KIND */
  PYPERF_TEXT_UTF8 = 8,         /* bytes meant as UTF-8 */
  PYPERF_TEXT_UNREADABLE = 255, /* an object whose text could not be read */
};

/* One copied string: `size` is the byte length of the whole string in its
 * encoding (characters x kind), so a value above the buffer's size says the
 * copy was cut, always at a character boundary for PEP 393 kinds. */
struct pyperf_text {
  pp_u32 size;
  pp_u8 encoding; /* enum pyperf_text_encoding */
  pp_u8 pad[3];
};

/* A code object's identity, interned in the symbols map (key) -> id. The
 * buffers hold raw string bytes (see pyperf_text), zero-filled after them. */
struct pyperf_symbol {
  char class_name[PYPERF_CLASS_LEN];
  char function[PYPERF_FUNCTION_LEN];
  char file[PYPERF_FILE_LEN];
  struct pyperf_text class_text;
  struct pyperf_text function_text;
  struct pyperf_text file_text;
  pp_s32 first_line;
};

/* symbol_by_id's value: the symbol, and when it was interned (never 0). An id
 * retired and later handed out again gets another stamp, so a code_symbols
 * entry that remembers the id and its stamp never names the newcomer. */
struct pyperf_symbol_slot {
  struct pyperf_symbol symbol;
  pp_u64 stamp;
};

/* The code object cache (code_symbols): what a frame of a code object seen
 * before is named, found by the code object's address, so that its strings
 * are neither copied nor hashed again. Addresses are reused when code objects
 * are freed, and so are the addresses of their strings: an entry is used only
 * while the code object still holds the same name and file objects with the
 * same text (each string's own cached hash when it has one, else a
 * fingerprint of the bytes the symbol holds) and the same first line, and
 * while its symbol id still holds the symbol it was given for.
 *
 * A method's class comes from its first argument, so it takes a second entry:
 * class_key 0 is the code object's own entry (arg_kind says where a class
 * comes from); class_key = the class's address is the entry of the code object
 * called on that class, checked against the class name's bytes and made for
 * the code object the first entry is now (the same name, file and first line:
 * a code object at a reused address may be called on an old class first). */
enum pyperf_arg_kind {
  PYPERF_ARG_NONE = 0, /* no class: the symbol is the entry's */
  PYPERF_ARG_SELF = 1, /* the type of a first argument named self */
  PYPERF_ARG_CLS = 2,  /* a first argument named cls */
};
struct pyperf_code_key {
  pp_u64 code;
  pp_u64 class_key;
};
struct pyperf_code_entry {
  pp_u64 name;        /* co_name's address */
  pp_u64 file;        /* co_filename's address */
  pp_u64 name_print;  /* the name's text */
  pp_u64 file_print;  /* the file's text */
  pp_u64 class_print; /* class entries: the class name's text */
  pp_u64 stamp;      /* symbol_by_id's stamp of symbol_id */
  pp_s32 symbol_id;  /* arg_kind PYPERF_ARG_NONE or a class entry: the symbol */
  pp_s32 first_line;
  pp_u8 arg_kind; /* enum pyperf_arg_kind (class_key 0 only) */
  pp_u8 pad[7];
};

/* The slots of the per-CPU symbol_counter array: [NEXT_ID] the count that
 * makes ids unique; [INTERNED] symbols this CPU put into both maps; frames
 * named from code_symbols ([CODE_HITS]) and by copying their strings
 * ([CODE_MISSES]). */
#define PYPERF_SYMBOL_NEXT_ID 0
#define PYPERF_SYMBOL_INTERNED 1
#define PYPERF_SYMBOL_CODE_HITS 2
#define PYPERF_SYMBOL_CODE_MISSES 3
#define PYPERF_SYMBOL_COUNTERS 4

/* Special symbol ids. */
#define PYPERF_SYMBOL_LOST (-1)    /* symbols map full: [Lost Symbol] */
#define PYPERF_SYMBOL_MISSING (-2) /* a frame without a code object: (missing) */

enum pyperf_error {
  PYPERF_ERROR_NONE = 0,
  PYPERF_ERROR_NO_OFFSETS = 1,     /* no offset table for the process */
  PYPERF_ERROR_NO_INTERPRETER = 2, /* interpreter state not readable */
  PYPERF_ERROR_THREAD_STATE = 3,   /* thread list longer than the walk bound */
  PYPERF_ERROR_TAIL_CALL = 4,      /* a tail call failed */
  /* The frame chain loops (memory the process corrupted): the frames up to
   * the loop's first repeat are sent, each once; the rest is unknown. */
  PYPERF_ERROR_FRAME_CYCLE = 5,
  /* A frame's memory could not be read (a corrupted pointer into unmapped
   * memory, or a page swapped out): the frames below it are sent. */
  PYPERF_ERROR_FRAME_UNREADABLE = 6,
};

struct pyperf_frame {
  pp_s32 symbol_id;
  pp_s32 lasti; /* instruction offset in the code object (version-specific units), -1 unknown */
  pp_u64 code;  /* code object address (for --line-numbers current) */
};

/* Which Python frames an eval-loop call (one native frame of
 * _PyEval_EvalFrameDefault or PyEval_EvalFrameEx) ran, for native frames
 * interleaved with Python ones. Before 3.11 each call runs one frame, and
 * user space knows that from the layout (entries are NONE). From 3.11 on a
 * call runs a run of frames; its first (root-most) is its entry frame:
 * 3.11 says so in is_entry (UNANCHORED); 3.12+ link it to a shim frame that is
 * a local variable of the eval loop's C frame, whose address tells which
 * native frame ran the run (ANCHOR_BASE + its distance from the sample's sp). */
#define PYPERF_ENTRY_NONE 0       /* the frame's call also ran the frame rootward of it */
#define PYPERF_ENTRY_UNANCHORED 1 /* the first frame its call ran; the call's C frame unknown */
#define PYPERF_ENTRY_ANCHOR_BASE 2

/* One sample, sent through the perf buffer. Python frames leaf first. The
 * user stack copy (user_stack_len bytes from address user_stack_start)
 * follows the fixed part. */
/* --async-tasks: one task of the chain that awaits the running one. */
#define PYPERF_TASK_NAME_NONE 0       /* no name could be read */
#define PYPERF_TASK_NAME_TEXT 1       /* a str: name[] and name_text */
#define PYPERF_TASK_NAME_NUMBER 2     /* an int, the default name "Task-<number>" */
#define PYPERF_TASK_ERROR_NONE 0
#define PYPERF_TASK_ERROR_TOO_DEEP 1  /* more awaiting tasks than PYPERF_MAX_TASKS */
#define PYPERF_TASK_ERROR_UNREADABLE 2 /* an awaiting task that is not one (freed, reused) */
struct pyperf_task {
  pp_s32 coro_symbol; /* the symbol id of its coroutine's code (PYPERF_SYMBOL_* if none) */
  pp_u8 name_kind;    /* PYPERF_TASK_NAME_* */
  pp_u8 pad[3];
  struct pyperf_text name_text;
  pp_u64 number;
  char name[PYPERF_TASK_NAME_LEN];
};

struct pyperf_event {
  pp_u32 pid;
  pp_u32 tid;
  char comm[16];
  pp_s32
      kernel_stack_id; /* in its generation's kernel stacks map; negative: none (-EFAULT) or lost */
  pp_u32 frame_count;
  pp_u8 error;
  pp_u8 truncated;
  pp_u8 user_mode;
  pp_u8 no_thread_state; /* the thread list holds no state of this thread (a native thread) */
  /* The kernel stacks' generation when the id was taken, and so the map it
   * is in (even or odd). User space empties a map only once every event of
   * its last generation is read, then starts the next generation in it: an id
   * more than one generation old may since name another stack, so it is not
   * read. */
  pp_u32 kernel_stack_generation;
  pp_u64 ip;
  pp_u64 sp;
  pp_u64 bp;
  /* The task's mm_struct: a new one at every exec, so user space knows the
   * image the sample belongs to without reading /proc (0: unknown). */
  pp_u64 mm;
  pp_u64 user_stack_start;
  pp_u32 user_stack_len;
  /* The process exec'd since user space inspected it: no Python frames were
   * walked (its entry describes the image before), native and kernel ones were. */
  pp_u8 replaced;
  /* The copy stopped at its size (USER_STACK_PAGES), not where the stack's
   * memory ended: the stack goes on beyond it. */
  pp_u8 user_stack_cut;
  /* 3.11, 3.12: a run of frames did not begin where its eval-loop call's
   * _PyCFrame says (a call being entered as the sample was taken): which
   * frames a call ran is not known. */
  pp_u8 calls_mismatch;
  /* --async-tasks: PYPERF_TASK_ERROR_* for the chain's root end. */
  pp_u8 task_error;
  /* --async-tasks: tasks[0] is the running task, each next one awaits the
   * one before; task_frame is 1 + the index in frames[] of the running
   * task's coroutine frame (0: not among them). */
  pp_u16 task_count;
  pp_u16 task_frame;
  pp_u8 pad2[4];
  struct pyperf_task tasks[PYPERF_MAX_TASKS];
  /* Where each frame's eval-loop call begins: entries[i] (PYPERF_ENTRY_*)
   * for frames[i], valid below frame_count. */
  pp_u32 entries[PYPERF_MAX_FRAMES];
  struct pyperf_frame frames[PYPERF_MAX_FRAMES];
  pp_u8 user_stack[];
};

/* Where the BPF program finds the sampled task's user thread pointer and its
 * saved user registers. Run-time values (the kernel_offsets map), so that the
 * program is compiled once and the values are checked against the running
 * kernel before sampling starts (KernelOffsetCheck.h). */
struct pyperf_kernel_offsets {
  pp_u64 fs_offset;    /* task_struct.thread.fsbase */
  pp_u64 stack_offset; /* task_struct.stack */
  pp_u64 regs_offset;  /* saved user pt_regs, from task->stack: THREAD_SIZE - padding - 168 */
  pp_u64 mm_offset;    /* task_struct.mm, 0 if unknown (then pyperf_event.mm is 0) */
};

/* The start-up check (check_kernel_offsets): each candidate's fs/stack pair is
 * read on every sample of the checking thread, the saved registers at each
 * candidate pt_regs position. */
#define PYPERF_CHECK_CANDIDATES 2
#define PYPERF_CHECK_REGS_LAYOUTS 4

struct pyperf_offset_check_input {
  /* The pairs to check (their regs_offset is unused). */
  struct pyperf_kernel_offsets candidates[PYPERF_CHECK_CANDIDATES];
  /* The positions of the saved user pt_regs tried, from task->stack. */
  pp_u64 regs_offsets[PYPERF_CHECK_REGS_LAYOUTS];
  pp_u64 fsbase;          /* arch_prctl(ARCH_GET_FS) of the checking thread */
  pp_u32 tid;             /* the checking thread */
  pp_u32 candidate_count; /* candidates in use */
};

/* What the check saw for one candidate. */
struct pyperf_offset_check_result {
  pp_u64 samples;        /* samples of the checking thread */
  pp_u64 fsbase_matches; /* of them, with the fsbase read equal to the expected one */
  pp_u64 user_samples;   /* samples that hit user mode */
  /* Of them, with the ip and sp saved at regs_offsets[i] equal to perf's. */
  pp_u64 regs_matches[PYPERF_CHECK_REGS_LAYOUTS];
  /* For the message on a failure: the fsbase read at the last sample; at the
   * last user-mode sample, task->stack, the ip and sp saved at
   * regs_offsets[0], and perf's ip and sp. */
  pp_u64 fsbase;
  pp_u64 stack;
  pp_u64 saved_ip;
  pp_u64 saved_sp;
  pp_u64 user_ip;
  pp_u64 user_sp;
};

#endif /* PYPERF_BPF_SHARED_H */
