// End-to-end tests of PyPerf on every CPython it supports (issue 5): pyenv's
// 2.7 .. 3.13 (shared libpython), Debian's /usr/bin/python3.11 (static,
// non-PIE), Debian trixie's 3.13.x and sid's 3.14 run as containers from the
// roots of scripts/python-roots.sh (own PID and mount namespaces, chroot),
// uWSGI embedding Debian's libpython3.11 through its python3 plugin, and a
// pyenv interpreter whose libpython was deleted after it started.
//
// The targets the selected tests need run at once and two PyPerf processes
// (--line-numbers first and current, native frames on) profile them together,
// as PyPerf does on a real host: a whole run of this program costs one BPF
// load per mode; under CTest, where each test is a process of its own, each
// test starts just its target. Per target:
//  - PythonFramesAreRight: calltree.py's threads (the uWSGI app's for uWSGI)
//    with the right frames in order: module, class, function, file as the
//    process sees it, line (the interpreter's own co_firstlineno, or the
//    executing line); host pids and container paths for the containers, the
//    deleted libpython's path, the plugin's libpython in a process named uwsgi;
//  - NativeFramesShowTheEvalLoop: _PyEval_EvalFrameDefault_[pn]
//    (PyEval_EvalFrameEx_[pn] on 2.7) under the busy thread's Python frames.
//
// Under PYPERF_TEST_STRICT=1 a missing interpreter, root or uWSGI fails its
// tests. The roots are built on first use (scripts/python-roots.sh, cached
// outside the repository).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "PythonFrameFormat.h"
#include "support/collapsed.h"
#include "support/e2e.h"
#include "support/python_roots.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

using std::chrono::seconds;

constexpr int kFrequencyHz = 499;
constexpr int kProfileSeconds = 2;
constexpr auto kReadyTimeout = seconds(60);
constexpr auto kPyPerfTimeout = seconds(120);
// Samples of a target's lines that may carry an error marker: the workloads
// share two cores with a dozen others, so allow some noise, not a pattern.
constexpr double kMaxErrorPercent = 2.0;

enum class TargetKind {
  kHost,        // an interpreter on the host running calltree.py
  kContainer,   // python3.X in a Debian root, as a container, running calltree.py
  kDeletedLib,  // pyenv's interpreter with its libpython copied, loaded, then deleted
  kUwsgi,       // uWSGI's python3 plugin running versions_uwsgi_app.py
};

struct Target {
  std::string name;  // test name suffix
  TargetKind kind;
  std::string spec;  // pyenv minor or interpreter path (host, deleted), suite (container)
};

const std::vector<Target>& Targets() {
  static const std::vector<Target> targets = {
      {"pyenv_2_7", TargetKind::kHost, "2.7"},
      {"pyenv_3_6", TargetKind::kHost, "3.6"},
      {"pyenv_3_7", TargetKind::kHost, "3.7"},
      {"pyenv_3_8", TargetKind::kHost, "3.8"},
      {"pyenv_3_9", TargetKind::kHost, "3.9"},
      {"pyenv_3_10", TargetKind::kHost, "3.10"},
      {"pyenv_3_11", TargetKind::kHost, "3.11"},
      {"pyenv_3_12", TargetKind::kHost, "3.12"},
      {"pyenv_3_13", TargetKind::kHost, "3.13"},
      {"debian_3_11", TargetKind::kHost, "/usr/bin/python3.11"},
      {"trixie_3_13_container", TargetKind::kContainer, "trixie"},
      {"sid_3_14_container", TargetKind::kContainer, "sid"},
      {"uwsgi_debian_3_11", TargetKind::kUwsgi, "/usr/bin/uwsgi"},
      {"pyenv_3_12_deleted_libpython", TargetKind::kDeletedLib, "3.12"},
  };
  return targets;
}

// --- Python sources: where calltree.py's functions and calls are ----------

