/* PyPerf kernel-header shim: the fixed-width kernel types that libbcc's
 * built-in bpf.h and helpers.h use. No kernel layout is described here. */
#ifndef PYPERF_SHIM_LINUX_TYPES_H
#define PYPERF_SHIM_LINUX_TYPES_H
typedef signed char __s8;
typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __s8 s8;
typedef __u8 u8;
typedef __s16 s16;
typedef __u16 u16;
typedef __s32 s32;
typedef __u32 u32;
typedef __s64 s64;
typedef __u64 u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u64 __be64;
typedef __u16 __le16;
typedef __u32 __le32;
typedef __u64 __le64;
typedef __u16 __sum16;
typedef __u32 __wsum;
typedef _Bool bool;
enum { false = 0, true = 1 };
typedef unsigned long size_t;
typedef long ssize_t;
typedef unsigned long uintptr_t;
typedef int pid_t;
#ifndef NULL
#define NULL ((void *)0)
#endif
#define __aligned_u64 __u64 __attribute__((aligned(8)))
#ifndef offsetof
#define offsetof(type, member) __builtin_offsetof(type, member)
#endif
#endif
