/* PyPerf's BPF program, compiled at run time by libbcc without kernel headers
 * (src/cc/kernel_headers). PyPerfBpfShared.h is prepended by the loader.
 *
 * On every exec of the host, on_exec notes the time in exec_times.
 * Per CPU-clock sample of a profiled process:
 *   on_sample         header, user registers, a copy of the user stack, the
 *                     kernel stack id; then tail-calls
 *   find_thread_state the sampled thread's PyThreadState (cached per tid and
 *                     re-validated; on a miss, a walk of the interpreter's
 *                     thread list, several tail calls long); then
 *   walk_python_stack FRAMES_PER_PROG Python frames per call, tail-calling
 *                     itself up to MAX_FRAMES, then submits the event.
 * find_thread_state and walk_python_stack are in PythonStackWalkProgram.c,
 * which the loader appends to this file.
 * Once at start-up, on samples of PyPerf's own thread, check_kernel_offsets
 * (KernelOffsetCheckProgram.c, appended by the loader) reads the task_struct
 * offsets PyPerf may use, so user space can compare them with the kernel's.
 * Kernel structures are read only at the offsets in the kernel_offsets map
 * (from BTF or the command line, checked at start-up); Python structures at
 * offsets from PyOffsets.cc (3.13+: from the interpreter's own _Py_DebugOffsets
 * where it covers them, PyDebugOffsets.cc).
 *
 * Compile-time parameters (-D): NUM_CPUS, USER_STACK_PAGES, USER_STACK_MASK,
 * SYMBOLS_MAP_SIZE, KERNEL_STACKS_MAP_SIZE, MAX_FRAMES, FRAMES_PER_PROG,
 * THREADS_PER_PROG, MAX_THREAD_WALKS, PYPERF_PROBE_READ_USER.
 * Loops are bounded and left to the verifier (kernel 5.3 or later). */

#include <uapi/linux/bpf_perf_event.h>

#define RED_ZONE 128
#define MAX_FRAMES PYPERF_MAX_FRAMES
#define USER_STACK_BYTES (USER_STACK_PAGES > 0 ? USER_STACK_PAGES * PAGE_SIZE : 8)
/* Room for a page read at any offset below USER_STACK_MASK: the verifier sees
 * the offset's bound through the mask only. */
#define USER_STACK_STORAGE (USER_STACK_MASK + 1 + PAGE_SIZE)

/* Per-CPU scratch: the event being built and the walkers' state. */
struct pyperf_sample_state {
  u64 task;
  u64 frame;
  u64 walk_cursor;
  u64 fsbase; /* the sampled task's thread pointer (pthread_self) */
  u32 thread_walks;
  u32 pad;
  /* A frame chain the process corrupted may loop. Brent's cycle check: the
   * walk compares each frame with a mark that moves ahead at power-of-two
   * step counts, so a loop is caught within about three of its lengths. */
  u64 cycle_mark;
  u32 cycle_steps;      /* frames walked since the mark was set */
  u32 cycle_power;      /* the mark moves when cycle_steps reaches it */
  u32 recorded_since_mark; /* of those, frames recorded in the event */
  u32 pad3;
  u64 frame_addr[MAX_FRAMES]; /* the frame behind each recorded event frame */
  struct pyperf_proc_info proc;
  struct pyperf_symbol symbol;
  struct pyperf_event event; /* its user_stack[] continues into the storage below */
  u8 user_stack_storage[USER_STACK_STORAGE];
};

BPF_HASH(py_procs, u32, struct pyperf_proc_info, PYPERF_MAX_PROCESSES);
/* pid -> the time (bpf_ktime_get_ns) of its last exec seen by on_exec. A pid's
 * execs have increasing times, so an entry the LRU evicted and wrote again
 * never equals the value user space recorded: an exec is never missed (an
 * eviction alone reads as one exec too many, which is visible and harmless). */
