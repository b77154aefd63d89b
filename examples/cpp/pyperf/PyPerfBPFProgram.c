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
 *                     itself up to MAX_FRAMES, then submits the event, or
 *                     with PYPERF_ASYNC_TASKS tail-calls
 *   walk_tasks        the running asyncio task and the tasks awaiting it
 *                     (PythonTaskProgram.c), then submits the event.
 * find_thread_state and walk_python_stack are in PythonStackWalkProgram.c,
 * and the frames' naming (code_symbol) in PythonSymbolProgram.c, which the
 * loader appends to this file.
 * Once at start-up, on samples of PyPerf's own thread, check_kernel_offsets
 * (KernelOffsetCheckProgram.c, appended by the loader) reads the task_struct
 * offsets PyPerf may use, so user space can compare them with the kernel's.
 * Kernel structures are read only at the offsets in the kernel_offsets map
 * (from BTF or the command line, checked at start-up); Python structures at
 * offsets from PyOffsets.cc (3.13+: from the interpreter's own _Py_DebugOffsets
 * where it covers them, PyDebugOffsets.cc).
 *
 * Compile-time parameters (-D): NUM_CPUS, USER_STACK_PAGES, USER_STACK_MASK,
 * SYMBOLS_MAP_SIZE, CODE_SYMBOLS_MAP_SIZE, KERNEL_STACKS_MAP_SIZE, MAX_FRAMES, FRAMES_PER_PROG,
 * THREADS_PER_PROG, MAX_THREAD_WALKS, PYPERF_PROBE_READ_USER, PYPERF_ASYNC_TASKS
 * (1: --async-tasks, the task chain is read; 0: the event's tasks stay empty).
 * Loops are bounded and left to the verifier (kernel 5.3 or later). */

#include <uapi/linux/bpf_perf_event.h>

#define RED_ZONE 128
#define MAX_FRAMES PYPERF_MAX_FRAMES
#define USER_STACK_BYTES (USER_STACK_PAGES > 0 ? USER_STACK_PAGES * PAGE_SIZE : 8)
/* Room for a page read at any offset below USER_STACK_MASK: the verifier sees
 * the offset's bound through the mask only. */
#define USER_STACK_STORAGE (USER_STACK_MASK + 1 + PAGE_SIZE)

/* Bytes read at once from a frame and from a code object: past the last field
 * the walker uses in every layout (2.7's f_lasti at 120; a free-threaded
 * 3.13's co_name at 136). A field beyond them, or a block whose read failed
 * (an object at the end of its mapping), is read on its own. */
#define FRAME_BLOCK 128
#define CODE_BLOCK 160
/* --async-tasks: bytes read at once from a task: its name, coroutine and
 * awaiter fields (up to task_name + 8 = 144 on 3.14 and 3.15), within
 * sizeof(TaskObj) (168) so that the read never runs past the object. */
#define TASK_BLOCK 152

/* Per-CPU scratch: the event being built and the walkers' state. */
struct pyperf_sample_state {
  u64 task;
  u64 frame;
  /* 3.11, 3.12: the _PyCFrame of the eval-loop call whose frames the walk is
   * in (its current_frame must be the leaf-most of them); 0 elsewhere. */
  u64 cframe;
  /* --async-tasks: the thread's running asyncio task and the frame of its
   * coroutine (0: none). */
  u64 running_task;
  u64 coro_frame;
  u64 walk_cursor;
  u64 fsbase; /* the sampled task's thread pointer (pthread_self) */
  u32 thread_walks;
  u32 pad;
  /* A frame chain the process corrupted may loop. Brent's cycle check: the
   * walk compares each frame with a mark that moves ahead at power-of-two
   * step counts, so a loop is caught within about three of its lengths. */
  u64 cycle_mark;
  u32 cycle_steps;         /* frames walked since the mark was set */
  u32 cycle_power;         /* the mark moves when cycle_steps reaches it */
  u32 recorded_since_mark; /* of those, frames recorded in the event */
  u32 pad3;
  u64 frame_addr[MAX_FRAMES]; /* the frame behind each recorded event frame */
  struct pyperf_proc_info proc;
  u32 code_hits;   /* frames of this sample named from code_symbols */
  u32 code_misses; /* and by copying their strings */
  /* The last file object whose text this sample checked, and its print. A
   * code object on the stack holds its file object, so for the rest of the
   * sample that address is that object: the frames of one module check their
   * file once. */
  u64 checked_file;
  u64 checked_file_print;
  u8 text_scratch[PYPERF_FILE_LEN]; /* a string's bytes, to check a code_symbols entry */
  /* The first bytes of the frame and the code object being walked: one read
   * each instead of one per field (a read costs far more than its bytes). */
  u8 frame_block[FRAME_BLOCK];
  u8 code_block[CODE_BLOCK];
  u8 task_block[TASK_BLOCK]; /* --async-tasks: the first bytes of a task */
  u32 frame_block_ok;
  u32 code_block_ok;
  struct pyperf_symbol_slot slot; /* the symbol being interned, and its stamp */
  struct pyperf_event event;      /* its user_stack[] continues into the storage below */
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
BPF_HASH(symbol_by_id, s32, struct pyperf_symbol_slot, SYMBOLS_MAP_SIZE);
/* Per CPU: see PYPERF_SYMBOL_NEXT_ID and the slots after it. User space
 * retires symbols (deletes them from both maps) and knows how many it did,
 * so the maps' fill is the sum of [PYPERF_SYMBOL_INTERNED] less that. */
BPF_PERCPU_ARRAY(symbol_counter, u64, PYPERF_SYMBOL_COUNTERS);
/* Code objects seen before -> their symbol (PyPerfBpfShared.h). LRU: entries
 * of code that is no longer sampled age out. */
BPF_TABLE("lru_hash", struct pyperf_code_key, struct pyperf_code_entry, code_symbols,
          CODE_SYMBOLS_MAP_SIZE);
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
BPF_PROG_ARRAY(progs, 3);
/* [0]: the task_struct offsets in use, set before sampling starts. */
BPF_ARRAY(kernel_offsets, struct pyperf_kernel_offsets, 1);

#define PROG_FIND_THREAD_STATE 0
#define PROG_WALK_PYTHON_STACK 1
#define PROG_WALK_TASKS 2

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
static int (*read_user_str)(void *dst, u32 size,
                            const void *src) = (void *)PYPERF_FUNC_READ_USER_STR;
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

/* A field of the object at `base`: from `block` (the object's first `cap`
 * bytes, when `ok`) if it lies there, else read on its own. */
static __always_inline u64 block_ptr(u8 *block, u32 ok, u32 cap, u64 base, s64 off) {
  if (ok && off >= 0 && off <= cap - 8) return *(u64 *)(block + off);
  return read_ptr(base + off);
}
static __always_inline s32 block_s32(u8 *block, u32 ok, u32 cap, u64 base, s64 off) {
  if (ok && off >= 0 && off <= cap - 4) return *(s32 *)(block + off);
  return read_s32(base + off);
}
static __always_inline u8 block_u8(u8 *block, u32 ok, u32 cap, u64 base, s64 off) {
  if (ok && off >= 0 && off <= cap - 1) return block[off];
  u8 value = 0;
  read_user(&value, 1, (void *)(base + off));
  return value;
}
#define FRAME_PTR(state, frame, off) \
  block_ptr((state)->frame_block, (state)->frame_block_ok, FRAME_BLOCK, frame, off)
#define FRAME_S32(state, frame, off) \
  block_s32((state)->frame_block, (state)->frame_block_ok, FRAME_BLOCK, frame, off)
#define FRAME_U8(state, frame, off) \
  block_u8((state)->frame_block, (state)->frame_block_ok, FRAME_BLOCK, frame, off)
#define CODE_PTR(state, code, off) \
  block_ptr((state)->code_block, (state)->code_block_ok, CODE_BLOCK, code, off)
#define CODE_S32(state, code, off) \
  block_s32((state)->code_block, (state)->code_block_ok, CODE_BLOCK, code, off)

static __always_inline void count_code_lookups(struct pyperf_sample_state *state) {
  if (state->code_hits == 0 && state->code_misses == 0) return;
  int hits_slot = PYPERF_SYMBOL_CODE_HITS, misses_slot = PYPERF_SYMBOL_CODE_MISSES;
  u64 *hits = symbol_counter.lookup(&hits_slot);
  if (hits) *hits += state->code_hits;
  u64 *misses = symbol_counter.lookup(&misses_slot);
  if (misses) *misses += state->code_misses;
}

static __always_inline void submit(struct bpf_perf_event_data *ctx,
                                   struct pyperf_sample_state *state) {
  struct pyperf_event *event = &state->event;
  count_code_lookups(state);
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
  event->calls_mismatch = 0;
  event->task_error = PYPERF_TASK_ERROR_NONE;
  event->task_count = 0;
  event->task_frame = 0;
  event->frame_count = 0;
  event->user_stack_len = 0;
  event->user_stack_cut = 0;
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
  state->code_hits = 0;
  state->code_misses = 0;
  state->checked_file = 0;
  state->checked_file_print = 0;
  state->walk_cursor = 0;
  state->frame = 0;
  state->cframe = 0;
  state->running_task = 0;
  state->coro_frame = 0;
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
    u32 first = PAGE_SIZE - (start & (PAGE_SIZE - 1));
    if (first > PAGE_SIZE) first = PAGE_SIZE;
    int read = read_user(event->user_stack, first, (void *)start);
    if (read != 0 && (event->sp & (PAGE_SIZE - 1)) < RED_ZONE) {
      /* The red zone lies in the page below sp's, which the stack has not
       * reached (not present): copy from sp's own page on. */
      start = event->sp;
      first = PAGE_SIZE - (start & (PAGE_SIZE - 1));
      if (first > PAGE_SIZE) first = PAGE_SIZE;
      read = read_user(event->user_stack, first, (void *)start);
    }
    event->user_stack_start = start;
    if (read == 0) {
      u32 copied = first;
      for (int i = 0; i < USER_STACK_PAGES; i++) {
        if (copied + PAGE_SIZE > USER_STACK_PAGES * PAGE_SIZE) {
          event->user_stack_cut = 1; /* the stack goes on: the copy is full */
          break;
        }
        u32 off = copied & USER_STACK_MASK;
        if (read_user(&event->user_stack[off], PAGE_SIZE, (void *)(start + copied)) != 0) break;
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
