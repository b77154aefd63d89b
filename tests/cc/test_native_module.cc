// Tests for NativeModule and native frame names: symbol sources (.symtab,
// debug files by debuglink and build-id, .gnu_debugdata, .dynsym), the size
// rule, load bias removal and frame-name formatting, on the fixture library
// built in several distro-like variants.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "debug_file.h"
#include "native_fixtures/native_test_helpers.h"
#include "native_frame_name.h"
#include "native_module.h"
#include "proc_maps.h"
#include "support/test_support.h"

namespace ebpf {
namespace {

namespace fs = std::filesystem;

std::string Lib(const std::string& variant) {
  return FixtureDir() + "/" + variant + "/libpyperf_fixture_c.so";
}

// Start and size of a symbol per nm on the unstripped build.
std::pair<uint64_t, uint64_t> NmSymbol(const std::string& name) {
  auto r = pyperf_test::RunCommand({"nm", "-S", "--defined-only", Lib("full")});
  for (const auto& line : pyperf_test::SplitLines(r.out)) {
    char start[32], size[32], type[4], sym[256];
    if (sscanf(line.c_str(), "%31s %31s %3s %255s", start, size, type, sym) == 4 && name == sym) {
      return {std::stoull(start, nullptr, 16), std::stoull(size, nullptr, 16)};
    }
  }
  return {0, 0};
}

std::unique_ptr<NativeModule> Load(const std::string& path, NativeModuleLoadOptions options = {}) {
  if (options.path_in_root.empty()) options.path_in_root = path;
  auto module = NativeModule::LoadFromPath(path, options);
  EXPECT_TRUE(module.ok()) << module.error();
  return module.ok() ? std::move(module).value() : nullptr;
}

std::string NameAt(const NativeModule& module, uint64_t vaddr) {
  const NativeModuleSymbol* s = module.FindSymbol(vaddr);
  return s ? std::string(module.SymbolName(*s)) : "";
}

class NativeModuleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PYPERF_REQUIRE_NATIVE_FIXTURES();
    static_step_ = NmSymbol("fixture_static_step");
    middle_ = NmSymbol("pyperf_fixture_middle");
    ASSERT_NE(static_step_.second, 0u);
    ASSERT_NE(middle_.second, 0u);
  }
  std::pair<uint64_t, uint64_t> static_step_, middle_;
};

TEST_F(NativeModuleTest, NamesStaticFunctionFromSymtabOnlyInsideItsSize) {
  auto module = Load(Lib("full"));
  ASSERT_TRUE(module);
  EXPECT_EQ(module->best_source(), SymbolSource::kSymtab);
  auto [start, size] = static_step_;
  EXPECT_EQ(NameAt(*module, start), "fixture_static_step");
  EXPECT_EQ(NameAt(*module, start + size - 1), "fixture_static_step");
  const NativeModuleSymbol* s = module->FindSymbol(start + 1);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->size, size);
  EXPECT_NE(NameAt(*module, start + size), "fixture_static_step");
}

TEST_F(NativeModuleTest, StrippedLibraryNamesOnlyExportedSymbols) {
  auto module = Load(Lib("stripped"));
  ASSERT_TRUE(module);
  EXPECT_EQ(module->best_source(), SymbolSource::kDynsym);
  // The static function follows an exported one; "nearest symbol before"
  // would call it pyperf_fixture_exported_before+0x5.
  EXPECT_EQ(NameAt(*module, static_step_.first + 4), "");
  EXPECT_EQ(NameAt(*module, middle_.first + 4), "pyperf_fixture_middle");

  std::string name;
  EXPECT_FALSE(
      FormatNativeFrameName(module.get(), Lib("stripped"), static_step_.first + 4, false, &name));
  EXPECT_EQ(name, "libpyperf_fixture_c.so+" + pyperf_fixture::Hex(static_step_.first + 4));
  // The address is in the file's own terms: addr2line on the same code finds it.
  EXPECT_EQ(pyperf_fixture::Addr2LineFunction(Lib("full"), static_step_.first + 4),
            "fixture_static_step");
}

