// End-to-end tests of PyPerf on every CPython it supports (issue 5): pyenv's
// 2.7 .. 3.13 (shared libpython), Debian's /usr/bin/python3.11 (static,
// non-PIE), Debian trixie's 3.13.x and sid's 3.14 and 3.15 run as containers
// from the roots of scripts/python-roots.sh (own PID and mount namespaces,
// chroot), sid's shared libpython3.14 and libpython3.15 each loaded by a host
// program in the sid container
// (workloads/embedding_host.c), uWSGI embedding Debian's libpython3.11
// through its python3 plugin, and a pyenv interpreter whose libpython was
// deleted after it started.
//
// The targets the selected tests need run at once and two PyPerf processes
// (--line-numbers first and current, native frames on) profile them together,
// as PyPerf does on a real host, dumping every second (SIGUSR2) until every
// checked thread has samples enough, so a busy machine lengthens the run
// instead of starving a check: a whole run of this program costs one BPF
// load per mode; under CTest, where each test is a process of its own, each
// test starts just its target. Per target:
//  - PythonFramesAreRight: calltree.py's threads (the uWSGI app's for uWSGI)
//    with the right frames in order: module, class, function, file as the
//    process sees it, line (the interpreter's own co_firstlineno, or the
//    executing line); host pids and container paths for the containers, the
//    deleted libpython's path, the plugin's libpython in a process named uwsgi,
//    the embedded libpython as the container names it;
//  - NativeFramesShowTheEvalLoop: _PyEval_EvalFrameDefault_[pn]
//    (PyEval_EvalFrameEx_[pn] on 2.7) under the busy thread's Python frames;
//  - NamesAreExactUtf8 (each interpreter once: host and container targets):
//    unicode_names.py's chain of Latin-1, BMP and astral names and paths,
//    names renamed at run time, names longer than the BPF buffers and a comm
//    that is not UTF-8, each frame compared whole with what it must be.
// Every dump is checked by ParseCollapsed: strict UTF-8, and no line gProfiler
// could not read (the first test to run reports a bad dump).
// The "current" run also writes every other --format of each dump, and the
// Formats tests read them back with their real consumers: each speedscope
// file is valid against speedscope's published schema and holds exactly its
// collapsed twin's samples; each pprof file, through `go tool pprof -traces`,
// -top and -raw, holds the same stacks, totals and labels, and every layout's
// eval loop sits in a mapping with its file's build-id; the largest dump's
// flame graph page works in headless chromium (no console error, its data
// equal to the collapsed dump, the hottest Python frame's share in its
// tooltip, click-to-zoom, search).
//
// Under PYPERF_TEST_STRICT=1 a missing interpreter, root or uWSGI fails its
// tests. The roots are built on first use (scripts/python-roots.sh, cached
// outside the repository).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "FrameSpelling.h"
#include "elf_file.h"
#include "support/collapsed.h"
#include "support/e2e.h"
#include "support/flamegraph_page.h"
#include "support/pprof_file.h"
#include "support/python_roots.h"
#include "support/python_source.h"
#include "support/speedscope_file.h"
#include "support/test_support.h"
#include "support/version_targets.h"

