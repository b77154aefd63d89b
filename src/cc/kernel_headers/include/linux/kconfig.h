/* PyPerf kernel-header shim: stands in for the kernel's linux/kconfig.h, which
 * libbcc force-includes. Only the configuration libbcc's helpers check. */
#ifndef PYPERF_SHIM_KCONFIG_H
#define PYPERF_SHIM_KCONFIG_H
#define CONFIG_BPF_SYSCALL 1
#endif
