// Tests for ElfFile on real files: this test binary (symbols we define here,
// checked against their live addresses), pyenv's libpython builds and
// Debian's stripped, non-PIE /usr/bin/python3.11.
#include <elf.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <future>

#include "elf_file.h"
#include "proc_maps.h"
#include "support/test_support.h"

// Symbols with known content, found by name in this binary's own tables
// (extern "C" and `extern const` keep the names plain and global).
extern "C" {
__attribute__((used)) extern const char pyperf_elf_test_marker[] = "pyperf-elf-test-marker-7d1e";
__attribute__((used)) char pyperf_elf_test_writable[] = "pyperf-elf-test-writable-7d1e";
__attribute__((used)) long pyperf_elf_test_zeroed[64];
}
// A static: a local symbol, only in .symtab, under its mangled name.
__attribute__((used)) static long pyperf_elf_test_local = 0x1234567890abcdefL;
constexpr char kLocalSymbol[] = "_ZL21pyperf_elf_test_local";

namespace ebpf {
namespace {

using pyperf_test::RunCommand;

constexpr char kDebianPython[] = "/usr/bin/python3.11";

std::string SelfExe() {
  auto exe = ReadProcessExePath(getpid());
  return exe.ok() ? *exe : "/proc/self/exe";
}

// "Build ID: <hex>" as readelf prints it.
std::string ReadelfBuildId(const std::string& path) {
  auto result = RunCommand({"readelf", "-n", path});
  for (const auto& line : pyperf_test::SplitLines(result.out)) {
    size_t at = line.find("Build ID: ");
    if (at != std::string::npos) return line.substr(at + 10);
  }
  return "";
}

std::optional<std::string> PyenvLibpython(const std::string& minor) {
  auto interp = pyperf_test::PyenvInterpreter(minor);
  if (!interp) return std::nullopt;
  std::string lib = interp->path.substr(0, interp->path.rfind("/bin/")) + "/lib/";
  for (const char* suffix : {".so.1.0", "m.so.1.0"}) {
    std::string path = lib + "libpython" + minor + suffix;
    if (pyperf_test::FileExists(path)) return path;
  }
  return std::nullopt;
}

TEST(ElfFile, FindsOwnSymbolsAndTheirLiveAddresses) {
  auto elf = ElfFile::Open(SelfExe());
  ASSERT_TRUE(elf.ok()) << elf.error();
  EXPECT_TRUE(elf->type() == ET_DYN || elf->type() == ET_EXEC);
  EXPECT_TRUE(elf->has_symtab());

  auto marker = elf->FindSymbol("pyperf_elf_test_marker");
  ASSERT_TRUE(marker.has_value());
  EXPECT_EQ(marker->size, sizeof(pyperf_elf_test_marker));
  EXPECT_EQ(marker->type, STT_OBJECT);
  EXPECT_EQ(marker->binding, STB_GLOBAL);

  // Load bias from our own first mapping: bias + st_value is where the
  // marker really is.
  auto maps = ReadProcMaps(getpid());
  ASSERT_TRUE(maps.ok()) << maps.error();
  const MemoryMapping* first = nullptr;
  for (const auto& m : *maps) {
    if (m.path == elf->path() && (!first || m.start < first->start)) first = &m;
  }
  ASSERT_NE(first, nullptr);
  auto bias = elf->LoadBias(first->start, first->offset);
  ASSERT_TRUE(bias.has_value());
  EXPECT_EQ(*bias + marker->value, reinterpret_cast<uint64_t>(&pyperf_elf_test_marker));
  if (elf->type() == ET_EXEC) {
    EXPECT_EQ(*bias, 0u);
  }

  auto local = elf->FindSymbol(kLocalSymbol);
  ASSERT_TRUE(local.has_value());
  EXPECT_EQ(local->binding, STB_LOCAL);
  EXPECT_FALSE(local->dynamic);
  EXPECT_EQ(*bias + local->value, reinterpret_cast<uint64_t>(&pyperf_elf_test_local));

  EXPECT_FALSE(elf->FindSymbol("pyperf_elf_test_no_such_symbol").has_value());
}

TEST(ElfFile, ReadsInitialisedDataAndZeroedBss) {
  auto elf = ElfFile::Open(SelfExe());
  ASSERT_TRUE(elf.ok()) << elf.error();
  auto syms =
      elf->FindSymbols({"pyperf_elf_test_marker", kLocalSymbol, "pyperf_elf_test_zeroed", "nope"});
  ASSERT_EQ(syms.size(), 4u);
  ASSERT_TRUE(syms[0] && syms[1] && syms[2]);
  EXPECT_FALSE(syms[3]);

  char marker[sizeof(pyperf_elf_test_marker)];
  ASSERT_TRUE(elf->ReadAtVirtualAddress(syms[0]->value, marker, sizeof(marker)).ok());
  EXPECT_STREQ(marker, pyperf_elf_test_marker);

  long local = 0;
  ASSERT_TRUE(elf->ReadAtVirtualAddress(syms[1]->value, &local, sizeof(local)).ok());
  EXPECT_EQ(local, 0x1234567890abcdefL);

  // .bss lies past p_filesz: the file initialises it to zeros.
  pyperf_elf_test_zeroed[3] = 7;  // the live copy differs; the file's does not
  long zeroed[64];
  std::memset(zeroed, 0xff, sizeof(zeroed));
  ASSERT_TRUE(elf->ReadAtVirtualAddress(syms[2]->value, zeroed, sizeof(zeroed)).ok());
  for (long v : zeroed) EXPECT_EQ(v, 0);

  Status outside = elf->ReadAtVirtualAddress(~uint64_t{0} - 16, zeroed, 8);
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.message().find("not inside"), std::string::npos) << outside.message();
}

TEST(ElfFile, BuildIdMatchesReadelf) {
  std::string expected = ReadelfBuildId(SelfExe());
  if (expected.empty()) PYPERF_SKIP_OR_FAIL("readelf shows no build-id for " + SelfExe());
  auto elf = ElfFile::Open(SelfExe());
  ASSERT_TRUE(elf.ok()) << elf.error();
  EXPECT_EQ(elf->BuildId().value_or("<none>"), expected);
}

TEST(ElfFile, FindsStringsOnlyInReadOnlyData) {
  auto elf = ElfFile::Open(SelfExe());
  ASSERT_TRUE(elf.ok()) << elf.error();
  auto marker = elf->FindSymbol("pyperf_elf_test_marker");
  ASSERT_TRUE(marker);
  // Needles built at run time, so that they are not themselves in .rodata.
  const std::string marker_text = std::string("pyperf-elf-test-") + "marker-7d1e";
  const std::string writable_text = std::string("pyperf-elf-test-") + "writable-7d1e";
  auto found = elf->FindReadOnlyStrings([&](std::string_view s) { return s == marker_text; });
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].vaddr, marker->value);
  // A writable array lives in .data, which is not read-only data.
  EXPECT_TRUE(
      elf->FindReadOnlyStrings([&](std::string_view s) { return s == writable_text; }).empty());
  // The visitor can stop early.
  int visited = 0;
  elf->ForEachReadOnlyString([&](const ElfString&) { return ++visited < 3; });
  EXPECT_EQ(visited, 3);
}

