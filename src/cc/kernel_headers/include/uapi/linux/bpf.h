/* PyPerf kernel-header shim: libbcc already force-includes its own copy of the
 * BPF UAPI (/virtual/include/bcc/bpf.h); this only satisfies helpers.h's
 * include of the kernel's path. */
#include <linux/types.h>
