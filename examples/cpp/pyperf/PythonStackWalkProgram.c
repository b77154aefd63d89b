/* The Python half of PyPerf's BPF program: the tail-called stages that find
 * the sampled thread's PyThreadState and walk its Python frames. The loader
 * appends this file to PyPerfBPFProgram.c, whose maps, per-CPU state and
 * helpers it uses (PyPerfBpf.cc, PyPerfBpfProgramText).
 *
 *   find_thread_state  the thread's PyThreadState: cached per tid and
 *                      re-validated, else a walk of the interpreter's thread
 *                      list, THREADS_PER_PROG states a call, MAX_THREAD_WALKS
 *                      calls at most
 *   walk_python_stack  FRAMES_PER_PROG frames a call, tail-calling itself up
 *                      to MAX_FRAMES; a chain the process corrupted (a loop,
 *                      an unreadable frame) ends the walk with an error code,
 *                      its real frames each sent once */

int find_thread_state(struct bpf_perf_event_data *ctx) {
  struct pyperf_sample_state *state = this_cpu_state();
  if (!state) return 0;
  struct pyperf_event *event = &state->event;
  struct pyperf_offsets *o = state_offsets(state);
  if (!o) {
    event->error = PYPERF_ERROR_NO_OFFSETS;
    submit(ctx, state);
    return 0;
  }

  u64 fsbase = state->fsbase;
  u32 tid = event->tid;
  u64 tstate = 0;

  if (state->thread_walks == 0) {
    /* A cached thread state is trusted only while its thread_id still names
     * this thread: tids and PyThreadState memory are both reused. */
    u64 *cached = thread_states.lookup(&tid);
    if (cached && *cached && read_ptr(*cached + o->tstate_thread_id) == fsbase) {
      tstate = *cached;
      goto found;
    }
    u64 interp = read_ptr(state->proc.interp_addr);
    if (interp == 0) {
      event->error = PYPERF_ERROR_NO_INTERPRETER;
      submit(ctx, state);
      return 0;
    }
    state->walk_cursor = read_ptr(interp + o->interp_tstate_head);
  }

  u64 cursor = state->walk_cursor;
  for (int i = 0; i < THREADS_PER_PROG; i++) {
    if (cursor == 0) break;
    if (read_ptr(cursor + o->tstate_thread_id) == fsbase) {
      tstate = cursor;
      break;
    }
    cursor = read_ptr(cursor + o->tstate_next);
  }
  if (tstate) {
    thread_states.update(&tid, &tstate);
    goto found;
  }
  if (cursor == 0) {
    /* Not a Python thread (no PyThreadState): native and kernel frames only,
     * counted so that an empty Python stack is never silent. */
    event->no_thread_state = 1;
    submit(ctx, state);
    return 0;
  }
  state->walk_cursor = cursor;
  state->thread_walks++;
  if (state->thread_walks < MAX_THREAD_WALKS) progs.call(ctx, PROG_FIND_THREAD_STATE);
  event->error = PYPERF_ERROR_THREAD_STATE;
  submit(ctx, state);
  return 0;

found:
  if (o->frame_kind == PYPERF_FRAME_INTERPRETER && o->cframe_current_frame >= 0) {
    u64 cframe = read_ptr(tstate + o->tstate_frame);
    state->frame = cframe ? read_ptr(cframe + o->cframe_current_frame) : 0;
    state->cframe = cframe;
  } else {
    state->frame = read_ptr(tstate + o->tstate_frame);
  }
#if PYPERF_ASYNC_TASKS
  if (o->tstate_running_task > 0) {
    u64 task = read_ptr(tstate + o->tstate_running_task);
    u64 coro = task ? read_ptr(task + o->task_coro) : 0;
    if (coro) {
      state->running_task = task;
      state->coro_frame = coro + o->gen_iframe;
    }
  }
#endif
  continue_with(ctx, state, PROG_WALK_PYTHON_STACK);
  return 0;
}

/* The walk came back to the cycle mark: the frames recorded since the mark
 * was set are one turn of the loop, L of them. The recorded frames repeat
 * with period L from where the loop was entered; everything from the first
 * repeat on is dropped, so each frame is printed once. */
static __always_inline void drop_repeated_frames(struct pyperf_sample_state *state) {
  u32 period = state->recorded_since_mark;
  u32 n = state->event.frame_count;
  if (period == 0 || period >= n) return;
  for (u32 i = 0; i < MAX_FRAMES; i++) {
    if (i + period >= n) break;
    if (state->frame_addr[i & (MAX_FRAMES - 1)] ==
        state->frame_addr[(i + period) & (MAX_FRAMES - 1)]) {
      state->event.frame_count = i + period;
      break;
    }
  }
}

/* 3.11, 3.12: the walk left a call's run of frames; the next (rootward)
 * call's _PyCFrame is this one's previous, right after its current_frame. */
static __always_inline void next_cframe(struct pyperf_sample_state *state,
                                        struct pyperf_offsets *o) {
  if (state->cframe) state->cframe = read_ptr(state->cframe + o->cframe_current_frame + 8);
}