TEST(ElfFile, SurvivesMove) {
  auto opened = ElfFile::Open(SelfExe());
  ASSERT_TRUE(opened.ok()) << opened.error();
  ElfFile moved = std::move(opened).value();
  ElfFile assigned = std::move(moved);
  auto marker = assigned.FindSymbol("pyperf_elf_test_marker");
  ASSERT_TRUE(marker.has_value());
  // The mapped image moved with it: its bytes are still readable.
  char text[sizeof(pyperf_elf_test_marker)];
  ASSERT_TRUE(assigned.ReadAtVirtualAddress(marker->value, text, sizeof(text)).ok());
  EXPECT_STREQ(text, pyperf_elf_test_marker);
}

TEST(ElfFile, ExplainsOpenErrors) {
  auto missing = ElfFile::Open("/nonexistent/pyperf/libnothing.so");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("/nonexistent/pyperf/libnothing.so"), std::string::npos);
  EXPECT_NE(missing.error().find("No such file"), std::string::npos) << missing.error();

  pyperf_test::TempDir dir;
  std::string text = dir.File("not-elf.txt");
  std::ofstream(text) << "just some text, long enough to look like a header......\n";
  auto not_elf = ElfFile::Open(text);
  ASSERT_FALSE(not_elf.ok());
  EXPECT_NE(not_elf.error().find("not an ELF file"), std::string::npos) << not_elf.error();
  EXPECT_NE(not_elf.error().find(text), std::string::npos);

  auto directory = ElfFile::Open(dir.path());
  ASSERT_FALSE(directory.ok());
  EXPECT_NE(directory.error().find(dir.path()), std::string::npos) << directory.error();
}

