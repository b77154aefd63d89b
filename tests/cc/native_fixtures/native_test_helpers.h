// Helpers shared by the native unwinding tests: starting a fixture process
// and waiting for its capture, and independent references (nm, addr2line,
// the captured maps) to check the unwinder's frames against.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "native_fixtures/native_snapshot_files.h"
#include "support/test_support.h"

namespace pyperf_fixture {

inline bool FixturesBuilt() {
  return pyperf_test::FileExists(FixtureDir() + "/native_fixture") &&
         pyperf_test::FileExists(FixtureDir() + "/stripped/libpyperf_fixture_c.so");
}

#define PYPERF_REQUIRE_NATIVE_FIXTURES()                                                     \
  do {                                                                                       \
    if (!::pyperf_fixture::FixturesBuilt())                                                  \
      PYPERF_SKIP_OR_FAIL("native fixtures not built in " + ::pyperf_fixture::FixtureDir() + \
                          " (tests/cc/CMakeLists.txt: add_subdirectory(native_fixtures))");  \
  } while (0)

// A fixture process that captured its stack and is parked, with its capture.
struct RunningCapture {
  pyperf_test::TempDir dir;
  std::unique_ptr<pyperf_test::ChildProcess> child;
  CapturedSnapshot snapshot;
  std::string capture_dir() const { return dir.path(); }
  // Kills the process and reaps it; the capture stays.
  void Kill() {
    child->Signal(SIGKILL);
    child->Wait(std::chrono::seconds(10));
  }
};

// Starts argv with PYPERF_CAPTURE_DIR set (plus env) and waits for the capture.
inline std::unique_ptr<RunningCapture> StartCapture(const std::vector<std::string>& argv,
                                                    std::map<std::string, std::string> env,
                                                    std::string* error) {
  auto run = std::make_unique<RunningCapture>();
  env["PYPERF_CAPTURE_DIR"] = run->dir.path();
  pyperf_test::ChildProcess::Options options;
  options.env = std::move(env);
  run->child = std::make_unique<pyperf_test::ChildProcess>(argv, options);
  if (!WaitForCapture(run->dir.path(), std::chrono::seconds(30))) {
    *error = "no capture from " + argv[0] + ": " + run->child->Stderr();
    return nullptr;
  }
  auto snap = ReadCapture(run->dir.path());
  if (!snap.ok()) {
    *error = snap.error();
    return nullptr;
  }
  run->snapshot = std::move(snap).value();
  return run;
}

// native_fixture --depth N [extra...] with one variant of the C library.
inline std::unique_ptr<RunningCapture> StartFixture(const std::string& variant, int depth,
                                                    std::string* error,
                                                    const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv = {FixtureDir() + "/native_fixture", "--depth",
                                   std::to_string(depth)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return StartCapture(argv, {{"LD_LIBRARY_PATH", FixtureLibraryPath(variant)}}, error);
}

// The base of the tests that unwind native_fixture processes: they skip (fail
// under PYPERF_TEST_STRICT=1) where the fixtures are not built.
class NativeFixtureTest : public ::testing::Test {
 protected:
  void SetUp() override { PYPERF_REQUIRE_NATIVE_FIXTURES(); }

  // StartFixture; null, with the reason as a test failure, if it did not capture.
  std::unique_ptr<RunningCapture> Start(const std::string& variant, int depth,
                                        const std::vector<std::string>& extra = {}) {
    std::string error;
    auto run = StartFixture(variant, depth, &error, extra);
    EXPECT_TRUE(run) << error;
    return run;
  }

  static std::vector<ebpf::NativeFrame> Unwind(ebpf::NativeUnwinder& unwinder,
                                                 const ebpf::NativeSnapshot& snapshot,
                                                 ebpf::NativeUnwindResult* result = nullptr) {
    std::vector<ebpf::NativeFrame> frames;
    ebpf::NativeUnwindResult r = unwinder.Unwind(snapshot, &frames);
    if (result) *result = r;
    return frames;
  }

  // One unwind by a new unwinder with `options`.
  static std::vector<ebpf::NativeFrame> UnwindOnce(
      const ebpf::NativeSnapshot& snapshot, const ebpf::NativeUnwinderOptions& options = {},
      ebpf::NativeUnwindResult* result = nullptr) {
    ebpf::NativeUnwinder unwinder(options);
    return Unwind(unwinder, snapshot, result);
  }
};

inline std::vector<std::string> Names(const std::vector<ebpf::NativeFrame>& frames) {
  std::vector<std::string> names;
  for (const auto& f : frames) names.push_back(f.name);
  return names;
}

inline std::string Join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += "  " + n + "\n";
  return out;
}

// Checks that an unwind of the fixture got past the capture and the C
// library's static function: frame 2 is pyperf_fixture_middle.
inline void ExpectFixtureMiddleAtFrame2(const std::vector<ebpf::NativeFrame>& frames) {
  ASSERT_GE(frames.size(), 3u) << Join(Names(frames));
  EXPECT_EQ(frames[2].name, "pyperf_fixture_middle");
}

inline std::string Hex(uint64_t v) {
  char buf[24];
  snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// The path of the mapping containing addr in a /proc/PID/maps text.
inline std::string MappedPath(const std::string& maps, uint64_t addr) {
  std::istringstream in(maps);
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long start, end;
    if (sscanf(line.c_str(), "%llx-%llx", &start, &end) != 2) continue;
    if (addr < start || addr >= end) continue;
    size_t slash = line.find('/');
    return slash == std::string::npos ? "" : line.substr(slash);
  }
  return "";
}

// The ELF virtual address (what nm and addr2line use) of runtime address
// `addr`, worked out from the maps text and readelf's program headers rather
// than from what the unwinder computed: the offset in the file the mapping
// gives, then the PT_LOAD segment holding that offset. Nullopt if no mapping
// or segment holds it.
inline std::optional<uint64_t> ElfAddressFromMaps(const std::string& maps, uint64_t addr) {
  std::istringstream in(maps);
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long start, end, offset;
    char perms[8];
    if (sscanf(line.c_str(), "%llx-%llx %7s %llx", &start, &end, perms, &offset) != 4) continue;
    if (addr < start || addr >= end) continue;
    size_t slash = line.find('/');
    if (slash == std::string::npos) return std::nullopt;
    uint64_t file_offset = addr - start + offset;
    auto headers = pyperf_test::RunCommand({"readelf", "-lW", line.substr(slash)});
    for (const auto& row : pyperf_test::SplitLines(headers.out)) {
      std::istringstream fields(row);
      std::string type, p_offset, p_vaddr, p_paddr, p_filesz;
      if (!(fields >> type >> p_offset >> p_vaddr >> p_paddr >> p_filesz) || type != "LOAD")
        continue;
      uint64_t seg_offset = std::stoull(p_offset, nullptr, 16);
      uint64_t seg_size = std::stoull(p_filesz, nullptr, 16);
      if (file_offset >= seg_offset && file_offset < seg_offset + seg_size)
        return file_offset - seg_offset + std::stoull(p_vaddr, nullptr, 16);
    }
    return std::nullopt;
  }
  return std::nullopt;
}