BPF_TABLE("lru_hash", u32, u64, exec_times, PYPERF_MAX_EXEC_TIMES);
BPF_ARRAY(py_offsets, struct pyperf_offsets, PYPERF_MAX_LAYOUTS);
BPF_TABLE("lru_hash", u32, u64, thread_states, PYPERF_MAX_THREAD_STATES);
BPF_HASH(symbols, struct pyperf_symbol, s32, SYMBOLS_MAP_SIZE);
BPF_HASH(symbol_by_id, s32, struct pyperf_symbol, SYMBOLS_MAP_SIZE);
/* Per CPU: [PYPERF_SYMBOL_NEXT_ID] the count that makes ids unique,
 * [PYPERF_SYMBOL_INTERNED] symbols this CPU put into both maps. User space
 * retires symbols (deletes them from both maps) and knows how many it did,
 * so the maps' fill is the sum of the second less that. */
BPF_PERCPU_ARRAY(symbol_counter, u64, PYPERF_SYMBOL_COUNTERS);
/* Scratch per CPU; a plain array indexed by CPU, since per-CPU map values
 * are limited to 32 KiB and the user stack copy may be larger. */
BPF_ARRAY(sample_state, struct pyperf_sample_state, NUM_CPUS);
BPF_PERF_OUTPUT(events);
/* Two maps of kernel stacks, taking turns: an even generation's ids are in
 * kernel_stacks_even, an odd one's in kernel_stacks_odd. User space empties
 * the map the next generation will fill (the one before the current's, whose
 * events it has all read) and then bumps the generation, so the map events in
 * flight name is never emptied under them. */
BPF_STACK_TRACE(kernel_stacks_even, KERNEL_STACKS_MAP_SIZE);
BPF_STACK_TRACE(kernel_stacks_odd, KERNEL_STACKS_MAP_SIZE);
/* [0]: the kernel stacks' generation (see pyperf_event.kernel_stack_generation). */
BPF_ARRAY(kernel_stack_generation, u32, 1);
BPF_PROG_ARRAY(progs, 2);
/* [0]: the task_struct offsets in use, set before sampling starts. */
BPF_ARRAY(kernel_offsets, struct pyperf_kernel_offsets, 1);

#define PROG_FIND_THREAD_STATE 0
#define PROG_WALK_PYTHON_STACK 1

/* The probe-read helpers, called through pointers of our own. libbcc rewrites
 * each call of bpf_probe_read_user{,_str} by name after looking the helper up
 * in /proc/kallsyms, and libbcc 0.26 rebuilds a map of every kernel symbol for
 * each such call site: that was most of PyPerf's start-up CPU. The loader asks
 * the kernel once whether it has the user/kernel helpers (Linux 5.5+) and sets
 * PYPERF_PROBE_READ_USER; older kernels get bpf_probe_read{,_str}, as libbcc
 * would have chosen. */
#if PYPERF_PROBE_READ_USER
#define PYPERF_FUNC_READ_USER BPF_FUNC_probe_read_user
#define PYPERF_FUNC_READ_USER_STR BPF_FUNC_probe_read_user_str
#define PYPERF_FUNC_READ_KERNEL BPF_FUNC_probe_read_kernel
#else
#define PYPERF_FUNC_READ_USER BPF_FUNC_probe_read
#define PYPERF_FUNC_READ_USER_STR BPF_FUNC_probe_read_str
#define PYPERF_FUNC_READ_KERNEL BPF_FUNC_probe_read
#endif
static int (*read_user)(void *dst, u32 size, const void *src) = (void *)PYPERF_FUNC_READ_USER;
static int (*read_user_str)(void *dst, u32 size, const void *src) = (void *)PYPERF_FUNC_READ_USER_STR;
static int (*read_kernel)(void *dst, u32 size, const void *src) = (void *)PYPERF_FUNC_READ_KERNEL;

static __always_inline u64 read_ptr(u64 addr) {
  u64 value = 0;
  if (read_user(&value, sizeof(value), (void *)addr) != 0) return 0;
  return value;
}

static __always_inline s32 read_s32(u64 addr) {
  s32 value = 0;
  read_user(&value, sizeof(value), (void *)addr);
  return value;
}

static __always_inline void submit(struct bpf_perf_event_data *ctx, struct pyperf_sample_state *state) {
  struct pyperf_event *event = &state->event;
  u32 len = event->user_stack_len;
  if (len > USER_STACK_BYTES) len = USER_STACK_BYTES;
  u64 size = offsetof(struct pyperf_event, user_stack) + len;
  events.perf_submit(ctx, event, size);
}

