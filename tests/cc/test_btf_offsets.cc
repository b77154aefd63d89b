// BTF offset reader: against the running kernel's BTF (values checked by a BPF
// program against what the kernel really uses) and against bad BTF files.
#include <asm/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "bpf_loader.h"
#include "btf_offsets.h"
#include "support/test_support.h"

namespace {

using ebpf::BtfMemberOffset;
using ebpf::ReadKernelOffsets;
using pyperf_test::TempDir;

TEST(BtfOffsets, ReadsTaskStructOffsetsFromKernelBtf) {
  PYPERF_REQUIRE_BPF();
  auto offsets = ReadKernelOffsets();
  ASSERT_TRUE(offsets.ok()) << offsets.error();
  EXPECT_GT(offsets->fs_base, 0u);
  EXPECT_GT(offsets->stack, 0u);
  EXPECT_NE(offsets->fs_base, offsets->stack);
}

TEST(BtfOffsets, MissingFileNamesTheFileAndTheOverrideFlags) {
  auto offsets = ReadKernelOffsets("/nonexistent/vmlinux");
  ASSERT_FALSE(offsets.ok());
  EXPECT_NE(offsets.error().find("/nonexistent/vmlinux"), std::string::npos);
  EXPECT_NE(offsets.error().find("--fs-offset"), std::string::npos);
  EXPECT_NE(offsets.error().find("--stack-offset"), std::string::npos);
}

TEST(BtfOffsets, EmptyFileIsAnError) {
  TempDir dir;
  std::ofstream(dir.File("empty")).close();
  auto offsets = ReadKernelOffsets(dir.File("empty"));
  ASSERT_FALSE(offsets.ok());
  EXPECT_NE(offsets.error().find("empty"), std::string::npos);
}

TEST(BtfOffsets, CorruptFileIsAnError) {
  TempDir dir;
  {
    std::ofstream out(dir.File("corrupt"), std::ios::binary);
    // A BTF magic followed by garbage.
    const unsigned char bytes[] = {0x9f, 0xeb, 0x01, 0x00, 0x18, 0x00, 0x00, 0x00,
                                   0xff, 0xff, 0xff, 0x7f, 0x10, 0x00, 0x00, 0x00};
    out.write(reinterpret_cast<const char*>(bytes), sizeof(bytes));
    for (int i = 0; i < 100; ++i) out << "not btf at all";
  }
  auto offsets = ReadKernelOffsets(dir.File("corrupt"));
  ASSERT_FALSE(offsets.ok());
  EXPECT_NE(offsets.error().find("corrupt"), std::string::npos);
}

TEST(BtfOffsets, UnknownStructAndMemberAreErrors) {
  PYPERF_REQUIRE_BPF();
  auto no_struct = BtfMemberOffset(ebpf::kDefaultVmlinuxBtf, "no_such_struct_xyz", "a");
  EXPECT_FALSE(no_struct.ok());
  auto no_member = BtfMemberOffset(ebpf::kDefaultVmlinuxBtf, "task_struct", "thread.nope");
  EXPECT_FALSE(no_member.ok());
}

// The kernel's own view: a BPF program on the CPU-clock event reads
// task->thread.fsbase at our offset while this test's busy thread runs, and
// the value must equal what arch_prctl(ARCH_GET_FS) reports for that thread.
// task->stack is checked the same way: the user registers saved at the top of
// the kernel stack must hold the same user sp that perf reports.
TEST(BtfOffsets, OffsetsMatchWhatTheKernelUses) {
  PYPERF_REQUIRE_BPF();
  auto offsets = ReadKernelOffsets();
  ASSERT_TRUE(offsets.ok()) << offsets.error();
  const std::string program = R"(
#include <uapi/linux/bpf_perf_event.h>
BPF_HASH(fsbase_by_tid, u32, u64, 64);
BPF_ARRAY(stack_check, u64, 2);  /* [0] user samples, [1] of them with matching saved sp */
int on_sample(struct bpf_perf_event_data *ctx) {
  u64 id = bpf_get_current_pid_tgid();
  if ((id >> 32) != TARGET_PID) return 0;
  u32 tid = (u32)id;
  u64 task = bpf_get_current_task();
  u64 fsbase = 0;
  bpf_probe_read_kernel(&fsbase, sizeof(fsbase), (void *)(task + FS_OFFSET));
  fsbase_by_tid.update(&tid, &fsbase);
  if ((ctx->regs.cs & 3) == 3) {
    u64 stack = 0;
    bpf_probe_read_kernel(&stack, sizeof(stack), (void *)(task + STACK_OFFSET));
    struct pt_regs saved = {};
    /* x86_64: user registers sit at the top of the kernel stack (THREAD_SIZE 16 KiB). */
    bpf_probe_read_kernel(&saved, sizeof(saved), (void *)(stack + 16384 - sizeof(saved)));
    int zero = 0, one = 1;
    u64 *total = stack_check.lookup(&zero);
    if (total) __sync_fetch_and_add(total, 1);
    if (saved.sp == ctx->regs.sp && saved.ip == ctx->regs.ip) {
      u64 *match = stack_check.lookup(&one);
      if (match) __sync_fetch_and_add(match, 1);
    }
  }
  return 0;
}
)";
  auto bpf =
      ebpf::CompileBpfProgram(program, {"-DTARGET_PID=" + std::to_string(getpid()),
                                          "-DFS_OFFSET=" + std::to_string(offsets->fs_base),
                                          "-DSTACK_OFFSET=" + std::to_string(offsets->stack)});
  ASSERT_TRUE(bpf.ok()) << bpf.error();
  auto st =
      (*bpf)->attach_perf_event(1 /*PERF_TYPE_SOFTWARE*/, 0 /*CPU_CLOCK*/, "on_sample", 0, 997);
  ASSERT_TRUE(st.ok()) << st.msg();

  std::atomic<pid_t> worker_tid{0};
  std::atomic<unsigned long> worker_fs{0};
  std::atomic<bool> stop{false};
  std::thread worker([&] {
    unsigned long fs = 0;
    syscall(SYS_arch_prctl, ARCH_GET_FS, &fs);
    worker_fs = fs;
    worker_tid = static_cast<pid_t>(syscall(SYS_gettid));
    volatile unsigned long spin = 0;
    while (!stop) ++spin;
  });
  // Until the program has seen the busy thread and more than 10 user-mode
  // samples, however long a busy machine takes to give them.
  auto table = (*bpf)->get_hash_table<uint32_t, uint64_t>("fsbase_by_tid");
  auto checks = (*bpf)->get_array_table<uint64_t>("stack_check");
  uint64_t seen = 0, total = 0, match = 0;
  pyperf_test::WaitFor(
      [&] {
        checks.get_value(0, total);
        return worker_tid != 0 &&
               table.get_value(static_cast<uint32_t>(worker_tid.load()), seen).ok() && total > 10;
      },
      std::chrono::seconds(60));
  (*bpf)->detach_perf_event(1, 0);
  stop = true;
  worker.join();

  ASSERT_TRUE(table.get_value(static_cast<uint32_t>(worker_tid.load()), seen).ok())
      << "no sample of the busy thread arrived";
  EXPECT_EQ(seen, worker_fs.load());
  checks.get_value(0, total);
  checks.get_value(1, match);
  ASSERT_GT(total, 10u) << "too few user-mode samples";
  EXPECT_EQ(match, total) << "saved user registers at task->stack top differ from perf's";
}

}  // namespace
