// PyPerf's BPF program compiles headerlessly and passes the kernel verifier
// for the parameter range the command line allows, start-up check included.
#include "KernelOffsetCheck.h"
#include "PyPerfBpf.h"
#include "PyPerfProfiler.h"
#include "btf_offsets.h"
#include "support/test_support.h"

namespace {

class PyPerfBpfLoad : public ::testing::TestWithParam<uint32_t> {};

TEST_P(PyPerfBpfLoad, ProgramLoadsWithUserStackPages) {
  PYPERF_REQUIRE_BPF();
  ebpf::pyperf::BpfConfig config = ebpf::pyperf::BpfConfigFor(ebpf::pyperf::Options{});
  config.user_stack_pages = GetParam();
  config.sample_period_ns = 1000000;
  auto bpf = ebpf::pyperf::PyPerfBpf::Load(config);
  ASSERT_TRUE(bpf.ok()) << bpf.error();
  // Nothing is interned yet: ids are (CPU << 24 | per-CPU count), so a first
  // symbol on any CPU would be found under CPU << 24.
  for (int32_t cpu = 0; cpu < 128; ++cpu) {
    EXPECT_FALSE((*bpf)->LookupSymbol(cpu << 24).has_value()) << "cpu " << cpu;
  }
  // The check program is loaded (and verified) when the check runs.
  auto offsets = ebpf::ReadKernelOffsets();
  ASSERT_TRUE(offsets.ok()) << offsets.error();
  auto run = ebpf::pyperf::CheckKernelOffsets(**bpf, {*offsets});
  ASSERT_TRUE(run.ok()) << run.error();
  EXPECT_EQ(run->verdicts.at(0).outcome, ebpf::pyperf::OffsetVerdict::Outcome::kPass)
      << run->verdicts.at(0).why;
}

INSTANTIATE_TEST_SUITE_P(Pages, PyPerfBpfLoad, ::testing::Values(0u, 1u, 2u, 4u, 15u));

// Kernels before 5.5 have only bpf_probe_read{,_str}; the program must load
// with them too (x86_64 kernels still accept them).
TEST(PyPerfBpfLoadLegacy, ProgramLoadsWithBpfProbeRead) {
  PYPERF_REQUIRE_BPF();
  ebpf::pyperf::BpfConfig config = ebpf::pyperf::BpfConfigFor(ebpf::pyperf::Options{});
  config.sample_period_ns = 1000000;
  config.probe_read_user = false;
  auto bpf = ebpf::pyperf::PyPerfBpf::Load(config);
  ASSERT_TRUE(bpf.ok()) << bpf.error();
}

}  // namespace
