// PyPerf: entry point. Parses the command line, checks privileges, and runs
// the profiler; every failure is one line on stderr and a non-zero exit.
#include <signal.h>

#include <cstdio>

#include "PyPerfOptions.h"
#include "PyPerfProfiler.h"
#include "bpf_loader.h"
#include "scoped_priority.h"

namespace {

void OnDumpSignal(int) { ebpf::pyperf::PyPerfProfiler::RequestDump(); }
void OnStopSignal(int) { ebpf::pyperf::PyPerfProfiler::RequestStop(); }

void InstallSignalHandlers() {
  struct sigaction sa = {};
  sa.sa_handler = OnDumpSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR2, &sa, nullptr);
  sa.sa_handler = OnStopSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

}  // namespace

int main(int argc, char** argv) {
  ebpf::pyperf::CommandLine cmd = ebpf::pyperf::ParseCommandLine(argc, argv);
  switch (cmd.action) {
    case ebpf::pyperf::CommandLine::Action::kPrintHelp:
      fputs(cmd.message.c_str(), stdout);
      return 0;
    case ebpf::pyperf::CommandLine::Action::kFail:
      fprintf(stderr, "%s\n", cmd.message.c_str());
      return cmd.exit_code;
    case ebpf::pyperf::CommandLine::Action::kRun:
      break;
  }
  for (const auto& warning : cmd.options.warnings)
    fprintf(stderr, "PyPerf: warning: %s\n", warning.c_str());

  ebpf::Status st = ebpf::CheckBpfPrivileges();
  if (!st.ok()) {
    fprintf(stderr, "PyPerf: error: %s\n", st.message().c_str());
    return 1;
  }
  // Handlers first: gProfiler treats the output file's appearance as "ready
  // for SIGUSR2", and the file is created when the profiler starts.
  InstallSignalHandlers();
  // Start-up (about half a second of CPU, mostly compiling the BPF program)
  // at a better priority, so that busy cores do not hold it up for seconds;
  // sampling at the priority PyPerf was started with.
  ebpf::ScopedPriorityBoost startup_boost(40);  // the best there is: -20
  auto profiler = ebpf::pyperf::PyPerfProfiler::Create(cmd.options);
  if (!profiler.ok()) {
    fprintf(stderr, "PyPerf: error: %s\n", profiler.error().c_str());
    return 1;
  }
  return (*profiler)->Run([&startup_boost] { startup_boost.Restore(); });
}
