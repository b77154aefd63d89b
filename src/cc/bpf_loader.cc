// BPF loading without kernel headers: see bpf_loader.h.
#include "bpf_loader.h"

#include <bpf/libbpf.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>

#include "kernel_header_shim.h"
#include "scoped_nonroot_euid.h"

namespace ebpf {
namespace {

constexpr int kCapSysAdmin = 21;
constexpr int kCapPerfmon = 38;
constexpr int kCapBpf = 39;

uint64_t EffectiveCapabilities() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("CapEff:", 0) == 0) return std::stoull(line.substr(7), nullptr, 16);
  }
  return 0;
}

}  // namespace

Status CheckBpfPrivileges() {
  uint64_t caps = EffectiveCapabilities();
  auto has = [caps](int cap) { return (caps >> cap) & 1; };
  if (has(kCapSysAdmin) || (has(kCapBpf) && has(kCapPerfmon))) return Status::Ok();
  std::string missing;
  if (!has(kCapBpf)) missing += "CAP_BPF";
  if (!has(kCapPerfmon)) missing += missing.empty() ? "CAP_PERFMON" : " and CAP_PERFMON";
  return Status::Error("insufficient privileges to load BPF programs (missing " + missing +
                       "): run as root, or grant CAP_BPF + CAP_PERFMON (e.g. setcap "
                       "cap_bpf,cap_perfmon+ep)");
}

bool KernelHasProbeReadUser() {
  // 1: the verifier knows the helper; 0: it does not; negative: no answer
  // (e.g. a locked-memory limit on an old kernel).
  int known = libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_probe_read_user, nullptr);
  if (known >= 0) return known == 1;
  struct utsname un;
  if (::uname(&un) != 0) return true;
  return LinuxVersionCode(un.release) >= ((5u << 16) + (5u << 8));
}

Result<std::unique_ptr<ebpf::BPF>> CompileBpfProgram(const std::string& program,
                                                     const std::vector<std::string>& cflags) {
  auto shim = KernelHeaderShim::Install();
  if (!shim.ok()) return shim.status();
  // Start-up work that buys PyPerf nothing, left out (the kallsyms scan too,
  // below):
  // - the rw engine: JIT-compiled string readers/writers of every map's key
  //   and value, used only by libbcc's untyped (string) table API;
  // - debug info (-g0 overrides libbcc's -g): libbcc turns it into BTF for
  //   the maps, and the kernel allocates a stack-trace map (64 MiB at the
  //   default size) before refusing BTF on it, so libbcc creates it twice.
  auto bpf = std::make_unique<ebpf::BPF>(0, nullptr, /*rw_engine_enabled=*/false);
  std::vector<std::string> flags = cflags;
  flags.push_back("-g0");
  ebpf::StatusTuple st = ebpf::StatusTuple::OK();
  {
    // libbcc reads all of /proc/kallsyms during the compile only as root
    // (see scoped_nonroot_euid.h); the maps it creates need only capabilities.
    ScopedNonRootEuid skip_kallsyms_scan;
    st = bpf->init(program, flags);
  }
  if (!st.ok())
    return Status::Error("cannot compile/load the BPF program: " + st.msg() +
                         " (compiler diagnostics above)");
  return bpf;
}

Status LoadBpfFunction(ebpf::BPF& bpf, const std::string& name, int prog_type, int* fd) {
  // libbcc computes a program tag through an AF_ALG socket and, where the
  // kernel has none, prints two lines about it: noise for PyPerf's users.
  fflush(stderr);
  FILE* capture = tmpfile();
  int saved = capture ? dup(STDERR_FILENO) : -1;
  if (saved >= 0) dup2(fileno(capture), STDERR_FILENO);
  ebpf::StatusTuple st = bpf.load_func(name, static_cast<bpf_prog_type>(prog_type), *fd);
  if (saved >= 0) {
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(capture);
    char line[4096];
    while (fgets(line, sizeof(line), capture)) {
      if (strstr(line, "sha1 socket not available") || strstr(line, "cannot get prog tag"))
        continue;
      fputs(line, stderr);
    }
  }
  if (capture) fclose(capture);
  if (!st.ok()) return Status::Error("cannot load BPF program " + name + ": " + st.msg());
  return Status::Ok();
}

}  // namespace ebpf