TEST_F(NativeModuleTest, FindsDebugFileThroughDebuglink) {
  auto module = Load(Lib("debuglink"));
  ASSERT_TRUE(module);
  EXPECT_EQ(module->best_source(), SymbolSource::kDebugFile);
  EXPECT_EQ(module->debug_file(), Lib("debuglink") + ".debug");
  EXPECT_EQ(NameAt(*module, static_step_.first + 4), "fixture_static_step");
}

TEST_F(NativeModuleTest, RejectsDebugFileOfAnotherBuild) {
  // Same debuglink name, but the debug file of a build with another build-id.
  pyperf_test::TempDir dir;
  fs::copy_file(Lib("debuglink"), dir.File("libpyperf_fixture_c.so"));
  fs::copy_file(FixtureDir() + "/buildid/debug/libpyperf_fixture_c.so.debug",
                dir.File("libpyperf_fixture_c.so.debug"));
  auto module = Load(dir.File("libpyperf_fixture_c.so"));
  ASSERT_TRUE(module);
  EXPECT_EQ(module->best_source(), SymbolSource::kDynsym);
  EXPECT_EQ(NameAt(*module, static_step_.first + 4), "");
}

TEST_F(NativeModuleTest, FindsDebugFileByBuildIdUnderTheProcessRoot) {
  auto plain = Load(Lib("buildid"));
  ASSERT_TRUE(plain);
  const std::string id = plain->build_id();
  ASSERT_EQ(id, "70797065726602");
  EXPECT_EQ(NameAt(*plain, static_step_.first + 4), "");

  // A container's own /usr/lib/debug, reached through its root.
  pyperf_test::TempDir root;
  fs::path debug = fs::path(root.path()) / "usr/lib/debug/.build-id" / id.substr(0, 2) /
                   (id.substr(2) + ".debug");
  fs::create_directories(debug.parent_path());
  fs::copy_file(FixtureDir() + "/buildid/debug/libpyperf_fixture_c.so.debug", debug);
  NativeModuleLoadOptions options;
  options.root = root.path();
  options.path_in_root = "/usr/lib/libpyperf_fixture_c.so";
  options.search_host_debug_dirs = false;
  auto module = Load(Lib("buildid"), options);
  ASSERT_TRUE(module);
  EXPECT_EQ(module->best_source(), SymbolSource::kDebugFile);
  EXPECT_EQ(module->debug_file(), debug.string());
  EXPECT_EQ(NameAt(*module, static_step_.first + 4), "fixture_static_step");
}

TEST_F(NativeModuleTest, ReadsMiniDebugInfoFromGnuDebugdata) {
  if (!pyperf_test::FileExists(Lib("minidebug"))) PYPERF_SKIP_OR_FAIL("no minidebug variant");
  auto module = Load(Lib("minidebug"));
  ASSERT_TRUE(module);
  EXPECT_EQ(module->best_source(), SymbolSource::kDebugData);
  EXPECT_EQ(NameAt(*module, static_step_.first + 4), "fixture_static_step");
  EXPECT_EQ(NameAt(*module, middle_.first + 4), "pyperf_fixture_middle");  // from .dynsym
}

TEST_F(NativeModuleTest, FileOffsetsBecomeElfAddresses) {
  // The library is linked at 0x200000: file offsets and ELF addresses differ.
  auto module = Load(Lib("full"));
  ASSERT_TRUE(module);
  uint64_t vaddr = static_step_.first;
  ASSERT_GE(vaddr, 0x200000u);
  auto back = module->FileOffsetToVaddr(vaddr - 0x200000);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, vaddr);
}