namespace pyperf_test {
namespace {

constexpr int kFrequencyHz = 499;
// Profiling goes on until each checked thread has this many samples in both
// modes, or until the deadline.
constexpr uint64_t kMinThreadSamples = 8;
constexpr auto kProfileDeadline = seconds(90);
constexpr auto kReadyTimeout = seconds(60);
constexpr auto kPyPerfTimeout = seconds(120);
// Samples of a target's lines that may carry an error marker: the workloads
// share two cores with a dozen others, so allow some noise, not a pattern.
constexpr double kMaxErrorPercent = 2.0;
// Samples of each checked thread that must show its expected Python stack:
// every thread loops in one function forever, so only a sample between two
// calls or one with an error marker may differ (under 1% when measured), but
// a thread may have as few as kMinThreadSamples, each one 1/8 of the share.
constexpr double kExpectedStackPercent = 80.0;

// --- The running targets and the two profiles ------------------------------

struct RunningTarget {
  const Target* target = nullptr;
  std::string unavailable;  // why the target could not be started; "" when it runs
  // Declared before the process so the process dies first.
  std::unique_ptr<RootTempDir> root_dir;
  std::unique_ptr<TempDir> lib_dir;
  std::unique_ptr<ChildProcess> process;
  pid_t pid = 0;                // the interpreter's host pid
  std::string script;           // the workload's path as the process sees it
  std::string host_script;      // the same file, from the host
  std::string deleted_library;  // kDeletedLib: the libpython that was deleted
  std::string libpython;        // kEmbedded: the root's libpython, as the container sees it
  // In a container: the interpreter's argv as the container sees it.
  std::vector<std::string> container_interpreter;
  // How to run this target's interpreter for a helper script (chrooted for a
  // container; Debian's python3.11 for uWSGI's libpython3.11).
  std::vector<std::string> python_argv;
  // unicode_names.py, run by the same interpreter (host and container
  // targets): its process, its host pid, and the base directory of the files
  // it writes, as it sees it.
  std::unique_ptr<RootTempDir> names_root_dir;
  std::unique_ptr<TempDir> names_dir;
  std::unique_ptr<ChildProcess> names_process;
  pid_t names_pid = 0;
  std::string names_base;
  // co_firstlineno of each function of the workload, as this interpreter
  // compiles it (a module's first line is 1 from 3.8, its first statement
  // after the docstring before).
  std::map<std::string, int> first_lines;
};

// Asks the target's interpreter for the first line of every code object of its workload.
std::map<std::string, int> FirstLinesFromInterpreter(const RunningTarget& run) {
  const char* script =
      "import sys\n"
      "def walk(code):\n"
      "    sys.stdout.write('%s %d\\n' % (code.co_name, code.co_firstlineno))\n"
      "    for const in code.co_consts:\n"
      "        if hasattr(const, 'co_firstlineno'):\n"
      "            walk(const)\n"
      "walk(compile(open(sys.argv[1]).read(), sys.argv[1], 'exec'))\n";
  std::vector<std::string> argv = run.python_argv;
  argv.insert(argv.end(), {"-c", script, run.script});
  auto result = RunCommand(argv);
  std::map<std::string, int> lines;
  std::istringstream in(result.out);
  std::string name;
  int line;
  while (in >> name >> line) lines.emplace(name, line);
  EXPECT_EQ(result.exit_code, 0) << "cannot compile " << run.script << ": " << result.err;
  return lines;
}

bool WaitForReady(ChildProcess& child, bool in_stderr) {
  WaitFor(
      [&] {
        std::string text = in_stderr ? child.Stderr() : child.Stdout();
        return text.find("ready\n") != std::string::npos || !child.Running();
      },
      kReadyTimeout);
  return child.Running();
}

// Waits for `process` (a workload) to print "ready" and returns the host pid
// of its interpreter: for a container, unshare's one child, PID 1 inside the
// container (PyPerf must report the host's pid). On failure, adds a failure
// naming `what`, resets `process` and returns 0.
pid_t WaitForInterpreter(std::unique_ptr<ChildProcess>& process, bool container, bool in_stderr,
                         const std::string& what) {
  if (!WaitForReady(*process, in_stderr)) {
    ADD_FAILURE() << what << " did not become ready; stdout:\n"
                  << process->Stdout() << "\nstderr:\n"
                  << process->Stderr();
    process.reset();
    return 0;
  }
  if (!container) return process->pid();
  auto children = ChildPids(process->pid());
  if (children.size() != 1) {
    ADD_FAILURE() << what << ": unshare has " << children.size() << " children";
    process.reset();
    return 0;
  }
  return children[0];
}

// Starts unicode_names.py with the target's interpreter (in the target's
// container for a container), once the target itself runs.
void StartNamesWorkload(const Target& target, RunningTarget* run) {
  std::string script = WorkloadPath("unicode_names.py");
  if (InContainer(target.kind)) {
    std::string why;
    auto root = EnsurePythonRoot(target.spec, &why);
    if (!root) return;  // the target itself reported it
    run->names_root_dir = std::make_unique<RootTempDir>(*root);
    std::vector<std::string> argv = run->container_interpreter;
    argv.push_back(run->names_root_dir->Copy(script, "unicode_names.py"));
    run->names_base = run->names_root_dir->inside() + "/names";
    argv.push_back(run->names_base);
    run->names_process = std::make_unique<ChildProcess>(ContainerArgv(*root, argv));
  } else {
    run->names_dir = std::make_unique<TempDir>();
    run->names_base = run->names_dir->path() + "/names";
    std::vector<std::string> argv = run->python_argv;
    argv.insert(argv.end(), {script, run->names_base});
    run->names_process = std::make_unique<ChildProcess>(argv);
  }
  run->names_pid = WaitForInterpreter(run->names_process, InContainer(target.kind), false,
                                      target.name + ": unicode_names.py");
}

// Starts one target; on failure sets `unavailable` (missing on this machine)
// or adds a test failure (present but broken).
void StartTarget(const Target& target, RunningTarget* run) {
  run->target = &target;
  std::string calltree = WorkloadPath("calltree.py");
  switch (target.kind) {
    case TargetKind::kHost: {
      std::string python = target.spec;
      if (python[0] != '/') {
        auto found = PyenvInterpreter(target.spec);
        if (!found) {
          run->unavailable = "no pyenv Python " + target.spec + " under " + PyenvRoot();
          return;
        }
        python = found->path;
      } else if (!FileExists(python)) {
        run->unavailable = "no " + python;
        return;
      }
      run->script = run->host_script = calltree;
      run->python_argv = {python};
      run->process = std::make_unique<ChildProcess>(std::vector<std::string>{python, calltree});
      break;
    }
    case TargetKind::kContainer:
    case TargetKind::kEmbedded: {
      std::string why;
      auto root = EnsurePythonRoot(target.spec, &why);
      if (!root) {
        run->unavailable = "no Debian " + target.spec + " root: " + why;
        return;
      }
      run->root_dir = std::make_unique<RootTempDir>(*root);
      run->container_interpreter = {root->python};
      if (target.kind == TargetKind::kEmbedded) {
        // Debian's libpython3.X package, which python-roots.sh installs with its -dev.
        run->libpython = "/usr/lib/x86_64-linux-gnu/libpython" + root->minor + ".so.1.0";
        if (!FileExists(root->dir + run->libpython)) {
          run->unavailable = "no " + run->libpython + " in the " + target.spec + " root";
          return;
        }
        run->container_interpreter = {run->root_dir->Copy(PYPERF_EMBEDDING_HOST, "embedding_host"),
                                      run->libpython};
      }
      run->script = run->root_dir->Copy(calltree, "calltree.py");
      run->host_script = run->root_dir->path() + "/calltree.py";
      run->python_argv = {"chroot", root->dir};
      run->python_argv.insert(run->python_argv.end(), run->container_interpreter.begin(),
                              run->container_interpreter.end());
      std::vector<std::string> argv = run->container_interpreter;
      argv.push_back(run->script);
      run->process = std::make_unique<ChildProcess>(ContainerArgv(*root, argv));
      break;
    }
    case TargetKind::kDeletedLib: {
      auto found = PyenvInterpreter(target.spec);
      if (!found) {
        run->unavailable = "no pyenv Python " + target.spec + " under " + PyenvRoot();
        return;
      }
      // pyenv's bin/python finds lib/libpythonX.Y.so.1.0 through its RUNPATH,
      // which LD_LIBRARY_PATH overrides.
      std::string lib_name = "libpython" + target.spec + ".so.1.0";
      std::string original = found->path.substr(0, found->path.rfind("/bin/")) + "/lib/" + lib_name;
      run->lib_dir = std::make_unique<TempDir>();
      run->deleted_library = run->lib_dir->File(lib_name);
      auto cp = RunCommand({"cp", original, run->deleted_library});
      if (cp.exit_code != 0) {
        ADD_FAILURE() << "cannot copy " << original << ": " << cp.err;
        return;
      }
      ChildProcess::Options options;
      options.env["LD_LIBRARY_PATH"] = run->lib_dir->path();
      run->script = run->host_script = calltree;
      run->python_argv = {found->path};
      run->process =
          std::make_unique<ChildProcess>(std::vector<std::string>{found->path, calltree}, options);
      break;
    }
    case TargetKind::kUwsgi: {
      if (!FileExists(target.spec) || !FileExists("/usr/lib/uwsgi/plugins/python3_plugin.so")) {
        run->unavailable =
            "uWSGI with its python3 plugin is not installed (apt-get install uwsgi-core "
            "uwsgi-plugin-python3)";
        return;
      }
      run->lib_dir = std::make_unique<TempDir>();
      run->script = run->host_script = WorkloadPath("versions_uwsgi_app.py");
      run->python_argv = {"/usr/bin/python3.11"};  // the plugin's libpython3.11
      // No master: the one process loads the app (and its thread) and serves.
      run->process = std::make_unique<ChildProcess>(std::vector<std::string>{
          target.spec, "--plugin", "python3", "--wsgi-file", run->script, "--enable-threads",
          "--need-app", "--disable-logging", "--socket", run->lib_dir->File("uwsgi.sock")});
      break;
    }
  }
  run->first_lines = FirstLinesFromInterpreter(*run);
  // uWSGI sends the app's stdout to its log, on stderr.
  run->pid = WaitForInterpreter(run->process, InContainer(target.kind),
                                target.kind == TargetKind::kUwsgi, target.name);
  if (!run->process) return;
  if (target.kind == TargetKind::kDeletedLib && unlink(run->deleted_library.c_str()) != 0) {
    ADD_FAILURE() << "cannot delete " << run->deleted_library;
  }
  if (target.kind == TargetKind::kHost || InContainer(target.kind)) StartNamesWorkload(target, run);
}

struct Profiles {
  CollapsedProfile first, current;
  std::string first_stderr, current_stderr;
  std::string problem;  // why there are no profiles
  // The "current" run writes every --format: its collapsed dumps, oldest
  // first; each format's file of a dump is that path plus the extension.
  std::vector<std::string> current_dumps;
};

// Every format the "current" run writes, in its --format order.
constexpr const char* kAllFormats = "collapsed,flamegraph,speedscope,pprof";

// The dump files PATH.<stamp> of one PyPerf run, read as they appear.
class DumpReader {
 public:
  explicit DumpReader(std::string path) : path_(std::move(path)) {}
  // Appends the lines of every dump not read yet, oldest first (and, if
  // `files` is given, their paths). Only the collapsed dumps, PATH.<stamp>,
  // are read: another format's files are PATH.<stamp>.<extension>.
  void ReadNew(CollapsedProfile* profile, std::vector<std::string>* files = nullptr) {
    std::string dir = path_.substr(0, path_.rfind('/'));
    std::string prefix = path_.substr(path_.rfind('/') + 1) + ".";
    std::set<std::string> names;
    auto listing = RunCommand({"ls", "-1", dir});
    for (const auto& name : SplitLines(listing.out))
      if (name.rfind(prefix, 0) == 0 && name.find('.', prefix.size()) == std::string::npos &&
          !read_.count(name))
        names.insert(name);
    for (const auto& name : names) {
      read_.insert(name);
      if (files) files->push_back(dir + "/" + name);
      SCOPED_TRACE("dump " + dir + "/" + name);
      CollapsedProfile dump = ParseCollapsed(ReadFile(dir + "/" + name));
      profile->lines.insert(profile->lines.end(), dump.lines.begin(), dump.lines.end());
      profile->unparseable.insert(profile->unparseable.end(), dump.unparseable.begin(),
                                  dump.unparseable.end());
    }
  }

