/* PyPerf kernel-header shim: stands in for the kernel's linux/kconfig.h, which
 * libbcc force-includes first. Only the configuration libbcc's helpers check,
 * and the compiler attribute kernel headers would otherwise provide. */
#ifndef PYPERF_SHIM_KCONFIG_H
#define PYPERF_SHIM_KCONFIG_H
#define CONFIG_BPF_SYSCALL 1
#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
#endif
