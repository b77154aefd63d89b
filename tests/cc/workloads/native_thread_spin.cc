// A small C++ library for PyPerf's no-thread-state counter test
// (test_e2e_kernel_offsets.cc builds it with g++ -shared at test time and
// native_thread_spin.py loads it with ctypes): it starts a thread that never
// enters Python, so the interpreter holds no PyThreadState for it, and that
// thread spins in C until the process is killed.
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace {

std::atomic<long> g_native_tid{0};

__attribute__((noinline)) void SpinForever() {
  volatile unsigned long state = 1;  // unsigned: wraps without UB
  while (true) state = state * 6364136223846793005UL + 1442695040888963407UL;
}

}  // namespace

// Starts the spinning thread; returns its tid once it runs.
extern "C" __attribute__((visibility("default"))) long pyperf_e2e_start_native_thread() {
  std::thread([] {
    g_native_tid = syscall(SYS_gettid);
    SpinForever();
  }).detach();
  while (g_native_tid == 0) std::this_thread::yield();
  return g_native_tid;
}