// Symbol extents by (demangled, unversioned) name, as binutils' nm reports
// them for a set of files: an independent reference for "the address lies
// inside the symbol that was printed".
class NmIndex {
 public:
  void Add(const std::string& file) {
    for (const char* dyn : {"", "-D"}) {
      std::vector<std::string> argv = {"nm", "-C", "-S", "--defined-only"};
      if (*dyn) argv.push_back(dyn);
      argv.push_back(file);
      auto r = pyperf_test::RunCommand(argv);
      for (const auto& line : pyperf_test::SplitLines(r.out)) {
        // "<start> <size> <type> <name...>"
        std::istringstream in(line);
        std::string start, size, type;
        if (!(in >> start >> size >> type)) continue;
        std::string name;
        std::getline(in, name);
        if (!name.empty() && name[0] == ' ') name.erase(0, 1);
        size_t at = name.find('@');
        if (at != std::string::npos) name.resize(at);
        if (type.size() != 1) continue;
        symbols_[name].emplace_back(std::stoull(start, nullptr, 16),
                                    std::stoull(size, nullptr, 16));
      }
    }
  }
  // Whether some symbol called `name` contains vaddr.
  bool Contains(const std::string& name, uint64_t vaddr) const {
    auto it = symbols_.find(name);
    if (it == symbols_.end()) return false;
    for (const auto& [start, size] : it->second) {
      if (vaddr >= start && vaddr < start + size) return true;
    }
    return false;
  }
  bool Has(const std::string& name) const { return symbols_.count(name) > 0; }