 private:
  std::string path_;
  std::set<std::string> read_;
};

// Every target, started once for the whole suite, and both profiles of them.
class Session {
 public:
  explicit Session(const std::set<std::string>& selected) {
    for (const Target& t : Targets()) {
      if (!selected.count(t.name)) continue;
      auto run = std::make_unique<RunningTarget>();
      StartTarget(t, run.get());
      running_[t.name] = std::move(run);
    }
    if (auto why = BpfUnavailableReason()) {
      profiles_.problem = "BPF unavailable: " + *why;
      return;
    }
    std::vector<std::string> pids;
    for (const auto& [name, run] : running_) {
      if (run->process) pids.insert(pids.end(), {"-p", std::to_string(run->pid)});
      if (run->names_process) pids.insert(pids.end(), {"-p", std::to_string(run->names_pid)});
    }
    if (pids.empty()) {
      profiles_.problem = "no target is running";
      return;
    }
    // Both modes profile until every target's threads have samples enough
    // to be checked (or kProfileDeadline), dumping every second as gProfiler
    // does, so a busy machine makes the run longer, not the checks weaker.
    TempDir& out_dir = *out_dir_;
    auto start = [&](const char* mode) {
      std::vector<std::string> argv = {PyPerfBinary(),
                                       "-v",
                                       "1",
                                       "-F",
                                       std::to_string(kFrequencyHz),
                                       "--line-numbers",
                                       mode,
                                       "-o",
                                       out_dir.File(mode)};
      if (std::string(mode) == "current") argv.insert(argv.end(), {"--format", kAllFormats});
      argv.insert(argv.end(), pids.begin(), pids.end());
      return std::make_unique<ChildProcess>(argv);
    };
    auto first = start("first");
    auto current = start("current");
    DumpReader first_dumps(out_dir.File("first")), current_dumps(out_dir.File("current"));
    bool ready = WaitFor(
        [&] {
          return (FileExists(out_dir.File("first")) || !first->Running()) &&
                 (FileExists(out_dir.File("current")) || !current->Running());
        },
        kPyPerfTimeout);
    // The targets' CPU time paces the dumps: a second of it between two.
    auto targets_cpu = [&] {
      uint64_t ticks = 0;
      for (const auto& [name, run] : running_) {
        if (run->process) ticks += CpuTicks(run->pid);
        if (run->names_process) ticks += CpuTicks(run->names_pid);
      }
      return ticks;
    };
    if (ready && first->Running() && current->Running()) {
      auto deadline = std::chrono::steady_clock::now() + kProfileDeadline;
      while (std::chrono::steady_clock::now() < deadline) {
        const uint64_t from = targets_cpu();
        WaitFor(
            [&] {
              return targets_cpu() >= from + static_cast<uint64_t>(sysconf(_SC_CLK_TCK)) ||
                     !first->Running() || !current->Running();
            },
            seconds(30));
        first->Signal(SIGUSR2);
        current->Signal(SIGUSR2);
        first_dumps.ReadNew(&profiles_.first);
        current_dumps.ReadNew(&profiles_.current, &profiles_.current_dumps);
        if (!first->Running() || !current->Running()) break;
        if (Enough(profiles_.first) && Enough(profiles_.current)) break;
      }
    }
    for (auto* p : {first.get(), current.get()}) {
      p->Signal(SIGTERM);
      if (!p->Wait(kPyPerfTimeout)) {
        p->Signal(SIGKILL);
        p->Wait(seconds(5));
        profiles_.problem += "PyPerf did not finish in time. ";
      } else if (p->ExitCode() != 0) {
        profiles_.problem += "PyPerf exited with " + std::to_string(p->ExitCode()) + ". ";
      }
    }
    first_dumps.ReadNew(&profiles_.first);
    current_dumps.ReadNew(&profiles_.current, &profiles_.current_dumps);
    profiles_.first_stderr = first->Stderr();
    profiles_.current_stderr = current->Stderr();
    if (!profiles_.problem.empty()) {
      profiles_.problem += "stderr (first):\n" + profiles_.first_stderr + "\nstderr (current):\n" +
                           profiles_.current_stderr;
    }
    for (const auto& [name, run] : running_) {
      if (run->process && !run->process->Running())
        dead_[name] = "died while profiled; stderr:\n" + run->process->Stderr();
      if (run->names_process && !run->names_process->Running())
        dead_[name] +=
            "unicode_names.py died while profiled; stderr:\n" + run->names_process->Stderr();
    }
    // The profiles are taken. The targets stay alive, since the checks read
    // their /proc files, but they stop spending CPU: on 2 cores, a dozen busy
    // interpreters left running made the rest of this program (headless
    // chromium, go tool pprof, readelf) several times slower.
    SignalTargets(SIGSTOP);
  }

  // Continued before they are killed: a target the kill does not reach (a
  // process's child) is never left stopped.
  ~Session() { SignalTargets(SIGCONT); }

  // True when every running target has kMinThreadSamples in each thread the
  // checks look at (calltree.py: 5, the uWSGI app: 1 besides uWSGI's own) and
  // unicode_names.py has kMinThreadSamples in its one thread.
  bool Enough(const CollapsedProfile& profile) const {
    auto busy_threads = [&](pid_t pid) {
      std::map<pid_t, uint64_t> per_tid;
      for (const auto& line : profile.OfPid(pid)) per_tid[line.tid] += line.count;
      size_t n = 0;
      for (const auto& [tid, count] : per_tid) n += count >= kMinThreadSamples;
      return n;
    };
    for (const auto& [name, run] : running_) {
      if (!run->process) continue;
      size_t want = run->target->kind == TargetKind::kUwsgi ? 1 : 5;
      if (busy_threads(run->pid) < want) return false;
      if (run->names_process && busy_threads(run->names_pid) < 1) return false;
    }
    return true;
  }

  // `sig` to every target interpreter still running (SIGSTOP, SIGCONT).
  void SignalTargets(int sig) {
    for (const auto& [name, run] : running_) {
      if (run->process && run->process->Running() && run->pid > 0) kill(run->pid, sig);
      if (run->names_process && run->names_process->Running() && run->names_pid > 0)
        kill(run->names_pid, sig);
    }
  }

  RunningTarget& Get(const std::string& name) { return *running_.at(name); }
  // Every target that runs, by name.
  std::vector<const RunningTarget*> Running() const {
    std::vector<const RunningTarget*> out;
    for (const auto& [name, run] : running_)
      if (run->process) out.push_back(run.get());
    return out;
  }
  const Profiles& profiles() const { return profiles_; }
  std::string DeathOf(const std::string& name) const {
    auto it = dead_.find(name);
    return it == dead_.end() ? "" : it->second;
  }