static __always_inline struct pyperf_sample_state *this_cpu_state(void) {
  u32 cpu = bpf_get_smp_processor_id();
  return sample_state.lookup(&cpu);
}

static __always_inline struct pyperf_offsets *state_offsets(struct pyperf_sample_state *state) {
  u32 layout = state->proc.layout;
  return py_offsets.lookup(&layout);
}

/* Tail-calls the next stage; returning from the call means it failed, and the
 * sample is sent as it is, marked. */
static __always_inline void continue_with(struct bpf_perf_event_data *ctx,
                                          struct pyperf_sample_state *state, int prog) {
  progs.call(ctx, prog);
  state->event.error = PYPERF_ERROR_TAIL_CALL;
  submit(ctx, state);
}

/* PEP 393 state bits of PyASCIIObject.state in GIL and 3.13t builds, checked
 * against each interpreter's headers by tests/cc/test_py_offsets.cc. */
#define UNICODE_KIND_SHIFT 2
#define UNICODE_COMPACT_BIT 5
#define UNICODE_ASCII_BIT 6
/* More characters than any name or path: a larger length is corrupt memory. */
#define MAX_TEXT_LENGTH (1u << 24)

/* Copies the raw bytes of a Python string object (a 2.7 str or a 3.x PEP 393
 * str) into dst, at most cap bytes (a multiple of 4, so a cut falls between
 * characters), and describes them in *text. User space decodes the bytes. */
static __always_inline void read_py_text(struct pyperf_offsets *o, u64 obj, char *dst, u32 cap,
                                         struct pyperf_text *text) {
  text->encoding = PYPERF_TEXT_NONE;
  text->size = 0;
  if (obj == 0) return;
  text->encoding = PYPERF_TEXT_UNREADABLE;
  u64 length = 0;
  if (read_user(&length, sizeof(length), (void *)(obj + o->unicode_length)) != 0) return;
  if (length > MAX_TEXT_LENGTH) return;
  u64 data = obj + o->string_data;
  u8 encoding = PYPERF_TEXT_UTF8;
  u64 width = 1;
  if (o->string_kind == PYPERF_STRING_UNICODE) {
    u32 state = 0;
    if (read_user(&state, sizeof(state), (void *)(obj + o->unicode_state)) != 0) return;
    u32 kind = (state >> UNICODE_KIND_SHIFT) & 7;
    if (kind != 1 && kind != 2 && kind != 4) return;
    if (!((state >> UNICODE_COMPACT_BIT) & 1)) {
      /* A legacy string: its characters are elsewhere (PyUnicodeObject.data). */
      data = read_ptr(obj + o->compact_unicode_data);
      if (data == 0) return;
    } else if (!((state >> UNICODE_ASCII_BIT) & 1)) {
      data = obj + o->compact_unicode_data;
    }
    encoding = kind;
    width = kind;
  }
  /* 64-bit throughout: a 32-bit copy of the size would lose the bound the
   * verifier needs on the read's length. */
  u64 size = length * width;
  u64 n = size;
  if (n > cap) n = cap;
  if (n > 0 && read_user(dst, n, (void *)data) != 0) return;
  text->size = (u32)size;
  text->encoding = encoding;
}

/* The class of a method: the type of a first argument named self, or the
 * first argument itself when named cls. tp_name is a C string in UTF-8. */
