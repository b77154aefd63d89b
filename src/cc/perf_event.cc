// Perf events owned by the caller: see perf_event.h.
#include "perf_event.h"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace ebpf {
namespace {

Status Ioctl(const UniqueFd& fd, unsigned long request, unsigned long arg, const char* what) {
  if (ioctl(fd.get(), request, arg) != 0)
    return Status::Error(std::string("cannot ") + what + " (perf event): " + strerror(errno));
  return Status::Ok();
}

}  // namespace

Result<UniqueFd> OpenThreadClockSampler(uint64_t period_ns) {
  struct perf_event_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_TASK_CLOCK;
  attr.sample_period = period_ns;
  attr.disabled = 1;
  // pid 0, cpu -1: this thread wherever it runs.
  long fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0)
    return Status::Error(std::string("cannot open a task-clock perf event on this thread: ") +
                         strerror(errno));
  return UniqueFd(static_cast<int>(fd));
}

Status AttachBpfToPerfEvent(const UniqueFd& perf_fd, int prog_fd) {
  return Ioctl(perf_fd, PERF_EVENT_IOC_SET_BPF, static_cast<unsigned long>(prog_fd),
               "attach a BPF program");
}

Status EnablePerfEvent(const UniqueFd& perf_fd) {
  return Ioctl(perf_fd, PERF_EVENT_IOC_ENABLE, 0, "enable");
}

Status DisablePerfEvent(const UniqueFd& perf_fd) {
  return Ioctl(perf_fd, PERF_EVENT_IOC_DISABLE, 0, "disable");
}

}  // namespace ebpf