class PythonSource {
 public:
  explicit PythonSource(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) lines_.push_back(line);
  }
  bool empty() const { return lines_.empty(); }

  // 1-based line of "def <function>(", 0 if none.
  int DefLine(const std::string& function) const {
    for (size_t i = 0; i < lines_.size(); ++i) {
      std::string s = Stripped(i + 1);
      if (s.rfind("def " + function + "(", 0) == 0) return static_cast<int>(i) + 1;
    }
    return 0;
  }
  // co_firstlineno: the first decorator's line, or the def's; 1 for the module.
  int FirstLine(const std::string& function) const {
    if (function == "<module>") return 1;
    int line = DefLine(function);
    while (line > 1 && Stripped(line - 1).rfind('@', 0) == 0) --line;
    return line;
  }
  // Last line of the function's body (the file's for the module).
  int LastLine(const std::string& function) const {
    if (function == "<module>") return static_cast<int>(lines_.size());
    int def = DefLine(function);
    if (def == 0) return -1;
    size_t indent = Indent(def);
    int last = def;
    for (int i = def + 1; i <= static_cast<int>(lines_.size()); ++i) {
      if (Stripped(i).empty()) continue;
      if (Indent(i) <= indent) break;
      last = i;
    }
    return last;
  }
  // The line of `function`'s body that is exactly `statement`, 0 if none.
  int StatementLine(const std::string& function, const std::string& statement) const {
    int begin = function == "<module>" ? 1 : DefLine(function) + 1;
    for (int i = begin; i <= LastLine(function) && i > 0; ++i)
      if (Stripped(i) == statement) return i;
    return 0;
  }

 private:
  std::string Stripped(size_t line) const {
    const std::string& s = lines_[line - 1];
    size_t b = s.find_first_not_of(" \t");
    if (b == std::string::npos) return "";
    return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
  }
  size_t Indent(size_t line) const { return lines_[line - 1].find_first_not_of(" \t"); }

  std::vector<std::string> lines_;
};

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
  // How to run this target's interpreter for a helper script (chrooted for a
  // container; Debian's python3.11 for uWSGI's libpython3.11).
  std::vector<std::string> python_argv;
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
    case TargetKind::kContainer: {
      std::string why;
      auto root = EnsurePythonRoot(target.spec, &why);
      if (!root) {
        run->unavailable = "no Debian " + target.spec + " root: " + why;
        return;
      }
      run->root_dir = std::make_unique<RootTempDir>(*root);
      run->script = run->root_dir->Copy(calltree, "calltree.py");
      run->host_script = run->root_dir->path() + "/calltree.py";
      run->python_argv = {"chroot", root->dir, root->python};
      run->process =
          std::make_unique<ChildProcess>(ContainerArgv(*root, {root->python, run->script}));
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
  if (!WaitForReady(*run->process, target.kind == TargetKind::kUwsgi)) {
    ADD_FAILURE() << target.name << " did not become ready; stdout:\n"
                  << run->process->Stdout() << "\nstderr:\n"
                  << run->process->Stderr();
    run->process.reset();
    return;
  }
  run->pid = run->process->pid();
  if (target.kind == TargetKind::kContainer) {
    // The ChildProcess is unshare; its one child is the interpreter, PID 1
    // inside the container, and PyPerf must report the host's pid.
    auto children = ChildPids(run->process->pid());
    if (children.size() != 1) {
      ADD_FAILURE() << target.name << ": unshare has " << children.size() << " children";
      run->process.reset();
      return;
    }
    run->pid = children[0];
  }
  if (target.kind == TargetKind::kDeletedLib && unlink(run->deleted_library.c_str()) != 0) {
    ADD_FAILURE() << "cannot delete " << run->deleted_library;
  }
}

struct Profiles {
  CollapsedProfile first, current;
  std::string first_stderr, current_stderr;
  std::string problem;  // why there are no profiles
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
    }
    if (pids.empty()) {
      profiles_.problem = "no target is running";
      return;
    }
    auto start = [&](const char* mode) {
      std::vector<std::string> argv = {PyPerfBinary(),
                                       "-v",
                                       "1",
                                       "-F",
                                       std::to_string(kFrequencyHz),
                                       "-d",
                                       std::to_string(kProfileSeconds),
                                       "--line-numbers",
                                       mode};
      argv.insert(argv.end(), pids.begin(), pids.end());
      return std::make_unique<ChildProcess>(argv);
    };
    auto first = start("first");
    auto current = start("current");
    for (auto* p : {first.get(), current.get()}) {
      if (!p->Wait(kPyPerfTimeout)) {
        p->Signal(SIGKILL);
        p->Wait(seconds(5));
        profiles_.problem += "PyPerf did not finish in time. ";
      } else if (p->ExitCode() != 0) {
        profiles_.problem += "PyPerf exited with " + std::to_string(p->ExitCode()) + ". ";
      }
    }
    profiles_.first = ParseCollapsed(first->Stdout());
    profiles_.current = ParseCollapsed(current->Stdout());
    profiles_.first_stderr = first->Stderr();
    profiles_.current_stderr = current->Stderr();
    if (!profiles_.problem.empty()) {
      profiles_.problem += "stderr (first):\n" + profiles_.first_stderr + "\nstderr (current):\n" +
                           profiles_.current_stderr;
    }
    for (const auto& [name, run] : running_) {
      if (run->process && !run->process->Running())
        dead_[name] = "died while profiled; stderr:\n" + run->process->Stderr();
    }
  }

  RunningTarget& Get(const std::string& name) { return *running_.at(name); }
  const Profiles& profiles() const { return profiles_; }
  std::string DeathOf(const std::string& name) const {
    auto it = dead_.find(name);
    return it == dead_.end() ? "" : it->second;
  }

 private:
  std::map<std::string, std::unique_ptr<RunningTarget>> running_;
  std::map<std::string, std::string> dead_;
  Profiles profiles_;
};

