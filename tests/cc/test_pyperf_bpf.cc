// PyPerf's BPF program compiles headerlessly and passes the kernel verifier
// for the parameter range the command line allows.
#include "PyPerfBpf.h"
#include "btf_offsets.h"
#include "support/test_support.h"

namespace {

class PyPerfBpfLoad : public ::testing::TestWithParam<uint32_t> {};

TEST_P(PyPerfBpfLoad, ProgramLoadsWithUserStackPages) {
  PYPERF_REQUIRE_BPF();
  auto offsets = pyperf::ReadKernelOffsets();
  ASSERT_TRUE(offsets.ok()) << offsets.error();
  pyperf::BpfConfig config;
  config.fs_offset = offsets->fs_base;
  config.stack_offset = offsets->stack;
  config.user_stack_pages = GetParam();
  config.sample_period_ns = 1000000;
  auto bpf = pyperf::PyPerfBpf::Load(config);
  ASSERT_TRUE(bpf.ok()) << bpf.error();
  EXPECT_EQ((*bpf)->CountSymbols(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Pages, PyPerfBpfLoad, ::testing::Values(0u, 1u, 2u, 4u, 15u));

// Kernels before 5.5 have only bpf_probe_read{,_str}; the program must load
// with them too (x86_64 kernels still accept them).
TEST(PyPerfBpfLoadLegacy, ProgramLoadsWithBpfProbeRead) {
  PYPERF_REQUIRE_BPF();
  auto offsets = pyperf::ReadKernelOffsets();
  ASSERT_TRUE(offsets.ok()) << offsets.error();
  pyperf::BpfConfig config;
  config.fs_offset = offsets->fs_base;
  config.stack_offset = offsets->stack;
  config.sample_period_ns = 1000000;
  config.probe_read_user = false;
  auto bpf = pyperf::PyPerfBpf::Load(config);
  ASSERT_TRUE(bpf.ok()) << bpf.error();
}

}  // namespace
