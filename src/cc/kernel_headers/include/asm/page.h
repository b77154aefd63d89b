/* PyPerf kernel-header shim: page size for perf-buffer sizing (x86_64). */
#ifndef PYPERF_SHIM_ASM_PAGE_H
#define PYPERF_SHIM_ASM_PAGE_H
#define PAGE_SIZE 4096UL
#endif
