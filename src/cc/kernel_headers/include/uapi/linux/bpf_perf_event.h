/* PyPerf kernel-header shim: context of a BPF program attached to a perf
 * event (ABI: uapi linux/bpf_perf_event.h on x86_64). */
#ifndef PYPERF_SHIM_BPF_PERF_EVENT_H
#define PYPERF_SHIM_BPF_PERF_EVENT_H
#include <asm/ptrace.h>
typedef struct pt_regs bpf_user_pt_regs_t;
struct bpf_perf_event_data {
  bpf_user_pt_regs_t regs;
  __u64 sample_period;
  __u64 addr;
};
#endif
