/* The asyncio half of PyPerf's BPF program (--async-tasks, compiled with
 * PYPERF_ASYNC_TASKS=1): the running task of the sampled thread and the
 * tasks awaiting it, read at sample time. The loader appends this file after
 * PythonStackWalkProgram.c, whose walk tail-calls it once the Python frames
 * are recorded, and whose maps, per-CPU state and helpers it uses.
 *
 *   walk_tasks  from the thread's running task (found by find_thread_state),
 *               PYPERF_MAX_TASKS tasks at most: each one's name (its str's
 *               bytes, or the int of a default "Task-<int>" name) and its
 *               coroutine's symbol id, then the task it is awaited by (the
 *               first task of a set of them); then submits the event.
 *
 * An awaiting task is checked to be a task (TaskObj.task_is_task) before its
 * fields are used: a task freed and reused under the sample ends the chain
 * with PYPERF_TASK_ERROR_UNREADABLE instead of naming garbage. */
#if PYPERF_ASYNC_TASKS

/* Py_TPFLAGS_LONG_SUBCLASS and Py_TPFLAGS_UNICODE_SUBCLASS (every CPython 3). */
#define TPFLAGS_LONG_SUBCLASS (1ull << 24)
#define TPFLAGS_UNICODE_SUBCLASS (1ull << 28)
/* A PyLong's lv_tag: the digit count above the three sign bits. */
#define LONG_DIGIT_SHIFT 30
/* Entries of an awaited-by set looked at: a set of fewer than 5 tasks keeps
 * them in its 8 inline entries, and a task is rarely awaited by more. */
#define SET_ENTRIES_SCANNED 8

struct set_entry {
  u64 key;
  s64 hash;
};

/* The name of a task: a str copied as the symbols' strings are, or the int
 * of a default name. */
static __always_inline void read_task_name(struct pyperf_offsets *o, u64 name,
                                           struct pyperf_task *t) {
  t->name_kind = PYPERF_TASK_NAME_NONE;
  t->name_text.encoding = PYPERF_TEXT_NONE;
  t->name_text.size = 0;
  if (name == 0) return;
  u64 type = read_ptr(name + o->object_type);
  u64 flags = type ? read_ptr(type + o->type_flags) : 0;
  if (flags & TPFLAGS_UNICODE_SUBCLASS) {
    read_py_text(o, name, t->name, PYPERF_TASK_NAME_LEN, &t->name_text, 0);
    if (t->name_text.encoding != PYPERF_TEXT_UNREADABLE) t->name_kind = PYPERF_TASK_NAME_TEXT;
  } else if (flags & TPFLAGS_LONG_SUBCLASS) {
    u64 tag = read_ptr(name + o->long_tag);
    u64 digits = tag >> 3;
    u32 d[2] = {};
    /* Non-negative, two digits at most (below 2^60): a default name's count. */
    if ((tag & 3) != 2 && digits <= 2 &&
        (digits == 0 || read_user(d, digits * 4, (void *)(name + o->long_digits)) == 0)) {
      t->number = (u64)d[0] | ((u64)d[1] << LONG_DIGIT_SHIFT);
      t->name_kind = PYPERF_TASK_NAME_NUMBER;
    }
  }
}

/* The first task of an awaited-by set (0 if none was found). */
static __always_inline u64 first_set_task(struct pyperf_offsets *o, u64 set) {
  u64 table = read_ptr(set + o->set_table);
  u64 mask = read_ptr(set + o->set_mask);
  if (table == 0) return 0;
  struct set_entry entries[SET_ENTRIES_SCANNED] = {};
  u64 n = mask + 1 < SET_ENTRIES_SCANNED ? mask + 1 : SET_ENTRIES_SCANNED;
  if (read_user(entries, sizeof(entries), (void *)table) != 0) return 0;
#pragma unroll
  for (u32 i = 0; i < SET_ENTRIES_SCANNED; i++) {
    /* Empty entries have no key, deleted ones the hash -1. */
    if (i < n && entries[i].key != 0 && entries[i].hash != -1) return entries[i].key;
  }
  return 0;
}

/* The symbol id of a coroutine's code, named like a frame of it. */
static __always_inline s32 coroutine_symbol(struct pyperf_sample_state *state,
                                            struct pyperf_offsets *o, u64 coro) {
  u64 frame = coro + o->gen_iframe;
  state->frame_block_ok = read_user(state->frame_block, FRAME_BLOCK, (void *)frame) == 0;
  u64 code = FRAME_PTR(state, frame, o->frame_code) & ~(u64)o->stackref_tag_bits;
  if (code == 0) return PYPERF_SYMBOL_MISSING;
  state->code_block_ok = read_user(state->code_block, CODE_BLOCK, (void *)code) == 0;
  if (state->proc.code_type && CODE_PTR(state, code, o->object_type) != state->proc.code_type)
    return PYPERF_SYMBOL_MISSING;
  return code_symbol(state, o, code, frame);
}

int walk_tasks(struct bpf_perf_event_data *ctx) {
  struct pyperf_sample_state *state = this_cpu_state();
  if (!state) return 0;
  struct pyperf_event *event = &state->event;
  struct pyperf_offsets *o = state_offsets(state);
  if (!o) return 0;

  u64 task = state->running_task;
  u32 count = 0;
  for (u32 i = 0; i < PYPERF_MAX_TASKS; i++) {
    if (task == 0) break;
    /* The task's fields in one read where they lie in its first TASK_BLOCK
     * bytes (3.14, 3.15: all of them), one read each otherwise. */
    u32 ok = read_user(state->task_block, TASK_BLOCK, (void *)task) == 0;
    if (block_u8(state->task_block, ok, TASK_BLOCK, task, o->task_is_task) != 1) {
      event->task_error = PYPERF_TASK_ERROR_UNREADABLE;
      task = 0;
      break;
    }
    struct pyperf_task *t = &event->tasks[i & (PYPERF_MAX_TASKS - 1)];
    read_task_name(o, block_ptr(state->task_block, ok, TASK_BLOCK, task, o->task_name), t);
    u64 coro = block_ptr(state->task_block, ok, TASK_BLOCK, task, o->task_coro);
    /* The running task's coroutine is the frame the walk named already. */
    if (i == 0 && event->task_frame > 0)
      t->coro_symbol = event->frames[(event->task_frame - 1) & (MAX_FRAMES - 1)].symbol_id;
    else
      t->coro_symbol = coro ? coroutine_symbol(state, o, coro) : PYPERF_SYMBOL_MISSING;
    count = i + 1;
    u64 awaited_by = block_ptr(state->task_block, ok, TASK_BLOCK, task, o->task_awaited_by);
    if (awaited_by && block_u8(state->task_block, ok, TASK_BLOCK, task, o->task_awaited_by_is_set)) {
      awaited_by = first_set_task(o, awaited_by);
      if (awaited_by == 0) event->task_error = PYPERF_TASK_ERROR_UNREADABLE;
    }
    task = awaited_by;
  }
  event->task_count = count;
  if (task != 0 && count == PYPERF_MAX_TASKS) event->task_error = PYPERF_TASK_ERROR_TOO_DEEP;
  submit(ctx, state);
  return 0;
}
#endif /* PYPERF_ASYNC_TASKS */