 private:
  // The dumps outlive the runs: the format tests read them after.
  std::unique_ptr<TempDir> out_dir_ = std::make_unique<TempDir>();
  std::map<std::string, std::unique_ptr<RunningTarget>> running_;
  std::map<std::string, std::string> dead_;
  Profiles profiles_;
};

// --- Expectations ----------------------------------------------------------

// The module PyPerf derives from a file outside any library directory: the
// path without its leading '/' and ".py", '/' becoming '.' (rule of the
// README's frame table, written out here independently).
std::string ModuleOfPlainPath(const std::string& file) {
  std::string m = file.substr(1);
  if (m.size() > 3 && m.compare(m.size() - 3, 3, ".py") == 0) m.resize(m.size() - 3);
  std::replace(m.begin(), m.end(), '/', '.');
  return m;
}

// Checks one Python frame: file (as the process sees it), module derived from
// it, class, function, and the line for the mode: first line in "first";
// in "current" the line of `call` if given, else a line of the function.
void ExpectFrame(const PythonFrame& frame, const PythonSource& source, const RunningTarget& run,
                 bool current_lines, const std::string& class_name, const std::string& function,
                 const std::string& call = "") {
  const std::string& file = run.script;
  SCOPED_TRACE("frame " + frame.qualified_name + " (" + frame.file + ":" +
               std::to_string(frame.line) + ")");
  EXPECT_EQ(frame.file, file);
  EXPECT_EQ(frame.module, ModuleOfPlainPath(file));
  EXPECT_EQ(frame.class_name, class_name);
  EXPECT_EQ(frame.function, function);
  if (!current_lines) {
    auto first = run.first_lines.find(function);
    ASSERT_NE(first, run.first_lines.end()) << "no code object " << function;
    EXPECT_EQ(frame.line, first->second) << "the code object's first line";
  } else if (!call.empty()) {
    EXPECT_EQ(frame.line, source.StatementLine(function, call)) << "the line of \"" << call << "\"";
  } else {
    int first = source.FirstLine(function);
    if (auto it = run.first_lines.find(function); it != run.first_lines.end())
      first = std::min(first, it->second);
    EXPECT_GE(frame.line, first) << "a line of " << function;
    EXPECT_LE(frame.line, source.LastLine(function)) << "a line of " << function;
  }
}

// The lines of the one thread of `pid` whose stacks contain `function`.
std::vector<CollapsedLine> ThreadLines(const CollapsedProfile& profile, pid_t pid,
                                       const std::string& function,
                                       const std::optional<std::string>& class_name) {
  auto tid = ThreadRunning(profile, pid, function, class_name);
  return tid ? profile.OfTid(*tid) : std::vector<CollapsedLine>{};
}

// What every target's samples must be: some (a fatal failure, naming the
// process `what`, if there are none), each well formed, few with an error
// marker.
void ExpectTargetSamples(const CollapsedProfile& profile, const RunningTarget& run,
                         const std::string& what) {
  auto lines = profile.OfPid(run.pid);
  ASSERT_FALSE(lines.empty()) << "no samples of " << what << " " << run.pid;
  ExpectWellFormed(lines);
  ExpectFewErrorMarkers(lines, kMaxErrorPercent);
}

// A thread started by threading's bootstrap that loops in class_name.outer,
// whose `call` calls class_name.inner: the share of its samples that end in
// outer -> inner (`what` says so), and their frames. Returns those samples.
std::vector<CollapsedLine> CheckLoopThread(const CollapsedProfile& profile,
                                           const PythonSource& source, const RunningTarget& run,
                                           bool current, const std::string& class_name,
                                           const std::string& outer, const std::string& inner,
                                           const std::string& call, const std::string& what) {
  auto thread = ThreadLines(profile, run.pid, outer, class_name);
  auto matching = ExpectShareEndingWith(thread, {outer, inner}, false, kExpectedStackPercent, what);
  for (const auto& line : matching) {
    auto frames = PythonFramesOf(line);
    size_t n = frames.size();
    ExpectFrame(frames[n - 2], source, run, current, class_name, outer, call);
    ExpectFrame(frames[n - 1], source, run, current, class_name, inner);
    EXPECT_NE(frames[0].function.find("bootstrap"), std::string::npos) << line.text;
  }
  return matching;
}

// calltree.py's threads, in one --line-numbers mode.
void CheckCallTree(const CollapsedProfile& profile, const RunningTarget& run, bool current) {
  PythonSource source(run.host_script);
  ASSERT_FALSE(source.empty()) << "cannot read " << run.host_script;
  ASSERT_NO_FATAL_FAILURE(ExpectTargetSamples(profile, run, "pid"));
  pid_t pid = run.pid;

  {
    SCOPED_TRACE("main thread: <module> -> main_busy -> main_leaf");
    auto main_lines = profile.OfTid(pid);
    auto matching = ExpectShareEndingWith(
        main_lines, {"<module>", "main_busy", "main_leaf"}, true, kExpectedStackPercent,
        "of the main thread show <module> -> main_busy -> main_leaf");
    for (const auto& line : matching) {
      auto frames = PythonFramesOf(line);
      ExpectFrame(frames[0], source, run, current, "", "<module>", "main_busy()");
      ExpectFrame(frames[1], source, run, current, "", "main_busy", "main_leaf()");
      ExpectFrame(frames[2], source, run, current, "", "main_leaf");
    }
  }
  {
    SCOPED_TRACE("worker-method thread: threading bootstrap ... Worker.run -> Worker.spin");
    for (const auto& line :
         CheckLoopThread(profile, source, run, current, "Worker", "run", "spin", "self.spin()",
                         "of the worker-method thread end in run -> spin")) {
      auto frames = PythonFramesOf(line);
      EXPECT_EQ(frames[0].module, "threading") << line.text;
      EXPECT_EQ(frames[0].class_name, "Thread") << line.text;
    }
  }
  // Threads that loop in one function (class_name "" for a plain one).
  struct LeafThread {
    const char* trace;
    const char* class_name;
    const char* function;
    const char* what;
  };
  for (const LeafThread& t : {
           LeafThread{"worker-cls thread: Worker.class_spin (class from cls)", "Worker",
                      "class_spin", "of the worker-cls thread end in class_spin"},
           LeafThread{"syscall-loop thread: syscall_loop", "", "syscall_loop",
                      "of the syscall-loop thread end in syscall_loop"},
       }) {
    SCOPED_TRACE(t.trace);
    auto thread = ThreadLines(profile, pid, t.function, std::string(t.class_name));
    for (const auto& line :
         ExpectShareEndingWith(thread, {t.function}, false, kExpectedStackPercent, t.what))
      ExpectFrame(PythonFramesOf(line).back(), source, run, current, t.class_name, t.function);
  }
  {
    SCOPED_TRACE("deep-recursion thread: truncated, recurse ... deep_leaf");
    auto deep = ThreadLines(profile, pid, "deep_leaf", "");
    EXPECT_FALSE(deep.empty());
    for (const auto& line : deep) {
      EXPECT_TRUE(IsTruncated(line)) << line.text;
      auto frames = PythonFramesOf(line);
      // The README: a stack deeper than 128 frames shows its innermost 128.
      EXPECT_EQ(FramesOfKind(line, FrameKind::kPython).size(), 128u) << line.text;
      ASSERT_EQ(frames.size(), 128u) << line.text;
      ExpectFrame(frames.back(), source, run, current, "", "deep_leaf");
      ExpectFrame(frames[frames.size() - 2], source, run, current, "", "recurse",
                  "return deep_leaf()");
      ExpectFrame(frames[0], source, run, current, "", "recurse", "return recurse(depth - 1)");
    }
  }
}

// The uWSGI app's thread: Crunch.loop -> Crunch.step, in a process named uwsgi.
void CheckUwsgiApp(const CollapsedProfile& profile, const RunningTarget& run, bool current) {
  PythonSource source(run.host_script);
  ASSERT_FALSE(source.empty()) << "cannot read " << run.host_script;
  ASSERT_NO_FATAL_FAILURE(ExpectTargetSamples(profile, run, "uwsgi pid"));
  CheckLoopThread(profile, source, run, current, "Crunch", "loop", "step", "self.step(BUSY_TEXT)",
                  "of the uwsgi-crunch thread end in Crunch.loop -> Crunch.step");
}

// The log line PyPerf -v 1 writes when it starts profiling `pid`.
std::string ProfilingLogLine(const std::string& stderr_text, pid_t pid) {
  std::string needle = "profiling pid " + std::to_string(pid) + " ";
  for (const auto& line : SplitLines(stderr_text))
    if (line.find(needle) != std::string::npos) return line;
  return "";
}

// The session, created by the first test that needs it and ended (every
// process killed and reaped, the roots' temporary directories removed) when
// the test program ends.
Session* g_session = nullptr;

class SessionEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    delete g_session;
    g_session = nullptr;
  }
};
const auto* const g_environment = ::testing::AddGlobalTestEnvironment(new SessionEnvironment);