static __always_inline void read_class_name(struct pyperf_offsets *o, u64 code, u64 frame,
                                            struct pyperf_symbol *sym) {
  s32 argcount = read_s32(code + o->code_argcount);
  if (argcount <= 0) return;
  u64 names = read_ptr(code + o->code_varnames);
  if (names == 0) return;
  u64 first = read_ptr(names + o->tuple_items);
  char arg[8] = {};
  struct pyperf_text arg_text = {};
  read_py_text(o, first, arg, sizeof(arg), &arg_text);
  /* "self" and "cls" are ASCII: one byte per character in every encoding. */
  if (arg_text.encoding != PYPERF_TEXT_LATIN1 && arg_text.encoding != PYPERF_TEXT_UTF8) return;
  u64 arg0 = read_ptr(frame + o->frame_localsplus) & ~(u64)o->stackref_tag_bits;
  if (arg0 == 0) return;
  u64 type = 0;
  if (arg_text.size == 4 && arg[0] == 's' && arg[1] == 'e' && arg[2] == 'l' && arg[3] == 'f') {
    type = read_ptr(arg0 + o->object_type);
  } else if (arg_text.size == 3 && arg[0] == 'c' && arg[1] == 'l' && arg[2] == 's') {
    type = arg0;
  } else {
    return;
  }
  u64 tp_name = read_ptr(type + o->type_name);
  if (tp_name == 0) return;
  sym->class_text.encoding = PYPERF_TEXT_UNREADABLE;
  long copied = read_user_str(sym->class_name, sizeof(sym->class_name), (void *)tp_name);
  if (copied <= 0) return;
  sym->class_text.encoding = PYPERF_TEXT_UTF8;
  sym->class_text.size = (u32)copied - 1;
  if (copied == sizeof(sym->class_name)) {
    /* The buffer is full: the name was cut unless it ends right there. The
     * last byte copied is the terminator, so size counts one byte less than
     * the buffer; a larger size marks the cut. */
    char next = 0;
    read_user(&next, 1, (void *)(tp_name + sizeof(sym->class_name) - 1));
    if (next != 0) sym->class_text.size = sizeof(sym->class_name) + 1;
  }
}

/* Interns the frame's code object as a symbol id; PYPERF_SYMBOL_LOST when
 * the map is full. */
static __always_inline s32 intern_symbol(struct pyperf_sample_state *state, struct pyperf_offsets *o,
                                         u64 code, u64 frame) {
  struct pyperf_symbol *sym = &state->symbol;
  __builtin_memset(sym, 0, sizeof(*sym));
  read_py_text(o, read_ptr(code + o->code_filename), sym->file, sizeof(sym->file),
               &sym->file_text);
  read_py_text(o, read_ptr(code + o->code_name), sym->function, sizeof(sym->function),
               &sym->function_text);
  read_class_name(o, code, frame, sym);
  sym->first_line = read_s32(code + o->code_firstlineno);

  s32 *existing = symbols.lookup(sym);
  if (existing) return *existing;
  int next_slot = PYPERF_SYMBOL_NEXT_ID, interned_slot = PYPERF_SYMBOL_INTERNED;
  u64 *counter = symbol_counter.lookup(&next_slot);
  u64 *interned = symbol_counter.lookup(&interned_slot);
  if (!counter || !interned) return PYPERF_SYMBOL_LOST;
  /* Ids without atomics: the CPU number above a per-CPU count. */
  s32 id = (s32)(((bpf_get_smp_processor_id() & 0x7f) << 24) | (*counter & 0xffffff));
  *counter += 1;
  if (symbols.insert(sym, &id) != 0) {
    /* Another CPU interned it first, or the map is full. */
    existing = symbols.lookup(sym);
    return existing ? *existing : PYPERF_SYMBOL_LOST;
  }
  /* User space resolves ids through this map; the id is stored before the
   * event that names it is sent. An id still held by another symbol (the
   * count wrapped, or a host of more than 128 CPUs) is never overwritten:
   * the new symbol gives its key back and this frame is lost, not misnamed. */
  if (symbol_by_id.insert(&id, sym) != 0) {
    symbols.delete(sym);
    return PYPERF_SYMBOL_LOST;
  }
  *interned += 1;
  return id;
}

/* sched_process_exec, on every exec of the host: after de_thread, so the
 * current task is the process's leader and its tgid the process's pid. */
int on_exec(void *ctx) {
  u32 pid = bpf_get_current_pid_tgid() >> 32;
  u64 now = bpf_ktime_get_ns();
  exec_times.update(&pid, &now);
  return 0;
}

