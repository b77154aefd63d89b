// libpyperf_fixture_c.so: an exported entry point that reaches the capture
// leaf through a `static` function. Built in several variants (full,
// stripped, with a .gnu_debuglink file, with a build-id debug file, with
// .gnu_debugdata) by make_variants.sh; all share this code and layout.
//
// Compiled with -fno-toplevel-reorder so fixture_static_step sits right after
// the small exported pyperf_fixture_exported_before: a symbolizer that takes
// "the nearest exported symbol before the address" names it wrongly.
#include <stdint.h>

void pyperf_capture_here(void);

volatile int pyperf_fixture_sink;

int pyperf_fixture_exported_before(int x) { return x * 3 + 1; }

__attribute__((noinline)) static int fixture_static_step(int depth) {
  // Work before and after the call keeps the frame (no tail call).
  volatile int local = depth;
  if (local >= 0) pyperf_capture_here();
  pyperf_fixture_sink = local;
  return local + 1;
}

__attribute__((noinline)) int pyperf_fixture_middle(int depth) {
  int r = fixture_static_step(depth);
  pyperf_fixture_sink = r;
  return r + 1;
}