// The targets of the tests this run will execute: each test's name ends in
// "/<target>". Under CTest every test is a process of its own, so only its
// target starts; a whole run of this program starts and profiles them all at once.
std::set<std::string> SelectedTargets() {
  std::set<std::string> names;
  const auto* unit = ::testing::UnitTest::GetInstance();
  for (int i = 0; i < unit->total_test_suite_count(); ++i) {
    const auto* suite = unit->GetTestSuite(i);
    for (int j = 0; j < suite->total_test_count(); ++j) {
      const auto* info = suite->GetTestInfo(j);
      std::string name = info->name();
      if (info->should_run() && std::string(suite->name()) == "Formats") {
        for (const Target& t : Targets()) names.insert(t.name);  // they check every layout
      } else if (info->should_run() && name.rfind('/') != std::string::npos) {
        names.insert(name.substr(name.rfind('/') + 1));
      }
    }
  }
  return names;
}

Session& TheSession() {
  if (!g_session) g_session = new Session(SelectedTargets());
  return *g_session;
}

std::string TargetTestName(const ::testing::TestParamInfo<Target>& info) { return info.param.name; }

// The target's running process (profiled), or nullptr after a skip (*skip
// set; a failure under PYPERF_TEST_STRICT=1) or a failure.
RunningTarget* Prepare(const Target& target, std::string* skip) {
  Session& session = TheSession();
  RunningTarget& run = session.Get(target.name);
  auto skip_or_fail = [&](const std::string& why) -> RunningTarget* {
    if (StrictMode()) {
      ADD_FAILURE() << "PYPERF_TEST_STRICT=1 and this test cannot run: " << why;
    } else {
      *skip = why;
    }
    return nullptr;
  };
  if (!run.unavailable.empty()) return skip_or_fail(run.unavailable);
  const Profiles& p = session.profiles();
  if (p.problem.rfind("BPF unavailable", 0) == 0) return skip_or_fail(p.problem);
  if (!run.process) {
    ADD_FAILURE() << target.name << " did not start (see the first test's failures)";
    return nullptr;
  }
  EXPECT_EQ(p.problem, "");
  EXPECT_EQ(session.DeathOf(target.name), "") << target.name;
  return &run;
}

#define PREPARE_OR_RETURN(run, target)                     \
  std::string skip_reason;                                 \
  RunningTarget* run = Prepare(target, &skip_reason);      \
  if (!run) {                                              \
    if (!skip_reason.empty()) GTEST_SKIP() << skip_reason; \
    return;                                                \
  }

// Containers: host pids (the interpreter is PID 1 in its namespace), files
// named as the process sees them, the interpreter named as the container sees it.
void CheckContainer(const RunningTarget& run, const Profiles& p) {
  SCOPED_TRACE("container");
  EXPECT_NE(run.pid, 1);
  std::string status = ReadFile("/proc/" + std::to_string(run.pid) + "/status");
  EXPECT_NE(status.find("NSpid:\t" + std::to_string(run.pid) + "\t1\n"), std::string::npos)
      << "the interpreter should be PID 1 of its own namespace";
  auto lines = p.first.OfPid(run.pid);
  ASSERT_FALSE(lines.empty());
  for (const auto& line : lines) {
    for (const auto& frame : PythonFramesOf(line)) {
      EXPECT_EQ(frame.file.find(run.root_dir->path()), std::string::npos)
          << "a host path in a container's frame: " << line.text;
    }
  }
  // The file holding the interpreter, as the container names it.
  std::string log = ProfilingLogLine(p.first_stderr, run.pid);
  std::string file = run.libpython.empty() ? ", /usr/bin/python3." : ", " + run.libpython + ",";
  EXPECT_NE(log.find(file), std::string::npos) << log;
}

// A shared libpython run by a program that is no Python executable: found in
// the library (as the container names it, checked by CheckContainer).
void CheckEmbedded(const RunningTarget& run) {
  SCOPED_TRACE("embedded libpython");
  std::error_code error;
  auto exe = std::filesystem::read_symlink("/proc/" + std::to_string(run.pid) + "/exe", error);
  EXPECT_EQ(exe.filename(), "embedding_host") << exe << " " << error.message();
  std::string maps = ReadFile("/proc/" + std::to_string(run.pid) + "/maps");
  EXPECT_NE(maps.find(run.libpython), std::string::npos) << "no " << run.libpython << " mapped";
}

// A libpython deleted after it was loaded: still profiled (through
// /proc/PID/map_files), and PyPerf exits 0.
void CheckDeletedLibpython(const RunningTarget& run, const Profiles& p) {
  SCOPED_TRACE("deleted libpython");
  EXPECT_FALSE(FileExists(run.deleted_library));
  std::string maps = ReadFile("/proc/" + std::to_string(run.pid) + "/maps");
  EXPECT_NE(maps.find(run.deleted_library + " (deleted)"), std::string::npos) << maps;
  std::string log = ProfilingLogLine(p.first_stderr, run.pid);
  EXPECT_NE(log.find(run.deleted_library), std::string::npos) << log;
}

// uWSGI: a process named uwsgi whose interpreter is the libpython3.11 its
// python3 plugin loaded.
void CheckUwsgiProcess(const RunningTarget& run, const Profiles& p) {
  SCOPED_TRACE("uWSGI");
  EXPECT_EQ(ReadFile("/proc/" + std::to_string(run.pid) + "/comm"), "uwsgi\n");
  std::string maps = ReadFile("/proc/" + std::to_string(run.pid) + "/maps");
  EXPECT_NE(maps.find("/usr/lib/uwsgi/plugins/python3"), std::string::npos)
      << "no python3 plugin mapped";
  std::string log = ProfilingLogLine(p.first_stderr, run.pid);
  EXPECT_NE(log.find("/libpython3.11.so"), std::string::npos) << log;
  for (const auto& line : p.first.OfPid(run.pid)) EXPECT_EQ(line.comm, "uwsgi") << line.text;
}

// calltree.py (the uWSGI app for uWSGI) with the right Python frames in order,
// in both --line-numbers modes, and what is particular to the target's kind.
class VersionsE2E : public ::testing::TestWithParam<Target> {};