// A path that names a FIFO (a process can rename its files at will) is an
// error at once: a blocking open would wait for a writer forever.
TEST(ElfFile, AFifoIsAnErrorNotAHang) {
  pyperf_test::TempDir dir;
  const std::string fifo = dir.File("libpython3.11.so.1.0");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << strerror(errno);
  auto opening = std::async(std::launch::async, [&] { return ElfFile::Open(fifo); });
  if (opening.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "ElfFile::Open of a FIFO still waits after 10 s";
    int writer = open(fifo.c_str(), O_WRONLY);  // lets the open return
    if (writer >= 0) close(writer);
  }
  auto opened = opening.get();
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.error().find("not a regular file"), std::string::npos) << opened.error();
}

// Debian's python3.11 is non-PIE and stripped: the interpreter's symbols are
// only in .dynsym (it is linked with --export-dynamic).
TEST(ElfFile, ReadsStrippedNonPieExecutable) {
  if (!pyperf_test::FileExists(kDebianPython)) PYPERF_SKIP_OR_FAIL("no /usr/bin/python3.11");
  auto elf = ElfFile::Open(kDebianPython);
  ASSERT_TRUE(elf.ok()) << elf.error();
  EXPECT_EQ(elf->type(), ET_EXEC);
  EXPECT_FALSE(elf->has_symtab());
  auto runtime = elf->FindSymbol("_PyRuntime");
  ASSERT_TRUE(runtime.has_value());
  EXPECT_TRUE(runtime->dynamic);
  EXPECT_FALSE(elf->FindSymbol("interp_head").has_value());

  // A non-PIE executable mapped where it was linked has no bias.
  ASSERT_FALSE(elf->load_segments().empty());
  const ElfLoadSegment& first = elf->load_segments().front();
  EXPECT_EQ(elf->LoadBias(first.vaddr & ~uint64_t{0xfff}, first.offset & ~uint64_t{0xfff}),
            std::optional<uint64_t>(0));

  auto version = elf->FindSymbol("Py_Version");
  ASSERT_TRUE(version.has_value());
  uint64_t hex = 0;
  ASSERT_TRUE(elf->ReadAtVirtualAddress(version->value, &hex, 8).ok());
  EXPECT_EQ(hex >> 16, 0x030bu);
  EXPECT_EQ(elf->BuildId().value_or("<none>"), ReadelfBuildId(kDebianPython));
}

// pyenv's libpython keeps .symtab: static interpreter globals are found there.
TEST(ElfFile, FindsStaticSymbolsOnlyInSymtab) {
  auto lib = PyenvLibpython("2.7");
  if (!lib) PYPERF_SKIP_OR_FAIL("pyenv Python 2.7 with a shared libpython is not installed");
  auto elf = ElfFile::Open(*lib);
  ASSERT_TRUE(elf.ok()) << elf.error();
  EXPECT_EQ(elf->type(), ET_DYN);
  auto syms = elf->FindSymbols({"_PyThreadState_Current", "interp_head", "autoInterpreterState"});
  ASSERT_TRUE(syms[0] && syms[1] && syms[2]);
  EXPECT_TRUE(syms[0]->dynamic);
  EXPECT_FALSE(syms[1]->dynamic);
  EXPECT_EQ(syms[1]->binding, STB_LOCAL);
  EXPECT_FALSE(syms[2]->dynamic);
}

}  // namespace
}  // namespace ebpf
