// The pprof encoder (--format pprof): synthetic dumps with every frame kind,
// hostile names, native frames with and without a file and a build-id, and
// stacks that cannot be read back, written to a file and read back with
// `go tool pprof` (-top, -traces, -raw) as a user reads them, and decoded
// directly to check the message's structure. Real PyPerf runs on every
// interpreter layout: Formats.PprofOfEveryLayoutReadsBackWithGoToolPprof
// (test_e2e_versions.cc).
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "FrameSpelling.h"
#include "PprofEncoder.h"
#include "ProfileEncoder.h"
#include "PythonFrameFormat.h"
#include "profile.pb.h"
#include "support/e2e.h"
#include "support/encoded_dump.h"
#include "support/pprof_file.h"
#include "support/test_support.h"
#include "utf8.h"

namespace pyperf_test {
namespace {

using pyperf::NativeFrameOrigin;
using pyperf::SpellFrame;
namespace pb = perftools::profiles;
using Kind = pyperf::FrameKind;

constexpr uint64_t kPeriodNs = 10'000'000;  // 100 Hz
constexpr char kLibPython[] = "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0";
constexpr char kLibPythonBuildId[] = "49daf84ed369fe589b73ea876f2591cd4c3588bb";
constexpr uint64_t kEvalAddress = 0x1c4f20;
constexpr char kNoBuildIdLib[] = "/opt/no build-id/libplain.so";
// Names no one would choose: quotes, backslashes, markup, a script end tag,
// U+2028, an emoji, right-to-left text, control characters and a tab.
const std::string kHostile =
    "</script><b>\"q'\\&amp;\xE2\x80\xA8\xF0\x9F\x94\xA5 \xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D "
    "\x01\x1f\x7f\t<!--";

#define REQUIRE_GO()                                                                        \
  do {                                                                                      \
    if (FindInPath("go").empty())                                                           \
      PYPERF_SKIP_OR_FAIL("go is not installed (golang-go; scripts/setup.sh installs it)"); \
  } while (0)

std::string Stack(const std::string& comm, uint32_t pid, uint32_t tid,
                  const std::vector<std::string>& spelled_frames) {
  pyperf::StackText text;
  text.Start(comm.data(), comm.size(), pid, tid);
  for (const auto& frame : spelled_frames) text.AddSpelled(frame);
  return text.text();
}

// A dump's stacks and origins, handed to the encoder as a SyntheticDump
// (support/encoded_dump.h).
struct Dump {
  std::map<std::string, uint64_t> stacks;
  std::unordered_map<std::string, NativeFrameOrigin> origins;
  std::chrono::system_clock::time_point start =
      std::chrono::system_clock::time_point(std::chrono::seconds(1'780'000'000)) +
      std::chrono::milliseconds(250);
  std::chrono::nanoseconds length = std::chrono::milliseconds(60'500);

  uint64_t Total() const {
    uint64_t total = 0;
    for (const auto& entry : stacks) total += entry.second;
    return total;
  }
  // What go tool pprof's -traces must show: the projection of every stack.
  std::map<std::string, uint64_t> Projected() const {
    std::map<std::string, uint64_t> projected;
    for (const auto& [stack, count] : stacks) projected[PprofViewOfCollapsedStack(stack)] += count;
    return projected;
  }
};

const std::string kPySpin =
    pyperf::FormatPythonFrame("/work/app/calltree.py", "spin", "Worker", 27);
const std::string kPyRun = pyperf::FormatPythonFrame("/work/app/calltree.py", "run", "Worker", 22);
const std::string kPyHostile =
    pyperf::FormatPythonFrame("/tmp/odd dir (x)/" + kHostile + ".py", kHostile, "K" + kHostile, 5);
const std::string kPyUnsplittable = SpellFrame(Kind::kPython, "no file or line here");
const std::string kEval = SpellFrame(Kind::kNative, "_PyEval_EvalFrameDefault");
const std::string kPlain = SpellFrame(Kind::kNative, "plain_helper");
const std::string kOrphan = SpellFrame(Kind::kNative, "orphan_symbol");
const std::string kUnresolved = SpellFrame(Kind::kNative, "libfoo.so+0x10");
const std::string kCxx = SpellFrame(Kind::kNative, "std::vector<int>::push_back(int const&)");
const std::string kNativeHostile = SpellFrame(Kind::kNative, "n" + kHostile);
const std::string kEmptyNative = SpellFrame(Kind::kNative, "");
const std::string kKernelSym = SpellFrame(Kind::kKernel, "do_syscall_64");
const std::string kKernelAddr = SpellFrame(Kind::kKernel, "0xffffffff81000000");
const std::string kTruncated = SpellFrame(Kind::kMarker, pyperf::kTruncatedPythonStack);
const std::string kLost = SpellFrame(Kind::kMarker, pyperf::kLostSymbol);
const std::string kNativeError = pyperf::NativeStackErrorFrame("read failed (EFAULT) <0x7f>");
const std::string kSampleError = pyperf::SampleErrorFrame(3);

// Every frame kind, hostile names, native frames with and without origins,
// and stacks the encoder cannot read back.
Dump EveryKindDump() {
  Dump dump;
  dump.stacks[Stack("python3", 100, 100, {kPyRun, kPySpin})] = 1000;
  dump.stacks[Stack("python3", 100, 101, {kEval, kPyRun, kEval, kPySpin, kKernelSym})] = 7;
  dump.stacks[Stack("python3", 100, 102, {kTruncated, kPyHostile, kNativeHostile})] = 3;
  dump.stacks[Stack("we ird-comm/x " + kHostile, 42, 43, {kPyUnsplittable, kPlain, kOrphan})] = 11;
  dump.stacks[Stack("worker", 7, 9, {kUnresolved, kCxx, kEmptyNative, kKernelAddr})] = 123456789;
  dump.stacks[Stack("worker", 7, 8, {kLost, kNativeError, kSampleError})] = 2;
  // A head without frames (PyPerf always adds one; another caller might not).
  dump.stacks["lonely-5/6"] = 4;
  // An empty comm (pprof keeps no empty label).
  dump.stacks[Stack("", 3, 4, {kPySpin, kEmptyNative})] = 8;
  // Stacks ParseStackText rejects: no head, and a frame without a suffix.
  dump.stacks["no head at all"] = 5;
  dump.stacks["python3-100/100;" + kPyRun + ";frame_without_suffix"] = 6;

  auto text = [](const std::string& spelled) { return spelled.substr(0, spelled.rfind("_[")); };
  dump.origins[text(kEval)] = {kLibPython, kLibPythonBuildId, kEvalAddress};
  dump.origins[text(kPlain)] = {kNoBuildIdLib, "", 0x40};
  dump.origins[text(kCxx)] = {kLibPython, kLibPythonBuildId, 0x2000};
  dump.origins[text(kUnresolved)] = {"", "", 0x10};  // a file that was not resolved
  dump.origins[text(kNativeHostile)] = {"/tmp/" + kHostile + ".so", "abcd", 0x99};
  return dump;
}

// Encodes `dump` into `path`; the file a dump would leave.
void Encode(const Dump& dump, const std::string& path) {
  ASSERT_TRUE(pyperf::MakeProfileEncoder(pyperf::ProfileFormat::kPprof)->wants_native_origins());
  SyntheticDump encoded(DumpStacks(dump.stacks.begin(), dump.stacks.end()), kPeriodNs, dump.start,
                        dump.length, &dump.origins);
  ASSERT_TRUE(EncodeDumpToFile(pyperf::ProfileFormat::kPprof, encoded.profile(), path));
}

std::string Gunzip(const std::string& gz) {
  z_stream stream{};
  EXPECT_EQ(inflateInit2(&stream, 15 + 16), Z_OK);  // gzip only: the file must be gzip'd
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  stream.avail_in = static_cast<uInt>(gz.size());
  std::string out;
  char buffer[65536];
  int status = Z_OK;
  while (status == Z_OK) {
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof(buffer);
    status = inflate(&stream, Z_NO_FLUSH);
    out.append(buffer, sizeof(buffer) - stream.avail_out);
  }
  EXPECT_EQ(status, Z_STREAM_END) << "not a complete gzip stream";
  EXPECT_EQ(stream.avail_in, 0u) << "bytes after the gzip stream";
  inflateEnd(&stream);
  return out;
}

pb::Profile Decode(const std::string& path) {
  pb::Profile profile;
  EXPECT_TRUE(profile.ParseFromString(Gunzip(ReadFile(path)))) << path;
  return profile;
}

class PprofEncoderTest : public ::testing::Test {
 protected:
  std::string Write(const Dump& dump) {
    std::string path = dir_.File("profile.pb.gz");
    Encode(dump, path);
    return path;
  }
  TempDir dir_;
};

TEST_F(PprofEncoderTest, GoToolPprofShowsEveryStackWithItsCount) {
  REQUIRE_GO();
  Dump dump = EveryKindDump();
  PprofReadback back = ReadPprofWithGoTool(Write(dump));
  ASSERT_EQ(back.error, "");
  EXPECT_EQ(back.total_samples, dump.Total());
  EXPECT_EQ(back.total_cpu_ns, static_cast<int64_t>(dump.Total() * kPeriodNs));
  EXPECT_EQ(back.stacks, dump.Projected()) << "-traces:\n" << back.traces;
  EXPECT_TRUE(back.unlabeled_samples.empty()) << back.unlabeled_samples.front();
  EXPECT_TRUE(back.unreadable_lines.empty()) << back.unreadable_lines.front();
  // -top's own total, as pprof rounds nothing for counts.
  EXPECT_NE(back.top.find("of " + std::to_string(dump.Total()) + " total"), std::string::npos)
      << back.top;
}

TEST_F(PprofEncoderTest, ProjectionOfStacksIsWhatTheTracesShow) {
  // The projection itself, on stacks whose -traces view is written out by
  // hand (the comparison above relies on it).
  EXPECT_EQ(PprofViewOfCollapsedStack(Stack("python3", 100, 101, {kEval, kPyRun, kPySpin})),
            "python3-100/101;_PyEval_EvalFrameDefault;work.app.calltree.Worker.run;"
            "work.app.calltree.Worker.spin");
  EXPECT_EQ(PprofViewOfCollapsedStack(Stack("w", 1, 2, {kEmptyNative, kKernelSym, kLost})),
            "w-1/2;<unknown>;do_syscall_64;[Lost Symbol]");
  EXPECT_EQ(PprofViewOfCollapsedStack("lonely-5/6"), "lonely-5/6;[No Frames]");
  EXPECT_EQ(PprofViewOfCollapsedStack("no head"), std::string(pyperf::kUnparseableStack));
}

TEST_F(PprofEncoderTest, UnparseableStacksAreCountedInOneMarkerSample) {
  REQUIRE_GO();
  Dump dump;
  dump.stacks["no head at all"] = 5;
  dump.stacks["python3-1/1;frame_without_suffix"] = 6;
  dump.stacks[Stack("python3", 1, 1, {kPySpin})] = 2;
  PprofReadback back = ReadPprofWithGoTool(Write(dump));
  ASSERT_EQ(back.error, "");
  std::map<std::string, uint64_t> expected = {{std::string(pyperf::kUnparseableStack), 11},
                                              {"python3-1/1;work.app.calltree.Worker.spin", 2}};
  EXPECT_EQ(back.stacks, expected) << back.traces;
  EXPECT_EQ(back.total_samples, 13u);
  pb::Profile profile = Decode(dir_.File("profile.pb.gz"));
  EXPECT_EQ(profile.sample_size(), 2) << "the unparsable stacks share one sample";
}

TEST_F(PprofEncoderTest, SamplesCarryPidTidAndCommLabels) {
  REQUIRE_GO();
  Dump dump = EveryKindDump();
  std::string path = Write(dump);
  PprofReadback back = ReadPprofWithGoTool(path);
  ASSERT_EQ(back.error, "");
  // As -traces prints them (the stacks' heads above are made of them too);
  // the comm as StackText spelled it (';' and U+2028 made '_').
  pyperf::StackHead head;
  std::vector<pyperf::SpelledFrame> frames;
  const std::string hostile_stack = Stack("we ird-comm/x " + kHostile, 42, 43, {kPlain});
  ASSERT_TRUE(pyperf::ParseStackText(hostile_stack, &head, &frames));
  EXPECT_NE(back.traces.find("\n      comm:  " + std::string(head.comm) +
                             "\n       pid:  42\n       tid:  43\n"),
            std::string::npos)
      << back.traces;
  EXPECT_NE(back.raw.find("pid:[42] tid:[43]"), std::string::npos) << back.raw;
  // -tagfocus selects by them.
  PprofReadback focused = ReadPprofWithGoTool(path, {"-tagfocus=pid=7"});
  ASSERT_EQ(focused.error, "");
  std::map<std::string, uint64_t> of_pid_7;
  for (const auto& [stack, count] : dump.Projected()) {
    if (stack.rfind("worker-7/", 0) == 0) of_pid_7[stack] += count;
  }
  EXPECT_EQ(focused.stacks, of_pid_7) << focused.traces;
  PprofReadback by_comm = ReadPprofWithGoTool(path, {"-tagfocus=comm=^lonely$"});
  ASSERT_EQ(by_comm.error, "");
  EXPECT_EQ(by_comm.stacks, (std::map<std::string, uint64_t>{{"lonely-5/6;[No Frames]", 4}}));
}

TEST_F(PprofEncoderTest, NativeFramesCarryTheirFileBuildIdAndAddress) {
  REQUIRE_GO();
  PprofReadback back = ReadPprofWithGoTool(Write(EveryKindDump()));
  ASSERT_EQ(back.error, "");
  std::map<std::string, PprofRawMapping> by_file;
  for (const auto& mapping : back.mappings) by_file[mapping.file] = mapping;
  // libpython (two frames, one mapping), the file without build-id, the
  // hostile one and the kernel's; the frames without an origin or without a
  // resolved file have none.
  EXPECT_EQ(back.mappings.size(), 4u) << back.raw;
  ASSERT_EQ(by_file.count(kLibPython), 1u) << back.raw;
  EXPECT_EQ(by_file[kLibPython].build_id, kLibPythonBuildId);
  EXPECT_TRUE(by_file[kLibPython].has_functions);
  ASSERT_EQ(by_file.count(kNoBuildIdLib), 1u) << back.raw;
  EXPECT_EQ(by_file[kNoBuildIdLib].build_id, "");
  ASSERT_EQ(by_file.count("[kernel.kallsyms]"), 1u) << back.raw;
  EXPECT_EQ(by_file["[kernel.kallsyms]"].build_id, "");
  ASSERT_EQ(by_file.count("/tmp/" + kHostile + ".so"), 1u) << back.raw;

  // -raw's locations: "<id>: <address> M=<mapping> <name> <file>:<line> s=0".
  auto has_location = [&](const std::string& text) {
    return back.raw.find(text) != std::string::npos;
  };
  const std::string libpython = "M=" + std::to_string(by_file[kLibPython].id) + " ";
  EXPECT_TRUE(has_location(": 0x1c4f20 " + libpython + "_PyEval_EvalFrameDefault :0 s=0\n"))
      << back.raw;
  EXPECT_TRUE(has_location(": 0x2000 " + libpython + "std::vector<int>::push_back(int const&) :0"))
      << back.raw;
  EXPECT_TRUE(has_location(": 0x40 M=" + std::to_string(by_file[kNoBuildIdLib].id) +
                           " plain_helper :0 s=0\n"))
      << back.raw;
  EXPECT_TRUE(has_location(": 0x0 orphan_symbol :0 s=0\n")) << back.raw;
  EXPECT_TRUE(has_location(": 0x0 libfoo.so+0x10 :0 s=0\n")) << back.raw;
  EXPECT_TRUE(has_location(": 0x0 M=" + std::to_string(by_file["[kernel.kallsyms]"].id) +
                           " do_syscall_64 :0 s=0\n"))
      << back.raw;
}

// pprof names the first mapping as the profile's main binary ("File:"):
// mappings go by the samples under them, so that is the interpreter's, and
// the kernel's is last however many samples it has.
TEST_F(PprofEncoderTest, MappingsGoBySamplesWithTheKernelLast) {
  pb::Profile profile = Decode(Write(EveryKindDump()));
  std::vector<std::string> files;
  for (int i = 0; i < profile.mapping_size(); ++i) {
    EXPECT_EQ(profile.mapping(i).id(), static_cast<uint64_t>(i) + 1);
    files.push_back(profile.string_table(static_cast<int>(profile.mapping(i).filename())));
  }
  EXPECT_EQ(files, (std::vector<std::string>{kLibPython, kNoBuildIdLib, "/tmp/" + kHostile + ".so",
                                             "[kernel.kallsyms]"}));
  // Locations moved with their mappings: every location's mapping is the file
  // its frame came from.
  for (const pb::Location& location : profile.location()) {
    if (location.mapping_id() == 0) continue;
    const std::string name = profile.string_table(static_cast<int>(
        profile.function(static_cast<int>(location.line(0).function_id() - 1)).name()));
    const std::string& file = files[location.mapping_id() - 1];
    const std::map<std::string, std::string> expected = {{"_PyEval_EvalFrameDefault", kLibPython},
                                                         {"plain_helper", kNoBuildIdLib},
                                                         {"do_syscall_64", "[kernel.kallsyms]"}};
    auto it = expected.find(name);
    if (it != expected.end()) {
      EXPECT_EQ(file, it->second) << name;
    }
  }
}

TEST_F(PprofEncoderTest, PythonFramesCarryTheirFileAndLine) {
  REQUIRE_GO();
  PprofReadback back = ReadPprofWithGoTool(Write(EveryKindDump()));
  ASSERT_EQ(back.error, "");
  EXPECT_NE(back.raw.find(": 0x0 work.app.calltree.Worker.spin /work/app/calltree.py:27 s=0\n"),
            std::string::npos)
      << back.raw;
  EXPECT_NE(back.raw.find(": 0x0 work.app.calltree.Worker.run /work/app/calltree.py:22 s=0\n"),
            std::string::npos)
      << back.raw;
  // A text ParsePythonFrameText cannot split is the function's name.
  EXPECT_NE(back.raw.find(": 0x0 no file or line here :0 s=0\n"), std::string::npos) << back.raw;
}

TEST_F(PprofEncoderTest, MessageFollowsTheProfileFormat) {
  Dump dump = EveryKindDump();
  pb::Profile profile = Decode(Write(dump));
  const auto& strings = profile.string_table();
  ASSERT_GT(strings.size(), 0);
  EXPECT_EQ(strings[0], "");
  auto str = [&](int64_t index) -> std::string {
    EXPECT_GE(index, 0);
    EXPECT_LT(index, strings.size());
    return index >= 0 && index < strings.size() ? strings[static_cast<int>(index)] : "";
  };
  std::set<std::string> distinct_strings(strings.begin(), strings.end());
  EXPECT_EQ(distinct_strings.size(), static_cast<size_t>(strings.size())) << "strings repeated";
  for (const std::string& s : strings) {
    EXPECT_FALSE(FirstNonUtf8Byte(s).has_value()) << s;
  }

  ASSERT_EQ(profile.sample_type_size(), 2);
  EXPECT_EQ(str(profile.sample_type(0).type()), "samples");
  EXPECT_EQ(str(profile.sample_type(0).unit()), "count");
  EXPECT_EQ(str(profile.sample_type(1).type()), "cpu");
  EXPECT_EQ(str(profile.sample_type(1).unit()), "nanoseconds");
  EXPECT_EQ(str(profile.period_type().type()), "cpu");
  EXPECT_EQ(str(profile.period_type().unit()), "nanoseconds");
  EXPECT_EQ(profile.period(), static_cast<int64_t>(kPeriodNs));
  EXPECT_EQ(profile.time_nanos(), 1'780'000'000'250'000'000);
  EXPECT_EQ(profile.duration_nanos(), 60'500'000'000);

  // Functions, locations and mappings: ids 1.., each distinct.
  std::map<uint64_t, const pb::Function*> functions;
  std::set<std::tuple<int64_t, int64_t, int64_t>> function_keys;
  for (const auto& f : profile.function()) {
    EXPECT_TRUE(functions.emplace(f.id(), &f).second) << "function id " << f.id();
    EXPECT_TRUE(function_keys.insert({f.name(), f.system_name(), f.filename()}).second)
        << "function " << str(f.name()) << " twice";
    EXPECT_NE(str(f.name()), "");
  }
  std::set<std::pair<int64_t, int64_t>> mapping_keys;
  std::set<uint64_t> mapping_ids;
  for (const auto& m : profile.mapping()) {
    EXPECT_TRUE(mapping_ids.insert(m.id()).second);
    EXPECT_TRUE(mapping_keys.insert({m.filename(), m.build_id()}).second);
    EXPECT_TRUE(m.has_functions());
  }
  std::map<uint64_t, const pb::Location*> locations;
  std::set<std::tuple<uint64_t, uint64_t, uint64_t, int64_t>> location_keys;
  for (const auto& l : profile.location()) {
    EXPECT_TRUE(locations.emplace(l.id(), &l).second) << "location id " << l.id();
    ASSERT_EQ(l.line_size(), 1);
    EXPECT_TRUE(
        location_keys
            .insert({l.mapping_id(), l.address(), l.line(0).function_id(), l.line(0).line()})
            .second)
        << "location of " << str(functions[l.line(0).function_id()]->name()) << " twice";
    EXPECT_EQ(functions.count(l.line(0).function_id()), 1u);
    if (l.mapping_id() != 0) {
      EXPECT_EQ(mapping_ids.count(l.mapping_id()), 1u);
    }
  }
  // Each distinct frame is one location: the parsable stacks' distinct
  // frames, plus the [No Frames] and [Unparseable Stack] markers.
  std::set<std::string> frames;
  for (const auto& [stack, count] : dump.stacks) {
    pyperf::StackHead head;
    std::vector<pyperf::SpelledFrame> spelled;
    if (!pyperf::ParseStackText(stack, &head, &spelled)) continue;
    for (const auto& frame : spelled) {
      frames.insert(std::to_string(static_cast<int>(frame.kind)) + std::string(frame.text));
    }
  }
  EXPECT_EQ(profile.location_size(), static_cast<int>(frames.size()) + 2);

  // Markers (and the name of an empty frame) keep their text whole: no
  // system name for pprof to simplify. Other functions have system_name =
  // name.
  for (const auto& f : profile.function()) {
    const std::string name = str(f.name());
    if (name.front() == '[' || name == pyperf::kPprofUnnamedFrame) {
      EXPECT_EQ(f.system_name(), 0) << name;
    } else {
      EXPECT_EQ(f.system_name(), f.name()) << name;
    }
  }

  // Leaf first: the sample of python3-100/101 starts at do_syscall_64 and
  // ends at _PyEval_EvalFrameDefault; values are the count and its CPU time.
  bool found = false;
  for (const auto& sample : profile.sample()) {
    std::map<std::string, std::string> labels;
    for (const auto& label : sample.label()) {
      labels[str(label.key())] = label.str() != 0 ? str(label.str()) : std::to_string(label.num());
    }
    if (labels["tid"] != "101") continue;
    found = true;
    EXPECT_EQ(labels, (std::map<std::string, std::string>{
                          {"comm", "python3"}, {"pid", "100"}, {"tid", "101"}}));
    ASSERT_EQ(sample.location_id_size(), 5);
    auto name_at = [&](int i) {
      return str(functions[locations[sample.location_id(i)]->line(0).function_id()]->name());
    };
    EXPECT_EQ(name_at(0), "do_syscall_64");
    EXPECT_EQ(name_at(1), "work.app.calltree.Worker.spin");
    EXPECT_EQ(name_at(4), "_PyEval_EvalFrameDefault");
    EXPECT_EQ(sample.location_id(2), sample.location_id(4)) << "one location per frame";
    ASSERT_EQ(sample.value_size(), 2);
    EXPECT_EQ(sample.value(0), 7);
    EXPECT_EQ(sample.value(1), static_cast<int64_t>(7 * kPeriodNs));
  }
  EXPECT_TRUE(found);
}

TEST_F(PprofEncoderTest, BytesThatAreNotUtf8BecomeReplacementCharacters) {
  REQUIRE_GO();
  Dump dump;
  const std::string bad = "py\xff\xc0thon";
  dump.stacks["comm\xfe-1/2;" + SpellFrame(Kind::kNative, bad)] = 3;
  pb::Profile profile = Decode(Write(dump));
  for (const std::string& s : profile.string_table()) {
    EXPECT_FALSE(FirstNonUtf8Byte(s).has_value()) << s;
  }
  PprofReadback back = ReadPprofWithGoTool(dir_.File("profile.pb.gz"));
  ASSERT_EQ(back.error, "");
  EXPECT_EQ(back.stacks, dump.Projected()) << back.traces;
  EXPECT_EQ(back.stacks.count("comm\xEF\xBF\xBD-1/2;py\xEF\xBF\xBD\xEF\xBF\xBDthon"), 1u)
      << back.traces;
}

TEST_F(PprofEncoderTest, EmptyDumpIsAProfileWithoutSamples) {
  REQUIRE_GO();
  Dump dump;
  pb::Profile profile = Decode(Write(dump));
  EXPECT_EQ(profile.sample_size(), 0);
  EXPECT_EQ(profile.period(), static_cast<int64_t>(kPeriodNs));
  PprofReadback back = ReadPprofWithGoTool(dir_.File("profile.pb.gz"));
  ASSERT_EQ(back.error, "");
  EXPECT_EQ(back.total_samples, 0u);
  EXPECT_TRUE(back.stacks.empty());
}

TEST_F(PprofEncoderTest, SharedFramesAreOneFunctionAndLocation) {
  // Ten thousand stacks over twelve frames: the tables stay at the frames'
  // size, not the samples'.
  Dump dump;
  std::vector<std::string> pool;
  for (int i = 0; i < 4; ++i) {
    pool.push_back(pyperf::FormatPythonFrame("/app/m.py", "f" + std::to_string(i), "", 10 + i));
    pool.push_back(SpellFrame(Kind::kNative, "native_" + std::to_string(i)));
    pool.push_back(SpellFrame(Kind::kKernel, "kernel_" + std::to_string(i)));
  }
  for (uint32_t tid = 0; tid < 10000; ++tid) {
    std::vector<std::string> frames;
    for (size_t bit = 0; bit < pool.size(); ++bit) {
      if ((tid >> bit) & 1u) frames.push_back(pool[bit]);
    }
    if (frames.empty()) frames.push_back(pool[0]);
    dump.stacks[Stack("many", 1, tid, frames)] = 1;
  }
  pb::Profile profile = Decode(Write(dump));
  EXPECT_EQ(profile.sample_size(), 10000);
  EXPECT_EQ(profile.location_size(), 12);
  EXPECT_EQ(profile.function_size(), 12);
  EXPECT_EQ(profile.mapping_size(), 1) << "the kernel's";
}

}  // namespace
}  // namespace pyperf_test
