/* The BPF side of PyPerf's start-up check of its task_struct offsets
 * (KernelOffsetCheck.h). The loader appends it to PyPerfBPFProgram.c, whose
 * probe-read helpers it uses, and compiles the two as one program. */

/* What to read ([0]) and what was read, per candidate. */
BPF_ARRAY(offset_check_input, struct pyperf_offset_check_input, 1);
BPF_ARRAY(offset_check_results, struct pyperf_offset_check_result, PYPERF_CHECK_CANDIDATES);

/* The start-up check, attached to a perf event of PyPerf's own thread only:
 * for each candidate offset pair, the fsbase read at task + fs_offset (user
 * space compares it with arch_prctl(ARCH_GET_FS)) and, on samples that hit
 * user mode, the user registers saved at each candidate position above
 * task->stack, compared with the ones perf reports. Read with the same
 * helpers on_sample uses. */
int check_kernel_offsets(struct bpf_perf_event_data *ctx) {
  int zero = 0;
  struct pyperf_offset_check_input *in = offset_check_input.lookup(&zero);
  if (!in) return 0;
  if ((u32)bpf_get_current_pid_tgid() != in->tid) return 0;
  u64 task = bpf_get_current_task();
  int user = (ctx->regs.cs & 3) == 3;
  u64 ip = ctx->regs.ip;
  u64 sp = ctx->regs.sp;
#pragma unroll
  for (u32 c = 0; c < PYPERF_CHECK_CANDIDATES; c++) {
    if (c >= in->candidate_count) break;
    u32 index = c;
    struct pyperf_offset_check_result *r = offset_check_results.lookup(&index);
    if (!r) break;
    u64 fsbase = 0;
    read_kernel(&fsbase, sizeof(fsbase), (void *)(task + in->candidates[c].fs_offset));
    r->samples++;
    if (fsbase == in->fsbase) r->fsbase_matches++;
    r->fsbase = fsbase;
    if (!user) continue;
    u64 stack = 0;
    read_kernel(&stack, sizeof(stack), (void *)(task + in->candidates[c].stack_offset));
    r->user_samples++;
    r->stack = stack;
    r->user_ip = ip;
    r->user_sp = sp;
#pragma unroll
    for (int l = 0; l < PYPERF_CHECK_REGS_LAYOUTS; l++) {
      struct pt_regs *regs = (struct pt_regs *)(stack + in->regs_offsets[l]);
      u64 saved_ip = 0, saved_sp = 0;
      read_kernel(&saved_ip, sizeof(saved_ip), &regs->ip);
      read_kernel(&saved_sp, sizeof(saved_sp), &regs->sp);
      if (l == 0) {
        r->saved_ip = saved_ip;
        r->saved_sp = saved_sp;
      }
      if (stack != 0 && saved_ip == ip && saved_sp == sp) r->regs_matches[l]++;
    }
  }
  return 0;
}