// --- Expectations ----------------------------------------------------------

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
  EXPECT_EQ(frame.module, pyperf::PythonModuleName(file));
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
  auto tids = profile.TidsWhere([&](const CollapsedLine& line) {
    return line.pid == pid &&
           std::any_of(line.frames.begin(), line.frames.end(), [&](const std::string& f) {
             return IsPythonFunction(f, function, class_name);
           });
  });
  EXPECT_EQ(tids.size(), 1u) << "threads of pid " << pid << " running " << function;
  return tids.size() == 1 ? profile.OfTid(tids[0]) : std::vector<CollapsedLine>{};
}

void ExpectWellFormed(const std::vector<CollapsedLine>& lines) {
  int reported = 0;
  for (const auto& line : lines) {
    if (reported >= 5) break;
    if (auto problem = FrameOrderProblem(line)) {
      ADD_FAILURE() << "frames out of order: " << *problem << "\n  in: " << line.text;
      ++reported;
    }
    for (const auto& frame : line.frames) {
      std::string why;
      if (KindOf(frame) == FrameKind::kPython && !ParsePythonFrame(frame, &why)) {
        ADD_FAILURE() << "badly spelled Python frame: " << why << "\n  in: " << line.text;
        ++reported;
      }
    }
  }
}

void ExpectFewErrorMarkers(const std::vector<CollapsedLine>& lines) {
  uint64_t total = SumCounts(lines), with_errors = 0;
  std::vector<CollapsedLine> examples;
  for (const auto& line : lines) {
    if (ErrorMarkers(line).empty()) continue;
    with_errors += line.count;
    examples.push_back(line);
  }
  EXPECT_LE(100.0 * static_cast<double>(with_errors), kMaxErrorPercent * static_cast<double>(total))
      << with_errors << " of " << total << " samples carry an error marker:" << Excerpt(examples);
}

