// libpyperf_fixture_cxx.so: a C++ frame with a mangled name,
// pyperf_fixture::Worker::spin(int), recursing `depth` times before calling
// into the C library.
extern "C" int pyperf_fixture_middle(int depth);

namespace pyperf_fixture {

class Worker {
 public:
  int spin(int depth);
  int calls = 0;
};

__attribute__((noinline)) int Worker::spin(int depth) {
  ++calls;
  int r = depth > 0 ? spin(depth - 1) : pyperf_fixture_middle(depth);
  calls += r;  // after the call: no tail call
  return r + calls;
}

}  // namespace pyperf_fixture

extern "C" int pyperf_fixture_run(int depth) {
  pyperf_fixture::Worker worker;
  return worker.spin(depth);
}
