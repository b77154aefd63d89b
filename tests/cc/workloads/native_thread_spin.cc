// A small C++ library for PyPerf's no-thread-state tests
// (test_e2e_no_thread_state.cc builds it with g++ -shared at test time and
// native_thread_spin.py loads it with ctypes). pyperf_e2e_start_native_thread
// starts a thread that never enters Python, so the interpreter holds no
// PyThreadState for it, and that thread spins in C until the process is
// killed. pyperf_e2e_start_callback_thread starts a thread that keeps
// entering Python through a ctypes callback (which creates a PyThreadState
// and deletes it on return) and spinning in C between the calls, as the
// worker threads of C libraries that call back into Python do.
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace {

std::atomic<long> g_native_tid{0};

__attribute__((noinline)) void SpinForever() {
  volatile unsigned long state = 1;  // unsigned: wraps without UB
  while (true) state = state * 6364136223846793005UL + 1442695040888963407UL;
}

// Spins for about `ms` milliseconds of the thread's CPU time, outside Python.
__attribute__((noinline)) void SpinBetweenCallbacks(long ms) {
  timespec start{}, now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
  volatile unsigned long state = 1;
  do {
    for (int i = 0; i < 10000; ++i) state = state * 6364136223846793005UL + 1442695040888963407UL;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  } while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < ms);
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

// Starts a thread that calls `enter_python` (a ctypes callback), then spins
// about 5 ms in C, forever; returns its tid once it runs.
extern "C" __attribute__((visibility("default"))) long pyperf_e2e_start_callback_thread(
    void (*enter_python)()) {
  static std::atomic<long> tid{0};
  std::thread([enter_python] {
    tid = syscall(SYS_gettid);
    while (true) {
      enter_python();
      SpinBetweenCallbacks(5);
    }
  }).detach();
  while (tid == 0) std::this_thread::yield();
  return tid;
}
