// Workloads on every version: see version_workloads.h.
#include "support/version_workloads.h"

#include <gtest/gtest.h>
#include <signal.h>

#include "support/e2e.h"
#include "support/version_targets.h"

namespace pyperf_test {

std::vector<std::string> VersionWorkload::Argv(const std::vector<std::string>& args) const {
  if (!root) return args;
  return ContainerArgv(*root, args);
}

namespace {

// Where the target's interpreter is and the workload's directory; false (and
// `unavailable`) if the target cannot run here.
bool Place(const Target& target, VersionWorkload* w) {
  std::string why;
  if (target.kind == TargetKind::kHost) {
    auto python = FindInterpreter(target.spec);
    if (!python) {
      w->unavailable = "no interpreter " + target.spec;
      return false;
    }
    w->python = python->path;
  } else {
    w->root = EnsurePythonRoot(target.spec, &why);
    if (!w->root) {
      w->unavailable = "no Debian " + target.spec + " root: " + why;
      return false;
    }
    w->python = w->root->python;
  }
  return true;
}

void Start(const std::string& script, const WorkloadArgs& args, VersionWorkload* w) {
  if (w->root) {
    w->root_dir = std::make_unique<RootTempDir>(*w->root);
    w->dir = w->root_dir->path();
    w->dir_inside = w->root_dir->inside();
    w->script = w->root_dir->Copy(WorkloadPath(script), script);
  } else {
    w->host_dir = std::make_unique<TempDir>();
    w->dir = w->dir_inside = w->host_dir->path();
    w->script = WorkloadPath(script);
  }
  auto extra = args(w);
  if (!extra) return;
  std::vector<std::string> argv = {w->python, w->script};
  argv.insert(argv.end(), extra->begin(), extra->end());
  w->process = std::make_unique<ChildProcess>(w->Argv(argv));
}

}  // namespace

std::vector<std::unique_ptr<VersionWorkload>> StartOnEveryVersion(const std::string& script,
                                                                  const WorkloadArgs& args) {
  std::vector<std::unique_ptr<VersionWorkload>> workloads;
  for (const Target& target : Targets()) {
    if (target.kind != TargetKind::kHost && target.kind != TargetKind::kContainer) continue;
    auto w = std::make_unique<VersionWorkload>();
    w->name = target.name;
    if (Place(target, w.get())) Start(script, args, w.get());
    workloads.push_back(std::move(w));
  }
  auto free_threaded = std::make_unique<VersionWorkload>();
  free_threaded->name = "free_threaded_3_13t";
  std::string why;
  if (auto python = FreeThreadedPython(&why)) {
    free_threaded->python = *python;
    Start(script, args, free_threaded.get());
  } else {
    free_threaded->unavailable = "no free-threaded CPython: " + why;
  }
  workloads.push_back(std::move(free_threaded));
  return workloads;
}

bool ReportUnavailable(const std::vector<std::unique_ptr<VersionWorkload>>& workloads) {
  size_t unavailable = 0;
  for (const auto& w : workloads) {
    if (w->unavailable.empty()) continue;
    ++unavailable;
    if (StrictMode()) {
      ADD_FAILURE() << "PYPERF_TEST_STRICT=1 and a version cannot run: " << w->name << ": "
                    << w->unavailable;
    }
    std::printf("[ skipped  ] %s: %s\n", w->name.c_str(), w->unavailable.c_str());
  }
  return unavailable < workloads.size();
}

bool Printed(const VersionWorkload& w, const std::string& text) {
  return w.process && w.process->Stdout().find(text) != std::string::npos;
}

void WaitUntilReady(std::vector<std::unique_ptr<VersionWorkload>>& workloads,
                    const std::function<std::string(VersionWorkload*)>& check,
                    std::chrono::seconds timeout) {
  WaitFor(
      [&] {
        for (auto& w : workloads)
          if (w->process && !Printed(*w, "ready\n") && w->process->Running()) return false;
        return true;
      },
      timeout);
  for (auto& w : workloads) {
    if (!w->process) continue;
    auto fail = [&](const std::string& why) {
      ADD_FAILURE() << w->name << ": " << why << "; stdout:\n"
                    << w->process->Stdout() << "\nstderr:\n"
                    << w->process->Stderr();
      w->process.reset();
    };
    if (!Printed(*w, "ready\n") || !w->process->Running()) {
      fail(w->script + " did not become ready");
      continue;
    }
    if (std::string why = check(w.get()); !why.empty()) {
      fail(why);
      continue;
    }
    if (!w->container()) {
      w->pid = w->process->pid();
      continue;
    }
    auto children = ChildPids(w->process->pid());
    if (children.size() != 1) {
      fail("unshare has " + std::to_string(children.size()) + " children");
      continue;
    }
    w->pid = children[0];
  }
}

std::unique_ptr<ChildProcess> ProfileReleasedWorkloads(
    std::vector<std::string> args, const std::vector<std::unique_ptr<VersionWorkload>>& workloads,
    const std::string& done, std::chrono::seconds deadline) {
  auto pyperfs = ProfileReleasedWorkloads(std::vector<std::vector<std::string>>{std::move(args)},
                                          workloads, done, deadline);
  if (pyperfs.empty()) return nullptr;
  return std::move(pyperfs.front());
}

std::vector<std::unique_ptr<ChildProcess>> ProfileReleasedWorkloads(
    const std::vector<std::vector<std::string>>& runs,
    const std::vector<std::unique_ptr<VersionWorkload>>& workloads, const std::string& done,
    std::chrono::seconds deadline) {
  std::vector<std::string> pids;
  for (const auto& w : workloads)
    if (w->process) pids.insert(pids.end(), {"-p", std::to_string(w->pid)});
  if (pids.empty()) {
    ADD_FAILURE() << "no workload is running";
    return {};
  }
  std::vector<std::unique_ptr<ChildProcess>> pyperfs;
  for (std::vector<std::string> args : runs) {
    args.insert(args.end(), pids.begin(), pids.end());
    pyperfs.push_back(StartPyPerf(args));
  }
  for (auto& pyperf : pyperfs) {
    if (!WaitForStderr(*pyperf, "Ready to profile", kPyPerfTimeout)) {
      ADD_FAILURE() << "PyPerf never got ready; stderr:\n" << pyperf->Stderr();
      return {};
    }
  }
  for (const auto& w : workloads)
    if (w->process) kill(w->pid, SIGUSR1);
  bool all_done = WaitFor(
      [&] {
        for (const auto& w : workloads)
          if (w->process && w->process->Running() && !Printed(*w, done)) return false;
        return true;
      },
      deadline);
  EXPECT_TRUE(all_done) << "the workloads did not all print \"" << done << "\" in "
                        << deadline.count() << " s";
  for (auto& pyperf : pyperfs)
    EXPECT_TRUE(pyperf->Running()) << "PyPerf ended early; stderr:\n" << pyperf->Stderr();
  return pyperfs;
}

}  // namespace pyperf_test
