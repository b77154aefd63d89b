// native_fixture: main -> pyperf_fixture::Worker::spin (C++ library) ->
// pyperf_fixture_middle -> static fixture_static_step (C library) ->
// pyperf_capture_here (captures, then parks).
//
//   native_fixture [--depth N] [--exec-on-trigger NEW_CAPTURE_DIR NEW_LD_LIBRARY_PATH]
//
// With --exec-on-trigger, once $PYPERF_CAPTURE_DIR/trigger exists the process
// execs itself (same pid) with PYPERF_CAPTURE_DIR and LD_LIBRARY_PATH set to
// the new values, and captures again there.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>

extern "C" int pyperf_fixture_run(int depth);
extern "C" void pyperf_capture_set_idle_hook(void (*hook)(void));

namespace {
std::string g_trigger, g_new_dir, g_new_ld_path, g_depth = "0";

void ExecWhenTriggered() {
  if (access(g_trigger.c_str(), F_OK) != 0) return;
  setenv("PYPERF_CAPTURE_DIR", g_new_dir.c_str(), 1);
  setenv("LD_LIBRARY_PATH", g_new_ld_path.c_str(), 1);
  const char* argv[] = {"native_fixture", "--depth", g_depth.c_str(), nullptr};
  execv("/proc/self/exe", const_cast<char**>(argv));
  perror("execv");
  _exit(111);
}
}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--depth") && i + 1 < argc) {
      g_depth = argv[++i];
    } else if (!strcmp(argv[i], "--exec-on-trigger") && i + 2 < argc) {
      g_new_dir = argv[++i];
      g_new_ld_path = argv[++i];
    } else {
      fprintf(stderr, "usage: %s [--depth N] [--exec-on-trigger DIR LD_LIBRARY_PATH]\n", argv[0]);
      return 2;
    }
  }
  if (!g_new_dir.empty()) {
    const char* dir = getenv("PYPERF_CAPTURE_DIR");
    g_trigger = std::string(dir ? dir : ".") + "/trigger";
    pyperf_capture_set_idle_hook(ExecWhenTriggered);
  }
  int r = pyperf_fixture_run(atoi(g_depth.c_str()));
  return r == 12345 ? 1 : 0;  // never reached: the capture parks the thread
}