TEST_P(VersionsE2E, PythonFramesAreRight) {
  PREPARE_OR_RETURN(run, GetParam());
  const Profiles& p = TheSession().profiles();
  std::string log = ProfilingLogLine(p.first_stderr, run->pid);
  EXPECT_NE(log, "") << "PyPerf did not log that it profiles pid " << run->pid << ":\n"
                     << p.first_stderr;
  if (!log.empty())
    std::cout << "[ versions ] " << GetParam().name << ": " << log.substr(log.find('('))
              << std::endl;
  for (bool current : {false, true}) {
    SCOPED_TRACE(current ? "--line-numbers current" : "--line-numbers first");
    const CollapsedProfile& profile = current ? p.current : p.first;
    if (GetParam().kind == TargetKind::kUwsgi) {
      CheckUwsgiApp(profile, *run, current);
    } else {
      CheckCallTree(profile, *run, current);
    }
    auto lines = profile.OfPid(run->pid);
    uint64_t with_errors = 0;
    for (const auto& line : lines)
      if (!ErrorMarkers(line).empty()) with_errors += line.count;
    std::cout << "[ versions ] " << GetParam().name << " --line-numbers "
              << (current ? "current" : "first") << ": " << SumCounts(lines) << " samples, "
              << with_errors << " with an error marker" << std::endl;
  }
  switch (GetParam().kind) {
    case TargetKind::kContainer:
      CheckContainer(*run, p);
      break;
    case TargetKind::kEmbedded:
      CheckContainer(*run, p);
      CheckEmbedded(*run);
      break;
    case TargetKind::kDeletedLib:
      CheckDeletedLibpython(*run, p);
      break;
    case TargetKind::kUwsgi:
      CheckUwsgiProcess(*run, p);
      break;
    case TargetKind::kHost:
      break;
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, VersionsE2E, ::testing::ValuesIn(Targets()), TargetTestName);

// Native frames under the innermost Python frame of the busy thread: the
// interpreter's eval loop, PyEval_EvalFrameEx on 2.7 and
// _PyEval_EvalFrameDefault after.
class VersionsNativeE2E : public ::testing::TestWithParam<Target> {};

TEST_P(VersionsNativeE2E, NativeFramesShowTheEvalLoop) {
  PREPARE_OR_RETURN(run, GetParam());
  const CollapsedProfile& profile = TheSession().profiles().first;
  std::string eval = ebpf::pyperf::SpellFrame(
      ebpf::pyperf::FrameKind::kNative,
      GetParam().spec == "2.7" ? "PyEval_EvalFrameEx" : "_PyEval_EvalFrameDefault");
  // Debian's 3.14 and 3.15 (sid) executables are stripped, and their eval
  // loop's hot body is a static function that only python3.X-dbgsym names:
  // there the loop shows as an address in the interpreter binary.
  const std::string& unnamed_loop = GetParam().unnamed_eval_loop;
  auto is_eval_loop = [&](const std::string& frame) {
    if (!unnamed_loop.empty()) return frame.rfind(unnamed_loop, 0) == 0;
    return frame == eval;
  };
  bool uwsgi = GetParam().kind == TargetKind::kUwsgi;
  auto busy = uwsgi ? ThreadLines(profile, run->pid, "loop", "Crunch")
                    : ThreadLines(profile, run->pid, "run", "Worker");
  auto leaf = LinesEndingWith(
      busy,
      uwsgi ? std::vector<std::string>{"loop", "step"} : std::vector<std::string>{"run", "spin"},
      false);
  ASSERT_FALSE(leaf.empty()) << Excerpt(busy);
  uint64_t total = SumCounts(leaf), with_eval = 0;
  std::vector<CollapsedLine> without;
  for (const auto& line : leaf) {
    auto native = FramesOfKind(line, FrameKind::kNative);
    if (std::any_of(native.begin(), native.end(), is_eval_loop)) {
      with_eval += line.count;
    } else {
      without.push_back(line);
    }
  }
  EXPECT_GE(100 * with_eval, 90 * total)
      << with_eval << " of " << total << " samples in the busy leaf show "
      << (unnamed_loop.empty() ? eval : "a " + unnamed_loop + "... frame")
      << "; without:" << Excerpt(without, 3);
}

// Leaf mode's native frames end at the eval-loop frame that runs the
// innermost Python frame, found whether or not the code at the sampled PC has
// a symbol: no sample of either session shows a frame of the process's or a
// thread's start after a Python frame (on sid's stripped 3.14 and 3.15, a PC
// in the eval loop's cold part, which has none, walked on to _start).
TEST_P(VersionsNativeE2E, NoFrameOfTheStartUnderAPythonFrame) {
  PREPARE_OR_RETURN(run, GetParam());
  const Profiles& profiles = TheSession().profiles();
  uint64_t samples = 0, wrong = 0;
  std::vector<CollapsedLine> examples;
  for (const CollapsedProfile* profile : {&profiles.first, &profiles.current}) {
    for (pid_t pid : {run->pid, run->names_pid}) {
      if (pid == 0) continue;
      for (const CollapsedLine& line : profile->OfPid(pid)) {
        samples += line.count;
        if (!StartFrameUnderPythonFrame(line)) continue;
        wrong += line.count;
        if (examples.size() < 3) examples.push_back(line);
      }
    }
  }
  std::printf("[ start    ] %llu of %llu samples with a start frame under a Python frame\n",
              (unsigned long long)wrong, (unsigned long long)samples);
  EXPECT_GT(samples, 0u);
  EXPECT_EQ(wrong, 0u) << Excerpt(examples, 3);
}

INSTANTIATE_TEST_SUITE_P(Targets, VersionsNativeE2E, ::testing::ValuesIn(Targets()),
                         TargetTestName);

// --- Names in every string kind (unicode_names.py) ------------------------

// Code points of UTF-8 text (the test's own decoder; the text is a literal or
// a path this test made, so it is valid).
std::vector<uint32_t> CodePoints(const std::string& utf8) {
  std::vector<uint32_t> cps;
  for (size_t i = 0; i < utf8.size();) {
    auto b = static_cast<unsigned char>(utf8[i]);
    int n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    uint32_t cp = n == 1 ? b : b & (0x7F >> n);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(utf8[i + k]) & 0x3F);
    cps.push_back(cp);
    i += n;
  }
  return cps;
}

// What PyPerf must print for a name or path of `utf8` text copied into a
// `buffer`-byte BPF buffer: whole, or cut and marked "[truncated]". On
// Python 3 a str holds 1, 2 or 4 bytes per character (by its largest one), so
// buffer / width characters fit; on 2.7 the bytes are UTF-8 and a character
// the cut splits is dropped.
std::string AsCopied(const std::string& utf8, size_t buffer, bool py2) {
  const std::string kMarker = "[truncated]";
  if (py2) {
    if (utf8.size() <= buffer) return utf8;
    size_t end = buffer;
    while (end > 0 && (static_cast<unsigned char>(utf8[end]) & 0xC0) == 0x80) --end;
    return utf8.substr(0, end) + kMarker;
  }
  auto cps = CodePoints(utf8);
  uint32_t max = 0;
  for (uint32_t cp : cps) max = std::max(max, cp);
  size_t width = max <= 0xFF ? 1 : max <= 0xFFFF ? 2 : 4;
  if (cps.size() * width <= buffer) return utf8;
  size_t keep = buffer / width, bytes = 0;
  for (size_t i = 0; i < keep; ++i) {
    auto b = static_cast<unsigned char>(utf8[bytes]);
    bytes += b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  }
  return utf8.substr(0, bytes) + kMarker;
}

