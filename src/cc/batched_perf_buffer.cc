// See batched_perf_buffer.h.
#include "batched_perf_buffer.h"

#include <bcc/libbpf.h>
#include <sys/epoll.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "read_file.h"

namespace pyperf {

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
  if (cpus.empty())
    return Status::Error("cannot parse /sys/devices/system/cpu/online: " + *text);
  return cpus;
}

Result<std::unique_ptr<BatchedPerfBuffer>> BatchedPerfBuffer::Open(const Options& options) {
  auto cpus = OnlineCpus();
  if (!cpus.ok()) return cpus.status();
  std::unique_ptr<BatchedPerfBuffer> buffer(new BatchedPerfBuffer());
  buffer->epoll_fd_.reset(epoll_create1(EPOLL_CLOEXEC));
  if (!buffer->epoll_fd_) {
    return Status::Error(std::string("epoll_create1: ") + std::strerror(errno));
  }
  for (int cpu : *cpus) {
    bcc_perf_buffer_opts opts{};
    opts.pid = -1;
    opts.cpu = cpu;
    opts.wakeup_events = options.wakeup_events < 1 ? 1 : options.wakeup_events;
    auto* reader = static_cast<perf_reader*>(bpf_open_perf_buffer_opts(
        options.on_record, options.on_lost, options.cookie, options.pages_per_cpu, &opts));
    if (!reader) {
      return Status::Error("cannot open the perf buffer of CPU " + std::to_string(cpu) + " (" +
                           std::to_string(options.pages_per_cpu) +
                           " pages): " + std::strerror(errno));
    }
    buffer->readers_.push_back(reader);
    int fd = perf_reader_fd(reader);
    if (bpf_update_elem(options.map_fd, &cpu, &fd, 0) != 0) {
      return Status::Error("cannot add CPU " + std::to_string(cpu) +
                           "'s perf buffer to the events map: " + std::strerror(errno));
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<uint32_t>(buffer->readers_.size() - 1);
    if (epoll_ctl(buffer->epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      return Status::Error(std::string("epoll_ctl: ") + std::strerror(errno));
    }
  }
  return buffer;
}

BatchedPerfBuffer::~BatchedPerfBuffer() {
  for (perf_reader* reader : readers_) perf_reader_free(reader);
}

void BatchedPerfBuffer::ReadAll() {
  for (perf_reader* reader : readers_) perf_reader_event_read(reader);
}

int BatchedPerfBuffer::Poll(int timeout_ms) {
  // libbcc's reader makes a gettid call per read, so only rings that woke
  // are read after a wake-up; on a timeout, an interruption or a Poll(0)
  // every ring is (a ring below its batch size holds events too).
  if (timeout_ms != 0) {
    epoll_event events[64];
    int ready = epoll_wait(epoll_fd_.get(), events, 64, timeout_ms);
    if (ready > 0) {
      wakeups_ += static_cast<uint64_t>(ready);
      for (int i = 0; i < ready; ++i) {
        uint32_t index = events[i].data.u32;
        if (index < readers_.size()) perf_reader_event_read(readers_[index]);
      }
      return ready;
    }
    int saved = errno;
    ReadAll();
    errno = saved;
    return ready;
  }
  ReadAll();
  return 0;
}

}  // namespace pyperf