// calltree.py's threads, in one --line-numbers mode.
void CheckCallTree(const CollapsedProfile& profile, const RunningTarget& run, bool current) {
  PythonSource source(run.host_script);
  ASSERT_FALSE(source.empty()) << "cannot read " << run.host_script;
  pid_t pid = run.pid;
  auto lines = profile.OfPid(pid);
  ASSERT_FALSE(lines.empty()) << "no samples of pid " << pid;
  ExpectWellFormed(lines);
  ExpectFewErrorMarkers(lines);

  {
    SCOPED_TRACE("main thread: <module> -> main_busy -> main_leaf");
    auto main_lines = profile.OfTid(pid);
    auto matching = LinesEndingWith(main_lines, {"<module>", "main_busy", "main_leaf"}, true);
    EXPECT_FALSE(matching.empty()) << "main thread's lines:" << Excerpt(main_lines);
    for (const auto& line : matching) {
      auto frames = PythonFramesOf(line);
      ExpectFrame(frames[0], source, run, current, "", "<module>", "main_busy()");
      ExpectFrame(frames[1], source, run, current, "", "main_busy", "main_leaf()");
      ExpectFrame(frames[2], source, run, current, "", "main_leaf");
    }
  }
  {
    SCOPED_TRACE("worker-method thread: threading bootstrap ... Worker.run -> Worker.spin");
    auto worker = ThreadLines(profile, pid, "run", "Worker");
    auto matching = LinesEndingWith(worker, {"run", "spin"}, false);
    EXPECT_FALSE(matching.empty()) << Excerpt(worker);
    for (const auto& line : matching) {
      auto frames = PythonFramesOf(line);
      size_t n = frames.size();
      ExpectFrame(frames[n - 2], source, run, current, "Worker", "run", "self.spin()");
      ExpectFrame(frames[n - 1], source, run, current, "Worker", "spin");
      EXPECT_EQ(frames[0].module, "threading") << line.text;
      EXPECT_EQ(frames[0].class_name, "Thread") << line.text;
      EXPECT_NE(frames[0].function.find("bootstrap"), std::string::npos) << line.text;
    }
  }
  {
    SCOPED_TRACE("worker-cls thread: Worker.class_spin (class from cls)");
    auto cls = ThreadLines(profile, pid, "class_spin", "Worker");
    auto matching = LinesEndingWith(cls, {"class_spin"}, false);
    EXPECT_FALSE(matching.empty()) << Excerpt(cls);
    for (const auto& line : matching)
      ExpectFrame(PythonFramesOf(line).back(), source, run, current, "Worker", "class_spin");
  }
  {
    SCOPED_TRACE("syscall-loop thread: syscall_loop");
    auto sys_lines = ThreadLines(profile, pid, "syscall_loop", "");
    auto matching = LinesEndingWith(sys_lines, {"syscall_loop"}, false);
    EXPECT_FALSE(matching.empty()) << Excerpt(sys_lines);
    for (const auto& line : matching)
      ExpectFrame(PythonFramesOf(line).back(), source, run, current, "", "syscall_loop");
  }
  {
    SCOPED_TRACE("deep-recursion thread: truncated, recurse ... deep_leaf");
    auto deep = ThreadLines(profile, pid, "deep_leaf", "");
    EXPECT_FALSE(deep.empty());
    for (const auto& line : deep) {
      EXPECT_TRUE(IsTruncated(line)) << line.text;
      auto frames = PythonFramesOf(line);
      ASSERT_GE(frames.size(), 80u) << line.text;
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
  auto lines = profile.OfPid(run.pid);
  ASSERT_FALSE(lines.empty()) << "no samples of uwsgi pid " << run.pid;
  ExpectWellFormed(lines);
  ExpectFewErrorMarkers(lines);
  auto crunch = ThreadLines(profile, run.pid, "loop", "Crunch");
  auto matching = LinesEndingWith(crunch, {"loop", "step"}, false);
  EXPECT_FALSE(matching.empty()) << Excerpt(lines);
  for (const auto& line : matching) {
    auto frames = PythonFramesOf(line);
    size_t n = frames.size();
    ExpectFrame(frames[n - 2], source, run, current, "Crunch", "loop", "self.step()");
    ExpectFrame(frames[n - 1], source, run, current, "Crunch", "step");
    EXPECT_NE(frames[0].function.find("bootstrap"), std::string::npos) << line.text;
  }
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
      if (info->should_run() && name.rfind('/') != std::string::npos)
        names.insert(name.substr(name.rfind('/') + 1));
    }
  }
  return names;
}

Session& TheSession() {
  if (!g_session) g_session = new Session(SelectedTargets());
  return *g_session;
}

void PrintTo(const Target& t, std::ostream* os) { *os << t.name; }

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
  std::string log = ProfilingLogLine(p.first_stderr, run.pid);
  EXPECT_NE(log.find(", /usr/bin/python3."), std::string::npos) << log;
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
  std::string eval =
      GetParam().spec == "2.7" ? "PyEval_EvalFrameEx_[pn]" : "_PyEval_EvalFrameDefault_[pn]";
  // Debian's 3.14 (sid) is stripped, and its eval loop's hot body is a static
  // function that only python3.14-dbgsym names: there the loop shows as an
  // address in the interpreter binary.
  bool unnamed_loop = GetParam().kind == TargetKind::kContainer && GetParam().spec == "sid";
  auto is_eval_loop = [&](const std::string& frame) {
    if (unnamed_loop) return frame.rfind("python3.14+0x", 0) == 0;
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
      << (unnamed_loop ? "a python3.14+0x... frame" : eval) << "; without:" << Excerpt(without, 3);
}

INSTANTIATE_TEST_SUITE_P(Targets, VersionsNativeE2E, ::testing::ValuesIn(Targets()),
                         TargetTestName);

}  // namespace
}  // namespace pyperf_test