std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// One frame of the chain: the expected text of its Python frame.
struct NameLink {
  std::string file;        // as the process names it (UTF-8)
  std::string class_name;  // as printed, "" for a function
  std::string function;    // as printed
  int first_line;
  int current_line;  // the executing line; 0 for the leaf (any line of its loop)
};

std::string ExpectedFrame(const NameLink& link, int line) {
  std::string text = ModuleOfPlainPath(link.file) + "." +
                     (link.class_name.empty() ? "" : link.class_name + ".") + link.function + " (" +
                     link.file + ":" + std::to_string(line) + ")" +
                     std::string(ebpf::pyperf::kPythonSuffix);
  std::replace(text.begin(), text.end(), ';', '_');
  std::replace(text.begin(), text.end(), '\n', '_');
  return text;
}

// unicode_names.py's chain, root first, as PyPerf must print it (the names
// and lines of the workload's docstring, the 32/64/256-byte BPF buffers).
std::vector<NameLink> ExpectedChain(const std::string& base, bool py2) {
  const std::string fffd = "\xEF\xBF\xBD";
  std::string a = AsCopied(base + "/josé/größe.py", 256, py2);
  std::string b = AsCopied(base + "/计算/模块.py", 256, py2);
  std::string c = AsCopied(base + "/🐍/snake_𠀀.py", 256, py2);
  std::string ooo = Repeat("ö", 100);
  std::string d = AsCopied(base + "/" + ooo + "/" + ooo + "/" + ooo + "/long.py", 256, py2);
  std::string long_class = "Klasse" + Repeat("ä", 12) + "[truncated]";  // 31 bytes of tp_name
  std::vector<NameLink> chain = {
      {a, "", "größe", 1, 2},
      {b, "Größe计算", "计算", 2, 3},
      {c, "", "𠀀𠀁", 1, 2},
      {c, "", "renamed_🔥_é", 3, 4},
      {c, "", "odd_name_with" + fffd + "nul", 5, 6},
  };
  if (py2) chain.push_back({d, "", "bad" + fffd + fffd + "name", 1, 2});
  chain.push_back({d, "", AsCopied("lang_" + Repeat("ö", 70), 64, py2), 3, 4});
  chain.push_back({d, "", AsCopied(Repeat("长", 40), 64, py2), 5, 6});
  chain.push_back({d, long_class, "spin", 8, 0});
  return chain;
}

class VersionsNamesE2E : public ::testing::TestWithParam<Target> {};

// Function, method, class and file names with Latin-1, BMP and astral
// characters, names changed at run time, names longer than the BPF buffers
// and a comm that is not UTF-8 come out exactly as the process holds them.
TEST_P(VersionsNamesE2E, NamesAreExactUtf8) {
  PREPARE_OR_RETURN(run, GetParam());
  ASSERT_TRUE(run->names_process) << "unicode_names.py did not start";
  bool py2 = GetParam().spec == "2.7";
  auto chain = ExpectedChain(run->names_base, py2);
  for (bool current : {false, true}) {
    SCOPED_TRACE(current ? "--line-numbers current" : "--line-numbers first");
    const Profiles& p = TheSession().profiles();
    auto lines = (current ? p.current : p.first).OfPid(run->names_pid);
    ASSERT_FALSE(lines.empty()) << "no samples of unicode_names.py, pid " << run->names_pid;
    uint64_t total = SumCounts(lines), exact = 0;
    std::vector<CollapsedLine> other;
    for (const auto& line : lines) {
      EXPECT_EQ(line.comm, "nämes\xEF\xBF\xBD") << line.text;
      auto frames = FramesOfKind(line, FrameKind::kPython);
      bool match = frames.size() >= chain.size();
      for (size_t i = 0; match && i < chain.size(); ++i) {
        const std::string& got = frames[frames.size() - chain.size() + i];
        const NameLink& link = chain[i];
        if (!current || link.current_line != 0) {
          int line_no = current ? link.current_line : link.first_line;
          match = got == ExpectedFrame(link, line_no);
        } else {
          // The leaf runs any line of its loop (lines 9 to 13).
          match = false;
          for (int l = 9; l <= 13; ++l) match = match || got == ExpectedFrame(link, l);
        }
      }
      if (match) {
        exact += line.count;
      } else {
        other.push_back(line);
      }
    }
    // Every sample runs the chain (it was entered before "ready"); allow the
    // same error-marker noise as the other version tests.
    EXPECT_GE(100.0 * static_cast<double>(exact), (100.0 - kMaxErrorPercent) * total)
        << exact << " of " << total << " samples end with the expected chain; expected:\n  "
        << ExpectedFrame(chain.front(), current ? chain.front().current_line : 1) << "\n  ...\n  "
        << ExpectedFrame(chain.back(), current ? 10 : chain.back().first_line)
        << "\nothers:" << Excerpt(other, 3);
    std::cout << "[ versions ] " << GetParam().name << " names " << (current ? "current" : "first")
              << ": " << exact << " of " << total << " samples exact" << std::endl;
  }
}

std::vector<Target> NameTargets() {
  std::vector<Target> targets;
  for (const Target& t : Targets())
    if (t.kind == TargetKind::kHost || InContainer(t.kind)) targets.push_back(t);
  return targets;
}

INSTANTIATE_TEST_SUITE_P(Targets, VersionsNamesE2E, ::testing::ValuesIn(NameTargets()),
                         TargetTestName);

// --- Every format of the same run (--format, issue 12) -----------------------
//
// The "current" run writes each dump as collapsed text, a flame graph page, a
// speedscope file and a pprof profile. Each format test reads every layout's
// samples back with the format's real consumer (headless chromium, speedscope's
// published schema, go tool pprof) and compares them with the collapsed file
// of the same dump.

// The pids of `stacks` ("<comm>-<pid>/<tid>;..."), with their sample counts.
std::map<pid_t, uint64_t> SamplesPerPid(const std::map<std::string, uint64_t>& stacks) {
  std::map<pid_t, uint64_t> per_pid;
  for (const auto& [stack, count] : stacks) {
    if (auto line = ParseCollapsedLine(stack + " " + std::to_string(count), nullptr))
      per_pid[line->pid] += count;
  }
  return per_pid;
}

// Every running layout's interpreter has samples in `stacks` (read back from
// a format), summed over the dumps in `per_pid`.
void ExpectEveryLayout(const std::map<pid_t, uint64_t>& per_pid, const std::string& format) {
  for (const RunningTarget* run : TheSession().Running()) {
    auto it = per_pid.find(run->pid);
    EXPECT_TRUE(it != per_pid.end() && it->second > 0)
        << format << ": no sample of " << run->target->name << " (pid " << run->pid << ")";
  }
}

// The format tests need the session; nullptr (after a skip or failure) if not.
const Profiles* PrepareFormats(std::string* skip) {
  Session& session = TheSession();
  const Profiles& p = session.profiles();
  if (p.problem.rfind("BPF unavailable", 0) == 0) {
    if (StrictMode()) {
      ADD_FAILURE() << "PYPERF_TEST_STRICT=1 and this test cannot run: " << p.problem;
    } else {
      *skip = p.problem;
    }
    return nullptr;
  }
  EXPECT_EQ(p.problem, "");
  if (p.current_dumps.empty()) {
    ADD_FAILURE() << "the run with every format delivered no dump";
    return nullptr;
  }
  return &p;
}

#define PREPARE_FORMATS_OR_RETURN(profiles)                \
  std::string skip_reason;                                 \
  const Profiles* profiles = PrepareFormats(&skip_reason); \
  if (!profiles) {                                         \
    if (!skip_reason.empty()) GTEST_SKIP() << skip_reason; \
    return;                                                \
  }

