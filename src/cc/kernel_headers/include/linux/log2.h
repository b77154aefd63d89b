/* PyPerf kernel-header shim: included by libbcc's helpers.h, whose
 * BPF_STACK_TRACE sizes its map with roundup_pow_of_two(); a constant
 * expression here, as the kernel's is for constants. */
#ifndef PYPERF_SHIM_LOG2_H
#define PYPERF_SHIM_LOG2_H
#define roundup_pow_of_two(n) \
  ((n) <= 1 ? 1ULL : 1ULL << (64 - __builtin_clzll((unsigned long long)(n) - 1)))
#endif
