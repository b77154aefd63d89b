// Helpers of the end-to-end tests: see e2e.h.
#include "support/e2e.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <regex>
#include <sstream>

namespace pyperf_test {

std::optional<Interpreter> FindInterpreter(const std::string& spec) {
  if (spec.empty() || spec[0] != '/') return PyenvInterpreter(spec);
  if (access(spec.c_str(), X_OK) != 0) return std::nullopt;
  std::string name = spec.substr(1);
  std::replace(name.begin(), name.end(), '/', '-');
  return Interpreter{name, spec};
}

std::string SpecTestName(const std::string& spec) {
  std::string name = spec[0] == '/' ? spec.substr(1) : "pyenv_" + spec;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

std::unique_ptr<ChildProcess> StartWorkload(const Interpreter& python, const std::string& script,
                                            const std::vector<std::string>& args,
                                            const std::map<std::string, std::string>& env) {
  std::vector<std::string> argv = {python.path, WorkloadPath(script)};
  argv.insert(argv.end(), args.begin(), args.end());
  ChildProcess::Options options;
  options.env = env;
  auto child = std::make_unique<ChildProcess>(argv, options);
  bool ready = WaitFor(
      [&] { return child->Stdout().find("ready\n") != std::string::npos || !child->Running(); },
      kWorkloadReadyTimeout);
  if (!ready || !child->Running()) {
    ADD_FAILURE() << script << " on " << python.name << " did not become ready; stderr:\n"
                  << child->Stderr();
    return nullptr;
  }
  return child;
}

void PythonWorkloadTest::SetUp() {
  python_ = spec_.empty() ? AnyInterpreter() : FindInterpreter(spec_);
  PYPERF_REQUIRE_PYTHON_AND_BPF(python_, spec_.empty()
                                             ? "no Python interpreter installed"
                                             : "interpreter " + spec_ + " is not installed");
  workload_ = StartWorkload(*python_, script_);
  ASSERT_NE(workload_, nullptr);
}

std::unique_ptr<ChildProcess> StartPyPerf(const std::vector<std::string>& args,
                                          const ChildProcess::Options& options) {
  std::vector<std::string> argv = {PyPerfBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return std::make_unique<ChildProcess>(argv, options);
}

bool WaitForStderr(ChildProcess& child, const std::string& text,
                   std::chrono::milliseconds timeout) {
  return WaitFor([&] { return child.Stderr().find(text) != std::string::npos || !child.Running(); },
                 timeout) &&
         child.Stderr().find(text) != std::string::npos;
}

PyPerfRun FinishPyPerf(ChildProcess& pyperf, const std::string& what,
                       std::chrono::milliseconds timeout) {
  SCOPED_TRACE(what);
  auto status = pyperf.Wait(timeout);
  EXPECT_TRUE(status.has_value())
      << "PyPerf still running after "
      << std::chrono::duration_cast<std::chrono::seconds>(timeout).count() << " s; stderr:\n"
      << pyperf.Stderr();
  if (!status) {
    pyperf.Signal(SIGKILL);
    pyperf.Wait(std::chrono::seconds(5));
  }
  EXPECT_EQ(pyperf.ExitCode(), 0) << "stderr:\n" << pyperf.Stderr();
  return PyPerfRun{ParseCollapsed(pyperf.Stdout()), pyperf.Stderr()};
}

PyPerfRun ProfileUntilEachRan(const std::vector<std::string>& args, const std::vector<pid_t>& pids,
                              std::chrono::milliseconds cpu, const std::string& what,
                              std::chrono::milliseconds timeout) {
  auto pyperf = StartPyPerf(args);
  EXPECT_TRUE(WaitForStderr(*pyperf, "Ready to profile", timeout))
      << what << ": PyPerf never got ready; stderr:\n"
      << pyperf->Stderr();
  const uint64_t ticks = static_cast<uint64_t>(sysconf(_SC_CLK_TCK)) * cpu.count() / 1000;
  std::vector<uint64_t> from;
  for (pid_t pid : pids) from.push_back(CpuTicks(pid));
  auto all_ran = [&] {
    for (size_t i = 0; i < pids.size(); ++i)
      if (CpuTicks(pids[i]) < from[i] + ticks) return false;
    return true;
  };
  EXPECT_TRUE(WaitFor([&] { return all_ran() || !pyperf->Running(); }, timeout) && all_ran())
      << what << ": the profiled processes did not all run " << cpu.count() << " ms of CPU";
  pyperf->Signal(SIGTERM);
  return FinishPyPerf(*pyperf, what, timeout);
}

std::optional<uint64_t> DumpCounter(const std::string& stderr_text, const std::string& name) {
  std::optional<uint64_t> sum;
  const std::regex field("[:,] " + name + ": (\\d+)(,|$)");
  for (const auto& line : SplitLines(stderr_text)) {
    if (line.rfind("PyPerf: samples collected: ", 0) != 0) continue;
    std::smatch m;
    if (!std::regex_search(line, m, field)) continue;
    sum = sum.value_or(0) + std::stoull(m[1].str());
  }
  return sum;
}

double ExpectShareOfSamples(const std::vector<CollapsedLine>& lines,
                            const std::function<bool(const CollapsedLine&)>& pred,
                            double min_percent, const std::string& what) {
  uint64_t total = 0, matching = 0;
  std::vector<CollapsedLine> others;
  for (const auto& line : lines) {
    total += line.count;
    if (pred(line)) {
      matching += line.count;
    } else {
      others.push_back(line);
    }
  }
  EXPECT_GT(total, 0u) << "no samples to check: " << what;
  double percent = total ? 100.0 * static_cast<double>(matching) / static_cast<double>(total) : 0;
  EXPECT_GE(percent, min_percent) << matching << " of " << total << " samples (" << percent
                                  << "%, at least " << min_percent << "% expected) " << what
                                  << "; the others:" << Excerpt(others, 8);
  std::cout << "[ e2e ] " << matching << " of " << total << " samples (" << percent << "%) " << what
            << std::endl;
  return percent;
}

bool IsSyscallEntryFrame(const std::string& frame) {
  return KindOf(frame) == FrameKind::kKernel &&
         (frame.rfind("entry_SYSCALL", 0) == 0 || frame.rfind("do_syscall_64", 0) == 0);
}

void ExpectSystemCallSamples(const std::vector<CollapsedLine>& lines,
                             const std::function<bool(const CollapsedLine&)>& pred,
                             double min_in_call_percent, double min_percent,
                             const std::string& what) {
  auto in_a_call = [](const CollapsedLine& line) {
    return std::any_of(line.frames.begin(), line.frames.end(), IsSyscallEntryFrame);
  };
  ExpectShareOfSamples(lines, in_a_call, min_in_call_percent,
                       "are in a system call (a syscall entry kernel frame)");
  std::vector<CollapsedLine> in_call;
  std::copy_if(lines.begin(), lines.end(), std::back_inserter(in_call), in_a_call);
  ExpectShareOfSamples(in_call, pred, min_percent, "of those in a system call " + what);
}

std::vector<CollapsedLine> ExpectShareEndingWith(const std::vector<CollapsedLine>& lines,
                                                 const std::vector<std::string>& functions,
                                                 bool rooted, double min_percent,
                                                 const std::string& what) {
  ExpectShareOfSamples(lines, PythonStackEndsWith(functions, rooted), min_percent, what);
  return LinesEndingWith(lines, functions, rooted);
}

void ExpectFewErrorMarkers(const std::vector<CollapsedLine>& lines, double max_percent) {
  uint64_t total = SumCounts(lines), with_errors = 0;
  std::vector<CollapsedLine> examples;
  for (const auto& line : lines) {
    if (ErrorMarkers(line).empty()) continue;
    with_errors += line.count;
    examples.push_back(line);
  }
  EXPECT_LE(100.0 * static_cast<double>(with_errors), max_percent * static_cast<double>(total))
      << with_errors << " of " << total << " samples carry an error marker:" << Excerpt(examples);
}

std::optional<Interpreter> AnyInterpreter() {
  for (const char* spec : {"3.11", "/usr/bin/python3.11", "3.12", "3.10"})
    if (auto python = FindInterpreter(spec)) return python;
  return std::nullopt;
}

std::string FindInPath(const std::string& program) {
  const char* path = getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

namespace {

// utime + stime from a /proc stat file (a process's or a thread's).
uint64_t CpuTicksIn(const std::string& stat_path) {
  std::string stat = ReadFile(stat_path);
  unsigned long long utime = 0, stime = 0;
  size_t paren = stat.rfind(')');  // the comm may hold spaces and parentheses
  if (paren != std::string::npos)
    std::sscanf(stat.c_str() + paren + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                &utime, &stime);
  return utime + stime;
}

}  // namespace

uint64_t CpuTicks(pid_t pid) { return CpuTicksIn("/proc/" + std::to_string(pid) + "/stat"); }

uint64_t ThreadCpuTicks(pid_t pid, pid_t tid) {
  return CpuTicksIn("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/stat");
}

std::vector<std::string> DumpLines(const ChildProcess& pyperf) {
  std::vector<std::string> lines;
  for (const auto& line : SplitLines(pyperf.Stderr()))
    if (line.rfind("PyPerf: samples collected: ", 0) == 0) lines.push_back(line);
  return lines;
}

std::optional<std::string> RequestDump(ChildProcess& pyperf, std::chrono::milliseconds timeout) {
  const size_t before = DumpLines(pyperf).size();
  pyperf.Signal(SIGUSR2);
  WaitFor([&] { return DumpLines(pyperf).size() > before || !pyperf.Running(); }, timeout);
  auto lines = DumpLines(pyperf);
  if (lines.size() <= before) return std::nullopt;
  return lines[before];
}

std::vector<std::string> DumpedFiles(const std::string& path) {
  std::string dir = path.substr(0, path.rfind('/'));
  std::string prefix = path.substr(path.rfind('/') + 1) + ".";
  std::vector<std::string> files;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name.rfind(prefix, 0) == 0) files.push_back(dir + "/" + name);
    }
    closedir(d);
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string DumpOutputPath(const std::string& dump_line) {
  const std::string tag = "output: ";
  size_t at = dump_line.rfind(tag);
  if (at == std::string::npos) return "";
  std::string path = dump_line.substr(at + tag.size());
  // With native stacks on, the native cache's counters follow the path.
  size_t native = path.rfind(", native cache: ");
  if (native != std::string::npos) path.resize(native);
  return path == "stdout" ? "" : path;
}

bool WaitForCpu(pid_t pid, std::chrono::milliseconds cpu, std::chrono::milliseconds timeout) {
  const uint64_t ticks = static_cast<uint64_t>(sysconf(_SC_CLK_TCK)) * cpu.count() / 1000;
  const uint64_t from = CpuTicks(pid);
  return WaitFor([&] { return CpuTicks(pid) >= from + ticks; }, timeout) &&
         CpuTicks(pid) >= from + ticks;
}

uint64_t VmRssKiB(pid_t pid) {
  std::string status = ReadFile("/proc/" + std::to_string(pid) + "/status");
  size_t at = status.find("VmRSS:");
  return at == std::string::npos ? 0 : std::stoull(status.substr(at + 6));
}

size_t OpenFdCount(pid_t pid) {
  std::error_code error;
  size_t n = 0;
  for (std::filesystem::directory_iterator it("/proc/" + std::to_string(pid) + "/fd", error), end;
       !error && it != end; it.increment(error))
    ++n;
  return n;
}

std::optional<pid_t> ThreadRunning(const CollapsedProfile& profile, pid_t pid,
                                   const std::string& function,
                                   const std::optional<std::string>& class_name) {
  auto tids = profile.TidsWhere([&](const CollapsedLine& line) {
    return line.pid == pid &&
           std::any_of(line.frames.begin(), line.frames.end(), [&](const std::string& f) {
             return IsPythonFunction(f, function, class_name);
           });
  });
  EXPECT_EQ(tids.size(), 1u) << "threads of pid " << pid << " running " << function;
  if (tids.size() != 1) return std::nullopt;
  return tids[0];
}

void ExpectWellFormed(const std::vector<CollapsedLine>& lines, bool every_frame_has_a_kind) {
  size_t reported = 0;
  for (const auto& line : lines) {
    if (reported >= 5) break;  // enough to see the problem
    if (auto problem = FrameOrderProblem(line)) {
      ADD_FAILURE() << "frames out of order: " << *problem << "\n  in: " << line.text;
      ++reported;
    }
    for (const auto& frame : line.frames) {
      if (every_frame_has_a_kind && KindOf(frame) == FrameKind::kUnknown) {
        ADD_FAILURE() << "frame without a kind suffix: \"" << frame << "\"\n  in: " << line.text;
        ++reported;
      }
      std::string why;
      if (KindOf(frame) == FrameKind::kPython && !ParsePythonFrame(frame, &why)) {
        ADD_FAILURE() << "badly spelled Python frame: " << why << "\n  in: " << line.text;
        ++reported;
      }
    }
  }
}

std::string Excerpt(const std::vector<CollapsedLine>& lines, size_t max_lines) {
  std::string out;
  for (size_t i = 0; i < lines.size() && i < max_lines; ++i) out += "\n  " + lines[i].text;
  if (lines.size() > max_lines) out += "\n  ... (" + std::to_string(lines.size()) + " lines)";
  return out;
}

}  // namespace pyperf_test