constexpr uint64_t kPeriodNs = 1000000000 / kFrequencyHz;

TEST(Formats, SpeedscopeOfEveryLayoutIsValidAndHoldsTheSameSamples) {
  PREPARE_FORMATS_OR_RETURN(profiles);
  std::map<pid_t, uint64_t> per_pid;
  for (const std::string& dump : profiles->current_dumps) {
    SCOPED_TRACE(dump);
    const std::string file = dump + ".speedscope.json";
    SpeedscopeFileResult read = ReadSpeedscopeFile(file, kPeriodNs);
    ASSERT_EQ(read.error, "");
    EXPECT_TRUE(read.schema_errors.empty()) << read.schema_errors.front();
    const auto collapsed = StackCounts(ReadFile(dump));
    // Python frames by their display names, every other frame as collapsed.
    EXPECT_EQ(read.collapsed, SpeedscopeViewOfCollapsed(collapsed));
    for (const auto& [pid, count] : SamplesPerPid(collapsed)) per_pid[pid] += count;
  }
  ExpectEveryLayout(per_pid, "speedscope");
  std::cout << "[ versions ] speedscope: " << profiles->current_dumps.size()
            << " files valid and equal to their collapsed dumps" << std::endl;
}

// The file holding the interpreter's eval loop in `pid` (libpython if it maps
// one, else the executable), as the process names it; "" if none.
std::string InterpreterFileOf(pid_t pid) {
  std::string exe;
  for (const auto& line : SplitLines(ReadFile("/proc/" + std::to_string(pid) + "/maps"))) {
    size_t slash = line.find('/');
    if (slash == std::string::npos || line.find(" r-xp ") == std::string::npos) continue;
    std::string file = line.substr(slash);
    std::string base = file.substr(file.rfind('/') + 1);
    if (base.rfind("libpython", 0) == 0) return file;
    if (base.rfind("python", 0) == 0 && exe.empty()) exe = file;
  }
  return exe;
}

TEST(Formats, PprofOfEveryLayoutReadsBackWithGoToolPprof) {
  PREPARE_FORMATS_OR_RETURN(profiles);
  std::map<pid_t, uint64_t> per_pid;
  std::map<std::string, std::set<std::string>> build_ids;  // mapping file -> build-ids seen
  for (const std::string& dump : profiles->current_dumps) {
    SCOPED_TRACE(dump);
    PprofReadback read = ReadPprofWithGoTool(dump + ".pb.gz");
    ASSERT_EQ(read.error, "");
    const auto collapsed = StackCounts(ReadFile(dump));
    std::map<std::string, uint64_t> expected;
    uint64_t total = 0;
    for (const auto& [stack, count] : collapsed) {
      expected[PprofViewOfCollapsedStack(stack)] += count;
      total += count;
    }
    EXPECT_EQ(read.total_samples, total);
    EXPECT_EQ(read.total_cpu_ns, static_cast<int64_t>(total * kPeriodNs));
    EXPECT_EQ(read.stacks, expected);
    for (const auto& [pid, count] : SamplesPerPid(collapsed)) per_pid[pid] += count;
    for (const auto& m : read.mappings) build_ids[m.file].insert(m.build_id);
    if (&dump == &profiles->current_dumps.back())
      std::cout << "[ versions ] pprof -top of the last dump:\n" << read.top << std::endl;
  }
  ExpectEveryLayout(per_pid, "pprof");
  // Each layout's eval loop is in a mapping named by the file as its maps
  // name it (from the host: a container's files by their host path), with
  // that file's build-id.
  for (const RunningTarget* run : TheSession().Running()) {
    if (run->target->kind == TargetKind::kDeletedLib) continue;  // no file to read it from
    const std::string file = InterpreterFileOf(run->pid);
    ASSERT_NE(file, "") << run->target->name;
    auto elf = ebpf::ElfFile::Open(file);
    ASSERT_TRUE(elf.ok()) << elf.error();
    const std::optional<std::string> build_id = elf.value().BuildId();
    ASSERT_TRUE(build_id.has_value()) << run->target->name << ": " << file << " has no build-id";
    EXPECT_EQ(build_ids[file], std::set<std::string>{*build_id})
        << run->target->name << ": the pprof mappings of " << file;
  }
}

// The largest dump's page, in headless chromium: its data is the collapsed
// dump's, the hottest stack's innermost Python frame shows its share, a click
// zooms to it and a search finds it.
TEST(Formats, FlameGraphOfEveryLayoutWorksInChromium) {
  if (auto why = FlameGraphConsumerUnavailable()) PYPERF_SKIP_OR_FAIL(*why);
  PREPARE_FORMATS_OR_RETURN(profiles);
  std::string largest;
  uint64_t largest_total = 0;
  for (const std::string& dump : profiles->current_dumps) {
    uint64_t total = 0;
    for (const auto& [stack, count] : StackCounts(ReadFile(dump))) total += count;
    if (total > largest_total) largest_total = total, largest = dump;
  }
  ASSERT_GT(largest_total, 0u);
  const auto collapsed = StackCounts(ReadFile(largest));
  // The hottest stack with a Python frame, and its path down to that frame.
  std::string hottest;
  uint64_t hottest_count = 0;
  for (const auto& [stack, count] : collapsed) {
    if (count > hottest_count &&
        stack.find(std::string(ebpf::pyperf::kPythonSuffix)) != std::string::npos)
      hottest = stack, hottest_count = count;
  }
  ASSERT_FALSE(hottest.empty());
  std::string why;
  const auto line = ParseCollapsedLine(hottest + " " + std::to_string(hottest_count), &why);
  ASSERT_TRUE(line) << why << ": " << hottest;
  const std::vector<std::string>& frames = line->frames;
  size_t last_python = 0;
  for (size_t i = 0; i < frames.size(); ++i)
    if (KindOf(frames[i]) == FrameKind::kPython) last_python = i;
  std::string prefix = hottest.substr(0, hottest.find(';'));
  for (size_t i = 0; i <= last_python; ++i) prefix += ";" + frames[i];
  uint64_t expected_samples = 0;
  for (const auto& [stack, count] : collapsed)
    if (stack == prefix || stack.rfind(prefix + ";", 0) == 0) expected_samples += count;

  const std::string screenshot = std::string(PYPERF_BUILD_DIR) + "/flamegraph-versions.png";
  // Searched for by its function's name, as a person would.
  const auto python = ParsePythonFrame(frames[last_python], &why);
  ASSERT_TRUE(python) << why;
  const std::string& function = python->function;
  FlameGraphPageResult page = CheckFlameGraphPage(
      largest + ".html", FlameGraphNodePath(hottest, last_python + 1), function, screenshot);
  ASSERT_EQ(page.error, "");
  EXPECT_TRUE(page.console_errors.empty()) << page.console_errors.front();
  EXPECT_EQ(page.legend_missing, "");
  EXPECT_EQ(page.collapsed, collapsed);
  EXPECT_TRUE(page.found) << prefix;
  EXPECT_EQ(page.samples, expected_samples) << prefix;
  EXPECT_NEAR(page.percent, 100.0 * expected_samples / largest_total, 0.05) << prefix;
  EXPECT_TRUE(page.zoomed);
  EXPECT_GE(page.search_matches, 1u);
  ExpectEveryLayout(SamplesPerPid(page.collapsed), "flamegraph");
  std::cout << "[ versions ] flame graph of " << largest_total << " samples; " << prefix << ": "
            << page.samples << " samples, " << page.percent << "%; screenshot " << screenshot
            << std::endl;
}

}  // namespace
}  // namespace pyperf_test