int on_sample(struct bpf_perf_event_data *ctx) {
  u64 pid_tgid = bpf_get_current_pid_tgid();
  u32 pid = pid_tgid >> 32;
  struct pyperf_proc_info *proc = py_procs.lookup(&pid);
  if (!proc) return 0;
  struct pyperf_sample_state *state = this_cpu_state();
  if (!state) return 0;
  int zero = 0;
  struct pyperf_kernel_offsets *k = kernel_offsets.lookup(&zero);
  if (!k) return 0;
  struct pyperf_event *event = &state->event;

  event->pid = pid;
  event->tid = (u32)pid_tgid;
  bpf_get_current_comm(event->comm, sizeof(event->comm));
  event->error = PYPERF_ERROR_NONE;
  event->truncated = 0;
  event->no_thread_state = 0;
  event->frame_count = 0;
  event->user_stack_len = 0;
  u64 *exec_time = exec_times.lookup(&pid);
  event->replaced = (exec_time ? *exec_time : 0) != proc->exec_time;
  /* The generation is read before the id is taken, and picks the map: the
   * id is in the map of the generation the event carries. A stack whose slot
   * holds another one, or a full map, gives -EEXIST / -ENOMEM (a lost kernel
   * stack), never the other stack: with BPF_F_REUSE_STACKID an event still in
   * flight would name the frames that replaced its own. */
  u32 *generation = kernel_stack_generation.lookup(&zero);
  u32 kernel_generation = generation ? *(volatile u32 *)generation : 0;
  event->kernel_stack_generation = kernel_generation;
  if (kernel_generation & 1)
    event->kernel_stack_id = kernel_stacks_odd.get_stackid(ctx, 0);
  else
    event->kernel_stack_id = kernel_stacks_even.get_stackid(ctx, 0);

  u64 task = bpf_get_current_task();
  state->task = task;
  state->proc = *proc;
  state->thread_walks = 0;
  state->walk_cursor = 0;
  state->frame = 0;
  state->fsbase = 0;
  state->cycle_mark = 0;
  state->cycle_steps = 0;
  state->cycle_power = 1;
  state->recorded_since_mark = 0;
  read_kernel(&state->fsbase, sizeof(state->fsbase), (void *)(task + k->fs_offset));
  event->mm = 0;
  if (k->mm_offset) read_kernel(&event->mm, sizeof(event->mm), (void *)(task + k->mm_offset));

  /* User registers: from perf when the sample hit user mode, otherwise the
   * ones saved on entry to the kernel, at the top of the task's kernel stack. */
  if ((ctx->regs.cs & 3) == 3) {
    event->ip = ctx->regs.ip;
    event->sp = ctx->regs.sp;
    event->bp = ctx->regs.bp;
    event->user_mode = 1;
  } else {
    u64 stack = 0;
    read_kernel(&stack, sizeof(stack), (void *)(task + k->stack_offset));
    struct pt_regs *regs = (struct pt_regs *)(stack + k->regs_offset);
    read_kernel(&event->ip, sizeof(u64), &regs->ip);
    read_kernel(&event->sp, sizeof(u64), &regs->sp);
    read_kernel(&event->bp, sizeof(u64), &regs->bp);
    event->user_mode = 0;
  }

#if USER_STACK_PAGES > 0
  /* The user stack from just below sp (the red zone), in page-bounded chunks
   * so the copy stops at the first page that faults. */
  if (event->sp > RED_ZONE) {
    u64 start = event->sp - RED_ZONE;
    event->user_stack_start = start;
    u32 first = PAGE_SIZE - (start & (PAGE_SIZE - 1));
    if (first > PAGE_SIZE) first = PAGE_SIZE;
    if (read_user(event->user_stack, first, (void *)start) == 0) {
      u32 copied = first;
      for (int i = 0; i < USER_STACK_PAGES; i++) {
        if (copied + PAGE_SIZE > USER_STACK_PAGES * PAGE_SIZE) break;
        u32 off = copied & USER_STACK_MASK;
        if (read_user(&event->user_stack[off], PAGE_SIZE, (void *)(start + copied)) != 0)
          break;
        copied += PAGE_SIZE;
      }
      event->user_stack_len = copied;
    }
  }
#endif

  if (event->replaced) {
    submit(ctx, state); /* another program's memory: its Python frames are not walked */
    return 0;
  }
  continue_with(ctx, state, PROG_FIND_THREAD_STATE);
  return 0;
}
