/* PyPerf kernel-header shim: included by libbcc's helpers.h, which defines its
 * own bpf_log2(); nothing else is needed. */