int walk_python_stack(struct bpf_perf_event_data *ctx) {
  struct pyperf_sample_state *state = this_cpu_state();
  if (!state) return 0;
  struct pyperf_event *event = &state->event;
  struct pyperf_offsets *o = state_offsets(state);
  if (!o) return 0;

  u64 frame = state->frame;
  for (int i = 0; i < FRAMES_PER_PROG; i++) {
    if (frame == 0) break;
    if (frame == state->cycle_mark) {
      drop_repeated_frames(state);
      event->error = PYPERF_ERROR_FRAME_CYCLE;
      submit(ctx, state);
      return 0;
    }
    u32 n = event->frame_count;
    if (n >= MAX_FRAMES) break;
    if (state->cycle_steps == state->cycle_power) {
      state->cycle_mark = frame;
      state->cycle_power <<= 1;
      state->cycle_steps = 0;
      state->recorded_since_mark = 0;
    }
    state->cycle_steps++;
    /* A frame whose memory cannot be read (a pointer the process corrupted,
     * or a page swapped out) ends the walk, marked: what lies beyond it is
     * unknown, and its own fields would be zeros, not a frame. */
    u64 back = 0;
    state->frame_block_ok = read_user(state->frame_block, FRAME_BLOCK, (void *)frame) == 0;
    if (state->frame_block_ok && o->frame_back >= 0 && o->frame_back <= FRAME_BLOCK - 8) {
      back = *(u64 *)(state->frame_block + o->frame_back);
    } else if (read_user(&back, sizeof(back), (void *)(frame + o->frame_back)) != 0) {
      event->error = PYPERF_ERROR_FRAME_UNREADABLE;
      submit(ctx, state);
      return 0;
    }
    u64 code = FRAME_PTR(state, frame, o->frame_code) & ~(u64)o->stackref_tag_bits;
    int skip = 0;
    if (o->frame_owner >= 0) {
      u8 owner = FRAME_U8(state, frame, o->frame_owner);
      /* Shim frames (calls from C; 3.14 interpreter entries) carry no Python
       * code. Each is a local of an eval-loop call's C frame, linked behind
       * the first frame that call ran: the frame recorded last. */
      if (o->frame_owner_shim >= 0 && owner >= o->frame_owner_shim) {
        skip = 1;
        u64 distance = frame - event->sp;
        /* 3.14 also has C-stack shims (owner 4) that begin no eval loop. A
         * shim off this stack (3.15's tstate->base_frame, the root of every
         * thread's chain, right after its first call's own shim) does not
         * take the place of an anchor. */
        if (owner == o->frame_owner_shim) {
          if (n > 0) {
            u32 *entry = &event->entries[(n - 1) & (MAX_FRAMES - 1)];
            if (frame >= event->sp && distance < 0xfffff000)
              *entry = (u32)distance + PYPERF_ENTRY_ANCHOR_BASE;
            else if (*entry == PYPERF_ENTRY_NONE)
              *entry = PYPERF_ENTRY_UNANCHORED;
          }
          next_cframe(state, o); /* 3.12: the next call's */
        }
      }
    }
    state->code_block_ok = 0;
    if (!skip && code) {
      state->code_block_ok = read_user(state->code_block, CODE_BLOCK, (void *)code) == 0;
      if (state->proc.code_type && CODE_PTR(state, code, o->object_type) != state->proc.code_type)
        skip = 1;
    }
    if (!skip) {
      struct pyperf_frame *f = &event->frames[n & (MAX_FRAMES - 1)];
      if (code == 0) {
        f->symbol_id = PYPERF_SYMBOL_MISSING;
        f->lasti = -1;
        f->code = 0;
      } else {
        f->symbol_id = code_symbol(state, o, code, frame);
        f->code = code;
        if (o->frame_kind == PYPERF_FRAME_OBJECT) {
          f->lasti = FRAME_S32(state, frame, o->frame_lasti);
        } else {
          u64 instr = FRAME_PTR(state, frame, o->frame_prev_instr);
          f->lasti = instr ? (s32)(instr - (code + o->code_code_adaptive)) : -1;
        }
      }
      /* The leaf-most frame of a call's run must be its _PyCFrame's
       * current_frame (3.11, 3.12). */
      if (state->cframe && n > 0 &&
          event->entries[(n - 1) & (MAX_FRAMES - 1)] != PYPERF_ENTRY_NONE &&
          read_ptr(state->cframe + o->cframe_current_frame) != frame)
        event->calls_mismatch = 1;
      int is_entry = o->frame_is_entry >= 0 && FRAME_U8(state, frame, o->frame_is_entry);
      event->entries[n & (MAX_FRAMES - 1)] =
          is_entry ? PYPERF_ENTRY_UNANCHORED : PYPERF_ENTRY_NONE;
      if (is_entry) next_cframe(state, o); /* 3.11: the next call's */
      state->frame_addr[n & (MAX_FRAMES - 1)] = frame;
#if PYPERF_ASYNC_TASKS
      if (frame == state->coro_frame) event->task_frame = n + 1;
#endif
      state->recorded_since_mark++;
      event->frame_count = n + 1;
    }
    frame = back;
  }
  state->frame = frame;
  if (frame != 0) {
    if (event->frame_count < MAX_FRAMES) {
      progs.call(ctx, PROG_WALK_PYTHON_STACK);
      /* Out of tail calls: fall through and report a truncated stack. */
    }
    event->truncated = 1;
  }
#if PYPERF_ASYNC_TASKS
  if (state->running_task) progs.call(ctx, PROG_WALK_TASKS);
#endif
  submit(ctx, state);
  return 0;
}
