// libbcc smoke test: a BPF program compiled without kernel headers, attached
// to the software CPU-clock perf event, sees samples of a busy child process.
#include <signal.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "bpf_loader.h"
#include "kernel_header_shim.h"
#include "support/test_support.h"

namespace {

using pyperf_test::ChildProcess;

TEST(KernelHeaderShim, InstallsHeadersAndRemovesThemAfterwards) {
  std::string dir;
  {
    auto shim = ebpf::KernelHeaderShim::Install();
    ASSERT_TRUE(shim.ok()) << shim.error();
    dir = (*shim)->directory();
    EXPECT_TRUE(pyperf_test::FileExists(dir + "/include/linux/kconfig.h"));
    EXPECT_TRUE(pyperf_test::FileExists(dir + "/include/linux/version.h"));
    ASSERT_NE(getenv("BCC_KERNEL_SOURCE"), nullptr);
    EXPECT_EQ(std::string(getenv("BCC_KERNEL_SOURCE")), dir);
  }
  EXPECT_FALSE(pyperf_test::FileExists(dir));
  EXPECT_EQ(getenv("BCC_KERNEL_SOURCE"), nullptr);
}

TEST(KernelHeaderShim, VersionCodeFromRelease) {
  EXPECT_EQ(ebpf::LinuxVersionCode("6.1.0-18-amd64"), (6u << 16) + (1u << 8) + 0u);
  EXPECT_EQ(ebpf::LinuxVersionCode("5.15.300"), (5u << 16) + (15u << 8) + 255u);
  EXPECT_EQ(ebpf::LinuxVersionCode("4.14"), (4u << 16) + (14u << 8));
}

TEST(BccSmoke, HeaderlessProgramSamplesABusyChild) {
  PYPERF_REQUIRE_BPF();
  ChildProcess busy({"sh", "-c", "while :; do :; done"});
  const std::string program = R"(
#include <uapi/linux/bpf_perf_event.h>
BPF_HASH(samples, u32, u64, 1024);
int on_sample(struct bpf_perf_event_data *ctx) {
  u32 pid = bpf_get_current_pid_tgid() >> 32;
  samples.increment(pid);
  return 0;
}
)";
  auto bpf = ebpf::CompileBpfProgram(program, {});
  ASSERT_TRUE(bpf.ok()) << bpf.error();
  auto st =
      (*bpf)->attach_perf_event(1 /*PERF_TYPE_SOFTWARE*/, 0 /*CPU_CLOCK*/, "on_sample", 0, 199);
  ASSERT_TRUE(st.ok()) << st.msg();
  uint64_t count = 0;
  auto table = (*bpf)->get_hash_table<uint32_t, uint64_t>("samples");
  bool got = pyperf_test::WaitFor(
      [&] { return table.get_value(static_cast<uint32_t>(busy.pid()), count).ok() && count >= 20; },
      std::chrono::seconds(5));
  (*bpf)->detach_perf_event(1, 0);
  EXPECT_TRUE(got) << "samples of the busy child: " << count;
}

TEST(BccSmoke, KnowsWhetherTheKernelHasProbeReadUser) {
  PYPERF_REQUIRE_BPF();
  struct utsname un;
  ASSERT_EQ(uname(&un), 0);
  // The helpers arrived in Linux 5.5; distribution backports only add them.
  if (ebpf::LinuxVersionCode(un.release) < ((5u << 16) + (5u << 8)))
    PYPERF_SKIP_OR_FAIL(std::string("kernel ") + un.release +
                        " may or may not have them (backports)");
  EXPECT_TRUE(ebpf::KernelHasProbeReadUser()) << un.release;
}

TEST(BccSmoke, CompileErrorIsAValueNotACrash) {
  PYPERF_REQUIRE_BPF();
  auto bpf = ebpf::CompileBpfProgram("int broken( { return 0; }", {});
  ASSERT_FALSE(bpf.ok());
  EXPECT_NE(bpf.error().find("BPF program"), std::string::npos);
}

}  // namespace