 private:
  std::map<std::string, std::vector<std::pair<uint64_t, uint64_t>>> symbols_;
};

// The files nm should read for a mapped module: the module itself, its debug
// file by build-id or .gnu_debuglink, and, for the fixture's C library
// variants, the unstripped build they were made from.
inline std::vector<std::string> ReferenceFilesFor(const std::string& module) {
  std::vector<std::string> files = {module};
  auto note = pyperf_test::RunCommand({"readelf", "-n", module}).out;
  size_t pos = note.find("Build ID: ");
  if (pos != std::string::npos) {
    std::string id = note.substr(pos + 10, note.find('\n', pos) - pos - 10);
    std::string debug =
        "/usr/lib/debug/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug";
    if (pyperf_test::FileExists(debug)) files.push_back(debug);
  }
  if (pyperf_test::FileExists(module + ".debug")) files.push_back(module + ".debug");
  if (module.find("/native_fixtures/") != std::string::npos &&
      module.find("libpyperf_fixture_c.so") != std::string::npos) {
    files.push_back(FixtureDir() + "/full/libpyperf_fixture_c.so");
  }
  return files;
}

// Checks that every symbolized frame's name really contains its address: the
// runtime address, turned into the file's own terms by ElfAddressFromMaps
// (not by the unwinder), must lie inside a symbol of that name per nm.
inline void ExpectNoFrameLies(const std::vector<ebpf::NativeFrame>& frames,
                              const std::string& maps) {
  std::map<std::string, NmIndex> by_module;
  for (const auto& f : frames) {
    if (!f.symbolized) continue;
    std::string module = MappedPath(maps, f.address);
    ASSERT_FALSE(module.empty()) << f.name;
    auto elf_address = ElfAddressFromMaps(maps, f.address);
    ASSERT_TRUE(elf_address.has_value())
        << f.name << " at " << Hex(f.address) << ": no PT_LOAD of " << module << " holds it";
    if (!by_module.count(module)) {
      for (const auto& file : ReferenceFilesFor(module)) by_module[module].Add(file);
    }
    std::string name = f.name.substr(0, f.name.find(" ("));  // --insert-dso-name suffix
    EXPECT_TRUE(by_module[module].Contains(name, *elf_address))
        << f.name << " at " << Hex(*elf_address) << " in " << module
        << " is outside every symbol of that name";
  }
}

// The function addr2line puts at an address of a file.
inline std::string Addr2LineFunction(const std::string& file, uint64_t vaddr) {
  auto r = pyperf_test::RunCommand({"addr2line", "-f", "-e", file, Hex(vaddr)});
  auto lines = pyperf_test::SplitLines(r.out);
  return lines.empty() ? "" : lines[0];
}

}  // namespace pyperf_fixture

// The tests that use these live in namespace ebpf, beside the code they
// test, and name them unqualified.
namespace ebpf {
using pyperf_fixture::FixtureDir;
using pyperf_fixture::Join;
using pyperf_fixture::Names;
}  // namespace ebpf