TEST_F(NativeModuleTest, LocatesEhFrameHdrSearchTable) {
  auto module = Load(Lib("stripped"));
  ASSERT_TRUE(module);
  const UnwindTableLocation& table = module->unwind_table();
  ASSERT_TRUE(table.usable);
  auto r = pyperf_test::RunCommand({"readelf", "-SW", Lib("stripped")});
  uint64_t section_addr = 0;
  for (const auto& line : pyperf_test::SplitLines(r.out)) {
    size_t pos = line.find(".eh_frame_hdr");
    if (pos == std::string::npos) continue;
    char type[32], addr[32];
    sscanf(line.c_str() + pos + strlen(".eh_frame_hdr"), "%31s %31s", type, addr);
    section_addr = std::stoull(addr, nullptr, 16);
  }
  EXPECT_EQ(table.eh_frame_hdr_vaddr, section_addr);
  EXPECT_GE(table.fde_count, 3u);  // at least the three functions of the library
  // The table is served from the file image.
  EXPECT_NE(module->image().BytesAtVaddr(table.table_vaddr, table.fde_count * 8, false), nullptr);
}

TEST_F(NativeModuleTest, SymbolVersionsAreNotPartOfNames) {
  auto module = Load("/lib/x86_64-linux-gnu/libc.so.6");
  ASSERT_TRUE(module);
  for (const auto& s : module->symbols()) {
    ASSERT_EQ(module->SymbolName(s).find('@'), std::string_view::npos) << module->SymbolName(s);
  }
}

TEST(NativeFrameNameTest, DemanglesCxxNames) {
  EXPECT_EQ(DemangleSymbol("_ZN14pyperf_fixture6Worker4spinEi"),
            "pyperf_fixture::Worker::spin(int)");
  EXPECT_EQ(DemangleSymbol("_PyEval_EvalFrameDefault"), "_PyEval_EvalFrameDefault");
  EXPECT_EQ(DemangleSymbol("_Znot_a_name"), "_Znot_a_name");
}

TEST(NativeFrameNameTest, FormatsModulePlusAddressOrFullPath) {
  std::string name;
  EXPECT_FALSE(FormatNativeFrameName(nullptr, "/usr/lib/x86_64-linux-gnu/libz.so.1.2.13", 0x5148,
                                     false, &name));
  EXPECT_EQ(name, "libz.so.1.2.13+0x5148");
  FormatNativeFrameName(nullptr, "/usr/lib/x86_64-linux-gnu/libz.so.1.2.13", 0x5148, true, &name);
  EXPECT_EQ(name, "/usr/lib/x86_64-linux-gnu/libz.so.1.2.13+0x5148");
  // A deleted file's " (deleted)" is taken off its path where maps are
  // parsed: its frames are named after the file.
  auto gone =
      ParseProcMaps("7f0000002000-7f0000003000 r-xp 00002000 08:01 77 /tmp/libgone.so (deleted)\n");
  ASSERT_TRUE(gone.ok()) << gone.error();
  FormatNativeFrameName(nullptr, (*gone)[0].path, 0x10, false, &name);
  EXPECT_EQ(name, "libgone.so+0x10");
  FormatUnreadableModuleFrameName("/opt/x/libq.so", false, &name);
  EXPECT_EQ(name, "[unknown] (libq.so)");
}

TEST_F(NativeModuleTest, InsertDsoNameAppendsFullPath) {
  auto module = Load(Lib("full"));
  ASSERT_TRUE(module);
  std::string name;
  EXPECT_TRUE(FormatNativeFrameName(module.get(), Lib("full"), middle_.first, true, &name));
  EXPECT_EQ(name, "pyperf_fixture_middle (" + Lib("full") + ")");
}

TEST(NativeFrameNameTest, DebuglinkCrcIsZlibCrc32) {
  const char* check = "123456789";
  EXPECT_EQ(DebuglinkCrc32(0, reinterpret_cast<const uint8_t*>(check), 9), 0xCBF43926u);
}

TEST(NativeModuleLoadTest, RejectsWhatIsNotElf) {
  pyperf_test::TempDir dir;
  FILE* f = fopen(dir.File("x").c_str(), "w");
  fputs("not an ELF file", f);
  fclose(f);
  auto module = NativeModule::LoadFromPath(dir.File("x"), {});
  EXPECT_FALSE(module.ok());
  EXPECT_FALSE(NativeModule::LoadFromPath(dir.File("missing"), {}).ok());
}

}  // namespace
}  // namespace ebpf
