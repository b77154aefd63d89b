// A small C++ library for PyPerf's native-frame end-to-end tests
// (test_e2e_native.cc builds it with g++ -shared at test time and
// native_ctypes_spin.py loads it with ctypes). The busy work is in a method of
// a namespaced class, so its symbol is mangled
// (_ZN10pyperf_e2e7Spinner4spinEi) and PyPerf must print it demangled:
// pyperf_e2e::Spinner::spin(int).
namespace pyperf_e2e {

class Spinner {
 public:
  long spin(int rounds);

 private:
  volatile unsigned long state_ = 1;  // unsigned: wraps without UB
};

// noinline: the method must stay a frame of its own under the entry point.
__attribute__((noinline)) long Spinner::spin(int rounds) {
  for (int i = 0; i < rounds; ++i) state_ = state_ * 6364136223846793005UL + 1442695040888963407UL;
  return static_cast<long>(state_);
}

}  // namespace pyperf_e2e

extern "C" __attribute__((visibility("default"))) long pyperf_e2e_spin(int rounds) {
  pyperf_e2e::Spinner spinner;
  return spinner.spin(rounds);
}
