// libpyperf_capture.so: records a native snapshot of the calling thread the way
// PyPerf's BPF program does (ip, sp, bp and the stack bytes from sp up), then
// parks the thread so its frames stay live for process_vm_readv.
//
// pyperf_capture_here() writes into $PYPERF_CAPTURE_DIR:
//   regs       "pid=<n> ip=0x.. sp=0x.. bp=0x.. stack_len=<n>"
//   stack.bin  the stack copy, starting at sp
//   maps       a copy of /proc/self/maps at capture time
//   ready      written last: the snapshot is complete
// It never returns; every 10 ms it calls the hook set with
// pyperf_capture_set_idle_hook (used to exec on request). Usable from C, C++
// and Python (ctypes).
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096

static void (*idle_hook)(void);
static uint8_t stack_copy[64 * 1024];

void pyperf_capture_set_idle_hook(void (*hook)(void)) { idle_hook = hook; }

static void write_file(const char* dir, const char* name, const void* data, size_t len) {
  char path[4096], tmp[4096];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  const uint8_t* p = (const uint8_t*)data;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n <= 0) break;
    p += n;
    len -= (size_t)n;
  }
  close(fd);
  rename(tmp, path);  // readers never see a partial file
}

static void copy_file(const char* from, const char* dir, const char* name) {
  static char buf[1 << 20];
  int fd = open(from, O_RDONLY);
  if (fd < 0) return;
  size_t len = 0;
  ssize_t n;
  while (len < sizeof(buf) && (n = read(fd, buf + len, sizeof(buf) - len)) > 0) len += (size_t)n;
  close(fd);
  write_file(dir, name, buf, len);
}

// Copies up to `want` bytes from sp, page by page, stopping at the first page
// that cannot be read, like the BPF side.
static size_t copy_stack(uint64_t sp, size_t want) {
  if (want > sizeof(stack_copy)) want = sizeof(stack_copy);
  size_t done = 0;
  while (done < want) {
    uint64_t addr = sp + done;
    size_t chunk = PAGE - (addr % PAGE);
    if (chunk > want - done) chunk = want - done;
    struct iovec local = {stack_copy + done, chunk};
    struct iovec remote = {(void*)addr, chunk};
    if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)chunk) break;
    done += chunk;
  }
  return done;
}

__attribute__((noinline)) void pyperf_capture_here(void) {
  uint64_t ip, sp, bp;
  // The registers at this very instruction, as a perf sample would see them.
  __asm__ volatile(
      "leaq 0(%%rip), %0\n\t"
      "movq %%rsp, %1\n\t"
      "movq %%rbp, %2\n\t"
      : "=r"(ip), "=r"(sp), "=r"(bp));
  size_t want = 8192;
  const char* bytes = getenv("PYPERF_CAPTURE_STACK_BYTES");
  if (bytes) want = (size_t)strtoull(bytes, NULL, 0);
  size_t len = copy_stack(sp, want);

  const char* dir = getenv("PYPERF_CAPTURE_DIR");
  if (dir && *dir) {
    char regs[256];
    int n = snprintf(regs, sizeof(regs), "pid=%d ip=0x%llx sp=0x%llx bp=0x%llx stack_len=%zu\n",
                     (int)getpid(), (unsigned long long)ip, (unsigned long long)sp,
                     (unsigned long long)bp, len);
    write_file(dir, "regs", regs, (size_t)n);
    write_file(dir, "stack.bin", stack_copy, len);
    copy_file("/proc/self/maps", dir, "maps");
    write_file(dir, "ready", "1\n", 2);
  }
  for (;;) {
    if (idle_hook) idle_hook();
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}
