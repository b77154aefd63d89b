// Tests for PythonProcess: real interpreters (pyenv 2.7 to 3.13 with a shared
// libpython, Debian's static, stripped, non-PIE python3.11, trixie's 3.13 in a
// chroot) run a sleep loop;
// the detected version, module and symbol addresses are checked against what
// the interpreter prints and against its live memory (process_vm_readv).
#include <gtest/gtest.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "PythonProcess.h"
#include "elf_file.h"
#include "elf_image_cache.h"
#include "proc_maps.h"
#include "process_unwind_state.h"
#include "support/python_roots.h"
#include "support/test_support.h"
#include "target_process.h"

namespace ebpf::pyperf {
namespace {

using pyperf_test::ChildProcess;
using pyperf_test::TempDir;

constexpr char kDebianPython[] = "/usr/bin/python3.11";

// What the workload printed about itself.
struct ReportedVersion {
  PythonVersion version;
  uint64_t hexversion = 0;
};

// Starts proc_sleep_loop.py and waits for its READY line.
std::optional<ReportedVersion> StartWorkload(ChildProcess& child) {
  std::optional<ReportedVersion> reported;
  pyperf_test::WaitFor(
      [&] {
        std::istringstream out(child.Stdout());
        std::string ready, version;
        if (!(out >> ready >> version) || ready != "READY") return !child.Running();
        ReportedVersion r;
        if (sscanf(version.c_str(), "%d.%d.%d", &r.version.major, &r.version.minor,
                   &r.version.micro) != 3 ||
            !(out >> r.hexversion)) {
          return false;
        }
        reported = r;
        return true;
      },
      std::chrono::seconds(30));
  return reported;
}

std::vector<std::string> WorkloadArgv(const std::string& python) {
  return {python, pyperf_test::WorkloadPath("proc_sleep_loop.py")};
}

Status ReadRemote(pid_t pid, uint64_t addr, void* out, size_t size) {
  struct iovec local = {out, size};
  struct iovec remote = {reinterpret_cast<void*>(addr), size};
  ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
  if (n != static_cast<ssize_t>(size)) {
    return Status::Error(std::string("process_vm_readv: ") + strerror(errno));
  }
  return Status::Ok();
}

std::string RealPath(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) ? std::string(buf) : path;
}

// True if `addr` is in a writable mapping of the module, or in the anonymous
// mapping right after it (its .bss beyond the last file page).
bool InWritableDataOf(const std::vector<MemoryMapping>& maps, const std::string& module_path,
                      uint64_t addr) {
  for (size_t i = 0; i < maps.size(); ++i) {
    const MemoryMapping& m = maps[i];
    if (!m.contains(addr) || !m.writable()) continue;
    if (m.path == module_path) return true;
    if (m.path.empty() && i > 0 && maps[i - 1].path == module_path && maps[i - 1].end == m.start) {
      return true;
    }
  }
  return false;
}

// One interpreter the tests run.
struct InterpreterCase {
  std::string name;   // test name suffix
  std::string minor;  // pyenv minor, "" for the system interpreter
  std::string system_path;
};

std::ostream& operator<<(std::ostream& os, const InterpreterCase& c) { return os << c.name; }

struct ResolvedInterpreter {
  std::string python;
  std::string expected_module;  // real path of the file holding the interpreter
  bool module_is_executable = false;
};

std::optional<ResolvedInterpreter> Resolve(const InterpreterCase& c) {
  if (!c.system_path.empty()) {
    if (!pyperf_test::FileExists(c.system_path)) return std::nullopt;
    return ResolvedInterpreter{c.system_path, RealPath(c.system_path), true};
  }
  auto interp = pyperf_test::PyenvInterpreter(c.minor);
  if (!interp) return std::nullopt;
  std::string lib = interp->path.substr(0, interp->path.rfind("/bin/")) + "/lib/";
  for (const char* suffix : {".so.1.0", "m.so.1.0"}) {
    std::string path = lib + "libpython" + c.minor + suffix;
    if (pyperf_test::FileExists(path))
      return ResolvedInterpreter{interp->path, RealPath(path), false};
  }
  return std::nullopt;
}

// The interpreter run with a copy of its libpython (through LD_LIBRARY_PATH),
// a file of the test's own: to delete, or that no earlier test has read.
struct CopiedLibpythonWorkload {
  CopiedLibpythonWorkload(const ResolvedInterpreter& interp, const std::string& name)
      : copy(dir.File(name)),
        copied(pyperf_test::RunCommand({"cp", interp.expected_module, copy}).exit_code == 0),
        child(WorkloadArgv(interp.python), Options(dir)),
        reported(copied ? StartWorkload(child) : std::nullopt) {}
  static ChildProcess::Options Options(const TempDir& dir) {
    ChildProcess::Options options;
    options.env["LD_LIBRARY_PATH"] = dir.path();
    return options;
  }
  TempDir dir;
  std::string copy;
  bool copied;
  ChildProcess child;
  std::optional<ReportedVersion> reported;
};

class PythonProcessTest : public ::testing::TestWithParam<InterpreterCase> {};

TEST_P(PythonProcessTest, DetectsVersionModuleAndSymbols) {
  auto interp = Resolve(GetParam());
  if (!interp) PYPERF_SKIP_OR_FAIL("interpreter not installed: " + GetParam().name);
  ChildProcess child(WorkloadArgv(interp->python));
  auto reported = StartWorkload(child);
  ASSERT_TRUE(reported) << "workload did not start: " << child.Stderr();

  auto info = InspectPythonProcess(child.pid());
  ASSERT_TRUE(info.ok()) << info.error();
  const PythonVersion& v = reported->version;
  EXPECT_EQ(info->version, v) << info->version.ToString() << " vs " << v.ToString();
  // The interpreter's sys.hexversion names the release its sys.version_info does.
  EXPECT_EQ(PythonVersion::FromHex(reported->hexversion), v)
      << std::hex << reported->hexversion << " vs " << v.ToString();
  EXPECT_EQ(info->pid, child.pid());
  EXPECT_EQ(info->start_time, ReadProcessStartTime(child.pid()).value());
  EXPECT_EQ(info->version_source, v.AtLeast(3, 11) ? PythonVersionSource::kPyVersionSymbol
                                                   : PythonVersionSource::kVersionString);

  const PythonModule& module = info->module;
  EXPECT_EQ(RealPath(module.path), interp->expected_module);
  EXPECT_EQ(module.is_main_executable, interp->module_is_executable);
  EXPECT_FALSE(module.deleted);
  EXPECT_EQ(module.host_path, "/proc/" + std::to_string(child.pid()) + "/root" + module.path);
  EXPECT_FALSE(module.build_id.empty());
  if (interp->module_is_executable && GetParam().system_path == kDebianPython) {
    EXPECT_EQ(module.load_bias, 0u) << "Debian's python3.11 is not PIE";
  }

  // The module's ELF header is at its start address.
  char magic[4];
  ASSERT_TRUE(ReadRemote(child.pid(), module.start, magic, 4).ok());
  EXPECT_EQ(std::memcmp(magic,
                        "\x7f"
                        "ELF",
                        4),
            0);

  auto maps = ReadProcMaps(child.pid());
  ASSERT_TRUE(maps.ok()) << maps.error();
  const PythonSymbolAddresses& syms = info->symbols;
  if (v.AtLeast(3, 7)) {
    ASSERT_TRUE(syms.py_runtime.has_value());
    EXPECT_TRUE(InWritableDataOf(*maps, module.path, *syms.py_runtime))
        << std::hex << "_PyRuntime at 0x" << *syms.py_runtime;
    EXPECT_FALSE(syms.thread_state_current.has_value());
  } else {
    EXPECT_FALSE(syms.py_runtime.has_value());
    ASSERT_TRUE(syms.thread_state_current.has_value());
    EXPECT_TRUE(InWritableDataOf(*maps, module.path, *syms.thread_state_current));
    // pyenv's libpython keeps .symtab, where these static globals live.
    ASSERT_TRUE(syms.interp_head.has_value());
    ASSERT_TRUE(syms.auto_interpreter_state.has_value());
    EXPECT_TRUE(InWritableDataOf(*maps, module.path, *syms.interp_head));
    // Once initialised, interp_head points at the (only) interpreter.
    uint64_t interp_head = 0;
    ASSERT_TRUE(ReadRemote(child.pid(), *syms.interp_head, &interp_head, 8).ok());
    EXPECT_NE(interp_head, 0u);
  }
  // PyCode_Type's tp_name (after the 24-byte PyVarObject head) is "code".
  ASSERT_TRUE(syms.py_code_type.has_value());
  uint64_t tp_name = 0;
  ASSERT_TRUE(ReadRemote(child.pid(), *syms.py_code_type + 24, &tp_name, 8).ok());
  char name[5] = {};
  ASSERT_TRUE(ReadRemote(child.pid(), tp_name, name, 5).ok());
  EXPECT_STREQ(name, "code");
  if (v.AtLeast(3, 11)) {
    ASSERT_TRUE(syms.py_version.has_value());
    uint64_t live = 0;
    ASSERT_TRUE(ReadRemote(child.pid(), *syms.py_version, &live, sizeof(live)).ok());
    EXPECT_EQ(live, reported->hexversion) << std::hex << live << " vs " << reported->hexversion;
  } else {
    EXPECT_FALSE(syms.py_version.has_value());
  }
}

// Load-bias math for any version: a read-only table read from the file and
// from the live process at bias + st_value must agree.
TEST_P(PythonProcessTest, LoadBiasMatchesLiveMemory) {
  auto interp = Resolve(GetParam());
  if (!interp) PYPERF_SKIP_OR_FAIL("interpreter not installed: " + GetParam().name);
  ChildProcess child(WorkloadArgv(interp->python));
  ASSERT_TRUE(StartWorkload(child)) << "workload did not start: " << child.Stderr();
  auto info = InspectPythonProcess(child.pid());
  ASSERT_TRUE(info.ok()) << info.error();

  auto elf = ElfFile::Open(info->module.host_path);
  ASSERT_TRUE(elf.ok()) << elf.error();
  auto table = elf->FindSymbol("_Py_ctype_table");
  ASSERT_TRUE(table.has_value());
  ASSERT_EQ(table->size, 1024u);
  std::vector<char> in_file(table->size), in_memory(table->size);
  ASSERT_TRUE(elf->ReadAtVirtualAddress(table->value, in_file.data(), in_file.size()).ok());
  ASSERT_TRUE(ReadRemote(child.pid(), info->module.load_bias + table->value, in_memory.data(),
                         in_memory.size())
                  .ok());
  EXPECT_EQ(in_file, in_memory);
}

// Below 3.11 the version comes from PY_VERSION in the read-only data, which
// pyenv's linker merged into the tail of the install prefix string.
TEST_P(PythonProcessTest, VersionStringsIncludeTheInterpreters) {
  auto interp = Resolve(GetParam());
  if (!interp) PYPERF_SKIP_OR_FAIL("interpreter not installed: " + GetParam().name);
  auto printed = pyperf_test::RunCommand(
      {interp->python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"});
  ASSERT_EQ(printed.exit_code, 0) << printed.err;
  PythonVersion expected;
  ASSERT_EQ(
      sscanf(printed.out.c_str(), "%d.%d.%d", &expected.major, &expected.minor, &expected.micro),
      3);
  auto elf = ElfFile::Open(interp->expected_module);
  ASSERT_TRUE(elf.ok()) << elf.error();
  auto versions = FindPythonVersionStrings(*elf);
  EXPECT_NE(std::find(versions.begin(), versions.end(), expected), versions.end())
      << expected.ToString() << " not among " << versions.size() << " version strings";
}

INSTANTIATE_TEST_SUITE_P(Interpreters, PythonProcessTest,
                         ::testing::Values(InterpreterCase{"pyenv_2_7", "2.7", ""},
                                           InterpreterCase{"pyenv_3_6", "3.6", ""},
                                           InterpreterCase{"pyenv_3_7", "3.7", ""},
                                           InterpreterCase{"pyenv_3_8", "3.8", ""},
                                           InterpreterCase{"pyenv_3_9", "3.9", ""},
                                           InterpreterCase{"pyenv_3_10", "3.10", ""},
                                           InterpreterCase{"pyenv_3_11", "3.11", ""},
                                           InterpreterCase{"pyenv_3_12", "3.12", ""},
                                           InterpreterCase{"pyenv_3_13", "3.13", ""},
                                           InterpreterCase{"debian_3_11", "", kDebianPython}),
                         [](const ::testing::TestParamInfo<InterpreterCase>& info) {
                           return info.param.name;
                         });

TEST(InspectPythonProcess, RejectsNonPythonProcess) {
  ChildProcess child({"sleep", "100"});
  ASSERT_TRUE(pyperf_test::WaitFor(
      [&] {
        auto exe = ReadProcessExePath(child.pid());
        return exe.ok() && exe->find("sleep") != std::string::npos;
      },
      std::chrono::seconds(10)));
  auto info = InspectPythonProcess(child.pid());
  ASSERT_FALSE(info.ok());
  EXPECT_NE(info.error().find("not a Python process"), std::string::npos) << info.error();

  // Nor is this test binary, nor a pid that does not exist.
  EXPECT_FALSE(InspectPythonProcess(getpid()).ok());
  auto missing = InspectPythonProcess(0x3fffffff);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("1073741823"), std::string::npos) << missing.error();
}

// The interpreter's shared library is deleted while the process runs (as a
// package upgrade does): it is still read through /proc/PID/map_files.
TEST(InspectPythonProcess, ReadsDeletedLibpythonThroughMapFiles) {
  auto interp = Resolve(InterpreterCase{"pyenv_3_11", "3.11", ""});
  if (!interp) PYPERF_SKIP_OR_FAIL("pyenv Python 3.11 is not installed");
  CopiedLibpythonWorkload workload(*interp, "libpython3.11.so.1.0");
  ASSERT_TRUE(workload.reported) << workload.child.Stderr();
  const std::string& copy = workload.copy;
  ChildProcess& child = workload.child;
  const ReportedVersion* reported = &*workload.reported;
  ASSERT_EQ(unlink(copy.c_str()), 0);

  auto info = InspectPythonProcess(child.pid());
  ASSERT_TRUE(info.ok()) << info.error();
  EXPECT_EQ(info->module.path, copy);
  EXPECT_TRUE(info->module.deleted);
  EXPECT_EQ(info->module.host_path.rfind("/proc/" + std::to_string(child.pid()) + "/map_files/", 0),
            0u)
      << info->module.host_path;
  EXPECT_EQ(info->version, reported->version);
  ASSERT_TRUE(info->symbols.py_version.has_value());
  uint64_t live = 0;
  ASSERT_TRUE(ReadRemote(child.pid(), *info->symbols.py_version, &live, sizeof(live)).ok());
  EXPECT_EQ(live, reported->hexversion);
}

// libpython in a tmpfs that only the process's own mount namespace sees (as
// in a container): found through /proc/PID/root.
TEST(InspectPythonProcess, ReadsLibpythonInAnotherMountNamespace) {
  auto interp = Resolve(InterpreterCase{"pyenv_3_10", "3.10", ""});
  if (!interp) PYPERF_SKIP_OR_FAIL("pyenv Python 3.10 is not installed");
  TempDir dir;
  std::string mountpoint = dir.File("private");
  ASSERT_EQ(mkdir(mountpoint.c_str(), 0755), 0);
  std::string lib = mountpoint + "/libpython3.10.so.1.0";
  ChildProcess child({"unshare", "--mount", "--propagation", "private", "sh", "-c",
                      "mount -t tmpfs none '" + mountpoint + "' && cp '" + interp->expected_module +
                          "' '" + lib + "' && LD_LIBRARY_PATH='" + mountpoint + "' exec '" +
                          interp->python + "' '" + pyperf_test::WorkloadPath("proc_sleep_loop.py") +
                          "'"});
  auto reported = StartWorkload(child);
  if (!reported) {
    PYPERF_SKIP_OR_FAIL("cannot run a process in a private mount namespace: " + child.Stderr());
  }
  ASSERT_FALSE(pyperf_test::FileExists(lib)) << "the host should not see the private tmpfs";

  auto info = InspectPythonProcess(child.pid());
  ASSERT_TRUE(info.ok()) << info.error();
  EXPECT_EQ(info->module.path, lib);
  EXPECT_EQ(info->module.host_path, "/proc/" + std::to_string(child.pid()) + "/root" + lib);
  EXPECT_EQ(info->version, reported->version);
  ASSERT_TRUE(info->symbols.py_runtime.has_value());
}

// A chrooted process (Debian trixie's 3.13 in its root, as a container): maps
// names its files with the chroot directory in front; the module is named as
// the process sees it and opened through /proc/PID/root.
TEST(InspectPythonProcess, NamesTheModuleAsAChrootedProcessSeesIt) {
  std::string why;
  auto root = pyperf_test::EnsurePythonRoot("trixie", &why);
  if (!root) PYPERF_SKIP_OR_FAIL("no Debian trixie root: " + why);
  pyperf_test::RootTempDir dir(*root);
  std::string script = dir.Copy(pyperf_test::WorkloadPath("proc_sleep_loop.py"), "sleep.py");
  ChildProcess container(pyperf_test::ContainerArgv(*root, {root->python, script}));
  auto reported = StartWorkload(container);
  ASSERT_TRUE(reported) << container.Stderr();
  auto children = pyperf_test::ChildPids(container.pid());
  ASSERT_EQ(children.size(), 1u);
  pid_t pid = children[0];

  auto info = InspectPythonProcess(pid);
  ASSERT_TRUE(info.ok()) << info.error();
  EXPECT_EQ(info->module.path, root->python);
  EXPECT_TRUE(info->module.is_main_executable);
  EXPECT_EQ(info->module.host_path, "/proc/" + std::to_string(pid) + "/root" + root->python);
  EXPECT_EQ(info->version, reported->version);
  ASSERT_TRUE(info->symbols.py_runtime.has_value());
}

TEST(PythonProcessInspector, CachesPerFileAndFindsProcesses) {
  auto interp = Resolve(InterpreterCase{"pyenv_3_9", "3.9", ""});
  if (!interp) PYPERF_SKIP_OR_FAIL("pyenv Python 3.9 is not installed");
  ChildProcess first(WorkloadArgv(interp->python));
  ChildProcess second(WorkloadArgv(interp->python));
  ASSERT_TRUE(StartWorkload(first)) << first.Stderr();
  ASSERT_TRUE(StartWorkload(second)) << second.Stderr();

  PythonProcessInspector inspector;
  auto a = inspector.Inspect(first.pid());
  ASSERT_TRUE(a.ok()) << a.error();
  size_t cached = inspector.cached_files();
  EXPECT_GE(cached, 1u);
  auto b = inspector.Inspect(second.pid());
  ASSERT_TRUE(b.ok()) << b.error();
  EXPECT_EQ(inspector.cached_files(), cached) << "the same executable and libpython again";
  EXPECT_EQ(a->version, b->version);
  EXPECT_EQ(a->module.path, b->module.path);
  // Same file, each at its own address.
  EXPECT_EQ(*a->symbols.py_runtime - a->module.load_bias,
            *b->symbols.py_runtime - b->module.load_bias);

  auto all = inspector.FindPythonProcesses();
  auto has = [&](pid_t pid) {
    for (const auto& info : all) {
      if (info.pid == pid) return true;
    }
    return false;
  };
  EXPECT_TRUE(has(first.pid()));
  EXPECT_TRUE(has(second.pid()));
  EXPECT_FALSE(has(getpid()));
}

// Python detection and native unwinding read the same libpython: it is parsed
// once (ElfImageCache), and the native module is built on detection's parse.
TEST(PythonProcessInspector, SharesItsParseOfLibpythonWithNativeUnwinding) {
  auto interp = Resolve(InterpreterCase{"pyenv_3_11", "3.11", ""});
  if (!interp) PYPERF_SKIP_OR_FAIL("pyenv Python 3.11 is not installed");
  // A fresh copy: a file no earlier test has parsed.
  CopiedLibpythonWorkload workload(*interp, "libpython3.11.so.1.0");
  ASSERT_TRUE(workload.reported) << workload.child.Stderr();
  const std::string& copy = workload.copy;

  ElfImageCache& images = ElfImageCache::Shared();
  const uint64_t parses_before = images.stats().parses;
  PythonProcessInspector inspector;
  auto info = inspector.Inspect(workload.child.pid());
  ASSERT_TRUE(info.ok()) << info.error();
  ASSERT_EQ(info->module.path, copy);
  const uint64_t parses_detected = images.stats().parses;
  // The copy, and the executable unless an earlier test parsed it.
  EXPECT_GE(parses_detected - parses_before, 1u);
  EXPECT_LE(parses_detected - parses_before, 2u);

  // The native unwinder's load of the module, as on a first sample.
  auto live = LiveProcess::Attach(workload.child.pid());
  ASSERT_TRUE(live.ok()) << live.error();
  std::string maps_buffer;
  auto state = ProcessUnwindState::Create(std::move(live).value(), &maps_buffer);
  ASSERT_TRUE(state.ok()) << state.error();
  const ExecMapping* code = nullptr;
  for (const ExecMapping& m : (*state)->maps) {
    if ((*state)->path(m) == copy) code = &m;
  }
  ASSERT_NE(code, nullptr) << "no executable mapping of " << copy;
  auto module = (*state)->LoadModule(*code, /*load_symbols=*/true);
  ASSERT_TRUE(module.ok()) << module.error();
  EXPECT_EQ(images.stats().parses, parses_detected) << "libpython parsed again for native frames";
  EXPECT_FALSE((*module)->symbols().empty());

  // One image: the module's bytes are detection's mapping of the file.
  auto image = images.GetPath(info->module.host_path);
  ASSERT_TRUE(image.ok()) << image.error();
  EXPECT_EQ((*module)->image().bytes().data(), (*image)->bytes().data());
  EXPECT_EQ(images.stats().parses, parses_detected);
}

}  // namespace
}  // namespace ebpf::pyperf
