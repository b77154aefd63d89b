/* PyPerf kernel-header shim: x86_64 user register frame. This is the
 * user-visible ABI layout (uapi asm/ptrace.h), the one perf hands to a
 * BPF_PROG_TYPE_PERF_EVENT program and the one PT_REGS_* macros read. */
#ifndef PYPERF_SHIM_ASM_PTRACE_H
#define PYPERF_SHIM_ASM_PTRACE_H
#include <linux/types.h>
struct pt_regs {
  unsigned long r15, r14, r13, r12, bp, bx;
  unsigned long r11, r10, r9, r8, ax, cx, dx, si, di;
  unsigned long orig_ax;
  unsigned long ip, cs, flags, sp, ss;
};
#endif
