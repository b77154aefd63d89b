// See perf_output_rings.h.
#include "perf_output_rings.h"

#include <bcc/libbpf.h>
#include <linux/perf_event.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "read_file.h"

namespace ebpf {
namespace {

// The perf event a BPF program's perf_event_output writes to on `cpu`, whose
// ring wakes its reader each `wakeup_bytes` bytes written.
Result<UniqueFd> OpenBpfOutputEvent(int cpu, size_t wakeup_bytes) {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_BPF_OUTPUT;
  attr.sample_type = PERF_SAMPLE_RAW;
  attr.sample_period = 1;
  attr.watermark = 1;
  attr.wakeup_watermark = static_cast<uint32_t>(wakeup_bytes);
  // pid -1, this cpu: every task on it, as a BPF program on it writes.
  long fd = syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) return Status::Error(std::strerror(errno));
  return UniqueFd(static_cast<int>(fd));
}

}  // namespace

Result<std::vector<int>> OnlineCpus() {
  auto text = ReadFile("/sys/devices/system/cpu/online");
  if (!text.ok()) return text.status();
  // A list of ranges: "0-3,5,7-8\n".
  std::vector<int> cpus;
  const char* p = text->c_str();
  while (*p && *p != '\n') {
    char* end;
    long first = std::strtol(p, &end, 10);
    if (end == p || first < 0) break;
    long last = first;
    p = end;
    if (*p == '-') {
      last = std::strtol(p + 1, &end, 10);
      if (end == p + 1 || last < first) break;
      p = end;
    }
    for (long cpu = first; cpu <= last && cpus.size() < 65536; ++cpu)
      cpus.push_back(static_cast<int>(cpu));
    if (*p == ',') ++p;
  }
  if (cpus.empty()) return Status::Error("cannot parse /sys/devices/system/cpu/online: " + *text);
  return cpus;
}

Result<std::unique_ptr<PerfOutputRings>> PerfOutputRings::Open(const Options& options) {
  const int pages = options.pages_per_cpu;
  if (pages < 1 || (pages & (pages - 1)) != 0) {
    return Status::Error("the perf ring size must be a power of two of pages, not " +
                         std::to_string(pages));
  }
  auto cpus = OnlineCpus();
  if (!cpus.ok()) return cpus.status();
  const size_t page_size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t data_size = static_cast<size_t>(pages) * page_size;
  std::unique_ptr<PerfOutputRings> rings(new PerfOutputRings());
  rings->callbacks_ = {options.on_record, options.on_lost, options.cookie};
  rings->wakeup_bytes_ = options.wakeup_bytes == 0 || options.wakeup_bytes > data_size
                             ? data_size / 2
                             : options.wakeup_bytes;
  rings->epoll_fd_.reset(epoll_create1(EPOLL_CLOEXEC));
  if (!rings->epoll_fd_) {
    return Status::Error(std::string("cannot create an epoll fd for the perf rings: ") +
                         std::strerror(errno));
  }
  rings->rings_.reserve(cpus->size());
  for (int cpu : *cpus) {
    const std::string which =
        "the perf ring of CPU " + std::to_string(cpu) + " (" + std::to_string(pages) + " pages)";
    auto fd = OpenBpfOutputEvent(cpu, rings->wakeup_bytes_);
    if (!fd.ok()) return Status::Error("cannot open " + which + ": " + fd.error());
    const size_t map_size = page_size + data_size;
    void* addr = mmap(nullptr, map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd->get(), 0);
    if (addr == MAP_FAILED) {
      return Status::Error("cannot map " + which + ": " + std::strerror(errno) +
                           " (a smaller --events-buffer-pages, or a higher "
                           "/proc/sys/kernel/perf_event_mlock_kb, may help)");
    }
    UniqueMmap mapping(addr, map_size);
    rings->rings_.push_back(
        Ring{cpu, std::move(*fd), std::move(mapping), PerfRingReader(addr, page_size, data_size)});
    Ring& ring = rings->rings_.back();
    int event_fd = ring.fd.get();
    if (bpf_update_elem(options.map_fd, &cpu, &event_fd, 0) != 0) {
      return Status::Error("cannot add " + which +
                           " to the BPF events map: " + std::strerror(errno));
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<uint32_t>(rings->rings_.size() - 1);
    if (epoll_ctl(rings->epoll_fd_.get(), EPOLL_CTL_ADD, event_fd, &ev) != 0) {
      return Status::Error("cannot watch " + which + " with epoll: " + std::strerror(errno));
    }
  }
  return rings;
}

PerfOutputRings::~PerfOutputRings() = default;

void PerfOutputRings::ReadAll() {
  for (Ring& ring : rings_) ring.reader.Drain(callbacks_);
}

int PerfOutputRings::Poll(int timeout_ms) {
  int ready = 0;
  if (timeout_ms != 0) {
    // Which rings woke does not matter: every ring is read, as reading one
    // costs no system call, and a ring below its watermark holds events too.
    epoll_event events[64];
    ready = epoll_wait(epoll_fd_.get(), events, 64, timeout_ms);
    if (ready > 0) wakeups_ += static_cast<uint64_t>(ready);
  }
  const int saved = errno;
  ReadAll();
  errno = saved;
  return ready;
}

}  // namespace ebpf
