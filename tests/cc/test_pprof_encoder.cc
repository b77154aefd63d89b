// The pprof encoder (--format pprof): synthetic dumps with every frame kind,
// hostile names, native frames with and without a file and a build-id, and
// a sample without frames, written to a file and read back with
// `go tool pprof` (-top, -traces, -raw) as a user reads them, and decoded
// directly to check the message's structure. Real PyPerf runs on every
// interpreter layout: Formats.PprofOfEveryLayoutReadsBackWithGoToolPprof
// (test_e2e_versions.cc).
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "FrameSpelling.h"
#include "PprofEncoder.h"
#include "ProfileEncoder.h"
#include "profile.pb.h"
#include "support/e2e.h"
#include "support/encoded_dump.h"
#include "support/pprof_file.h"
#include "support/test_support.h"
#include "utf8.h"

namespace pyperf_test {
namespace {

namespace pb = perftools::profiles;

constexpr uint64_t kPeriodNs = 10'000'000;  // 100 Hz
constexpr char kLibPython[] = "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0";
constexpr char kLibPythonBuildId[] = "49daf84ed369fe589b73ea876f2591cd4c3588bb";
constexpr uint64_t kEvalAddress = 0x1c4f20;
constexpr char kNoBuildIdLib[] = "/opt/no build-id/libplain.so";
constexpr char kLibc[] = "/usr/lib/x86_64-linux-gnu/libc.so.6";
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

// A dump's stacks, handed to the encoder as a SyntheticDump
// (support/encoded_dump.h).
struct Dump {
  DumpStacks stacks;
  std::chrono::system_clock::time_point start =
      std::chrono::system_clock::time_point(std::chrono::seconds(1'780'000'000)) +
      std::chrono::milliseconds(250);
  std::chrono::nanoseconds length = std::chrono::milliseconds(60'500);

  void Add(const TestStack& stack, uint64_t count) { stacks.emplace_back(stack, count); }
  uint64_t Total() const {
    uint64_t total = 0;
    for (const auto& entry : stacks) total += entry.second;
    return total;
  }
  // What go tool pprof's -traces must show: the view of every stack.
  std::map<std::string, uint64_t> Projected() const {
    std::map<std::string, uint64_t> projected;
    for (const auto& [stack, count] : stacks) projected[PprofViewOfStack(stack)] += count;
    return projected;
  }
};

constexpr char kCalltree[] = "/work/app/calltree.py";
const std::string kHostileFile = "/tmp/odd dir (x)/" + kHostile + ".py";
const std::string kCxx = "std::vector<int>::push_back(int const&)";
const std::string kHostileLib = "/tmp/" + kHostile + ".so";

// `text` escaped as the collapsed text (and so pprof) shows it: ';' and line
// breaks are '_'.
std::string Escaped(const std::string& text) {
  std::string out;
  ebpf::pyperf::AppendFrameText(text, &out);
  return out;
}

// A frame to put in stacks.
TestFrame Frame(const TestStack& stack) { return stack.frames.at(0); }
const TestFrame kEval = Frame(TestStack("", 0, 0).Native("_PyEval_EvalFrameDefault", kLibPython,
                                                         kLibPythonBuildId, kEvalAddress));
const TestFrame kRun = Frame(TestStack("", 0, 0).Python("Worker.run", kCalltree, 22));
const TestFrame kSpin = Frame(TestStack("", 0, 0).Python("Worker.spin", kCalltree, 27));

TestStack Stack(std::string comm, uint32_t pid, uint32_t tid, std::vector<TestFrame> frames) {
  TestStack stack(std::move(comm), pid, tid);
  stack.frames = std::move(frames);
  return stack;
}

// Every frame kind, hostile names, native frames with and without a file,
// and a sample without frames.
Dump EveryKindDump() {
  Dump dump;
  dump.Add(Stack("python3", 100, 100, {kRun, kSpin}), 1000);
  dump.Add(Stack("python3", 100, 101, {kEval, kRun, kEval, kSpin}).Kernel("do_syscall_64"), 7);
  dump.Add(TestStack("python3", 100, 102)
               .Marker(std::string(ebpf::pyperf::kTruncatedPythonStack))
               .Python("K" + kHostile + "." + kHostile, kHostileFile, 5)
               .Native("n" + kHostile, kHostileLib, "abcd", 0x99),
           3);
  // ';' in names and files: '_' in pprof, as in the collapsed text.
  dump.Add(TestStack("we ird-comm/x;" + kHostile, 42, 43)
               .Python("odd;name", "/app/semi;colon.py", 3)
               .Native("plain_helper", kNoBuildIdLib, "", 0x40)
               .Native("orphan_symbol"),
           11);
  dump.Add(TestStack("worker", 7, 9)
               .Native("libfoo.so+0x10")
               .Native(kCxx, kLibPython, kLibPythonBuildId, 0x2000)
               .Native("")
               .Kernel("0xffffffff81000000"),
           123456789);
  dump.Add(TestStack("worker", 7, 8)
               .Marker(std::string(ebpf::pyperf::kLostSymbol))
               .Marker(ebpf::pyperf::NativeStackErrorText("read failed (EFAULT) <0x7f>"))
               .Marker(ebpf::pyperf::SampleErrorText(3)),
           2);
  // A sample without frames (PyPerf always adds one; another caller might not).
  dump.Add(TestStack("lonely", 5, 6), 4);
  // An empty comm (pprof keeps no empty label).
  dump.Add(Stack("", 3, 4, {kSpin}).Native(""), 8);
  return dump;
}

// Encodes `dump` into `path`; the file a dump would leave.
void Encode(const Dump& dump, const std::string& path) {
  SyntheticDump encoded(dump.stacks, kPeriodNs, dump.start, dump.length);
  ASSERT_TRUE(EncodeDumpToFile(ebpf::pyperf::ProfileFormat::kPprof, encoded.profile(), path));
}

// A string of `profile`'s table, and the function of a location's line.
const std::string& Str(const pb::Profile& profile, int64_t index) {
  return profile.string_table(static_cast<int>(index));
}
const pb::Function& FunctionOf(const pb::Profile& profile, const pb::Location& location) {
  return profile.function(static_cast<int>(location.line(0).function_id() - 1));
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

TEST_F(PprofEncoderTest, ViewOfStacksIsWhatTheTracesShow) {
  // The views themselves, written out by hand (the comparisons above rely on
  // them), from samples and from the collapsed lines PyPerf writes of them.
  const TestStack b = Stack("python3", 100, 101, {kEval, kRun, kSpin});
  EXPECT_EQ(PprofViewOfStack(b),
            "python3-100/101;_PyEval_EvalFrameDefault;calltree.Worker.run;calltree.Worker.spin");
  EXPECT_EQ(PprofViewOfCollapsedStack(Collapsed(b)), PprofViewOfStack(b));
  TestStack odd("w", 1, 2);
  odd.Native("").Kernel("do_syscall_64").Marker("[Lost Symbol]");
  odd.Python("K.f", "/tmp/odd dir (x)/m.py", 5).Python("g", "", 0);
  EXPECT_EQ(PprofViewOfStack(odd), "w-1/2;<unknown>;do_syscall_64;[Lost Symbol];m.K.f;g");
  EXPECT_EQ(PprofViewOfCollapsedStack(Collapsed(odd)), PprofViewOfStack(odd));
  EXPECT_EQ(PprofViewOfStack(TestStack("lonely", 5, 6)), "lonely-5/6;[No Frames]");
  EXPECT_EQ(PprofViewOfCollapsedStack("lonely-5/6"), "lonely-5/6;[No Frames]");
  EXPECT_EQ(PprofViewOfCollapsedStack("no head"), "<not a collapsed stack: no head>");
}

TEST_F(PprofEncoderTest, SamplesCarryPidTidAndCommLabels) {
  REQUIRE_GO();
  Dump dump = EveryKindDump();
  std::string path = Write(dump);
  PprofReadback back = ReadPprofWithGoTool(path);
  ASSERT_EQ(back.error, "");
  // As -traces prints them (the stacks' heads above are made of them too);
  // the comm as the collapsed text has it: ';' and U+2028 are '_'.
  std::string hostile_comm;
  ebpf::AppendSanitizedUtf8(Escaped("we ird-comm/x;" + kHostile), &hostile_comm);
  EXPECT_NE(
      back.traces.find("\n      comm:  " + hostile_comm + "\n       pid:  42\n       tid:  43\n"),
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
  // No comm label for the empty comm; the hostile comm's label is the comm
  // escaped, as the collapsed line starts.
  const pb::Profile profile = DecodePprofFile(path);
  size_t hostile_labels = 0;
  for (const pb::Sample& sample : profile.sample()) {
    EXPECT_EQ(sample.label_size(), sample.label(0).num() == 3 ? 2 : 3);
    for (const pb::Label& label : sample.label()) {
      if (Str(profile, label.key()) != "comm" || sample.label(0).num() != 42) continue;
      EXPECT_EQ(Str(profile, label.str()), Escaped("we ird-comm/x;" + kHostile));
      ++hostile_labels;
    }
  }
  EXPECT_EQ(hostile_labels, 1u);
}

TEST_F(PprofEncoderTest, NativeFramesCarryTheirFileBuildIdAndAddress) {
  REQUIRE_GO();
  PprofReadback back = ReadPprofWithGoTool(Write(EveryKindDump()));
  ASSERT_EQ(back.error, "");
  // libpython (two functions, one mapping), the file without build-id, the
  // hostile one and the kernel's; the frames in no known file have none.
  std::map<std::string, std::string> build_ids;
  std::map<std::string, uint64_t> by_file;  // -> mapping id
  for (const auto& mapping : back.mappings) {
    build_ids[mapping.file] = mapping.build_id;
    by_file[mapping.file] = mapping.id;
    EXPECT_TRUE(mapping.has_functions) << mapping.file;
  }
  EXPECT_EQ(build_ids, (std::map<std::string, std::string>{{kLibPython, kLibPythonBuildId},
                                                           {kNoBuildIdLib, ""},
                                                           {kHostileLib, "abcd"},
                                                           {"[kernel.kallsyms]", ""}}))
      << back.raw;

  // -raw's locations: "<id>: <address> M=<mapping> <name> <file>:<line> s=0".
  auto has_location = [&](const std::string& text) {
    return back.raw.find(text) != std::string::npos;
  };
  const std::string libpython = "M=" + std::to_string(by_file[kLibPython]) + " ";
  EXPECT_TRUE(has_location(": 0x1c4f20 " + libpython + "_PyEval_EvalFrameDefault :0 s=0\n"))
      << back.raw;
  EXPECT_TRUE(has_location(": 0x2000 " + libpython + kCxx + " :0")) << back.raw;
  EXPECT_TRUE(
      has_location(": 0x40 M=" + std::to_string(by_file[kNoBuildIdLib]) + " plain_helper :0 s=0\n"))
      << back.raw;
  EXPECT_TRUE(has_location(": 0x0 orphan_symbol :0 s=0\n")) << back.raw;
  EXPECT_TRUE(has_location(": 0x0 libfoo.so+0x10 :0 s=0\n")) << back.raw;
  EXPECT_TRUE(has_location(": 0x0 M=" + std::to_string(by_file["[kernel.kallsyms]"]) +
                           " do_syscall_64 :0 s=0\n"))
      << back.raw;
}

// Two samples that differ only in where memcpy was: two pprof samples, two
// locations of one function in one mapping, each with its address; pprof
// shows them as one stack and sums them.
Dump TwoAddressesDump() {
  Dump dump;
  for (auto [address, count] : {std::pair<uint64_t, uint64_t>{0x1000, 5}, {0x2000, 7}}) {
    dump.Add(Stack("python3", 1, 1, {kSpin}).Native("memcpy", kLibc, "cafe", address), count);
  }
  return dump;
}

TEST_F(PprofEncoderTest, EachNativeAddressIsALocationOfOneFunction) {
  const std::string path = Write(TwoAddressesDump());
  pb::Profile profile = DecodePprofFile(path);
  ASSERT_EQ(profile.sample_size(), 2);
  ASSERT_EQ(profile.mapping_size(), 1);
  EXPECT_EQ(Str(profile, profile.mapping(0).filename()), kLibc);
  EXPECT_EQ(Str(profile, profile.mapping(0).build_id()), "cafe");
  std::vector<std::pair<uint64_t, int64_t>> leaves;  // (address, count)
  std::set<uint64_t> functions;
  for (const pb::Sample& sample : profile.sample()) {
    ASSERT_EQ(sample.location_id_size(), 2);
    const pb::Location& leaf = profile.location(static_cast<int>(sample.location_id(0) - 1));
    leaves.emplace_back(leaf.address(), sample.value(0));
    EXPECT_EQ(leaf.mapping_id(), profile.mapping(0).id());
    EXPECT_EQ(Str(profile, FunctionOf(profile, leaf).name()), "memcpy");
    functions.insert(leaf.line(0).function_id());
    EXPECT_EQ(sample.location_id(1), profile.sample(0).location_id(1)) << "one Python location";
  }
  EXPECT_EQ(leaves, (std::vector<std::pair<uint64_t, int64_t>>{{0x1000, 5}, {0x2000, 7}}));
  EXPECT_EQ(functions.size(), 1u);
  EXPECT_EQ(profile.location_size(), 3);
  EXPECT_EQ(profile.function_size(), 2);

  REQUIRE_GO();
  PprofReadback back = ReadPprofWithGoTool(path);
  ASSERT_EQ(back.error, "");
  EXPECT_EQ(back.stacks,
            (std::map<std::string, uint64_t>{{"python3-1/1;calltree.Worker.spin;memcpy", 12}}))
      << back.traces;
  EXPECT_EQ(back.total_samples, 12u);
  // -top: memcpy is the leaf of all 12 (flat and cum), the Python function
  // above it of all 12 (cum): "flat flat% sum% cum cum% name".
  std::map<std::string, std::string> top;  // name -> "flat cum"
  for (const std::string& line : SplitLines(back.top)) {
    std::istringstream in(line);
    std::string flat, flat_share, sum_share, cum, cum_share, name;
    if (in >> flat >> flat_share >> sum_share >> cum >> cum_share >> name)
      top[name] = flat + " " + cum;
  }
  EXPECT_EQ(top["memcpy"], "12 12") << back.top;
  EXPECT_EQ(top["calltree.Worker.spin"], "0 12") << back.top;
}

// pprof names the first mapping as the profile's main binary ("File:"):
// mappings go by the samples under them, so that is the interpreter's, and
// the kernel's is last however many samples it has.
TEST_F(PprofEncoderTest, MappingsGoBySamplesWithTheKernelLast) {
  pb::Profile profile = DecodePprofFile(Write(EveryKindDump()));
  std::vector<std::string> files;
  for (int i = 0; i < profile.mapping_size(); ++i) {
    EXPECT_EQ(profile.mapping(i).id(), static_cast<uint64_t>(i) + 1);
    files.push_back(Str(profile, profile.mapping(i).filename()));
  }
  EXPECT_EQ(files, (std::vector<std::string>{kLibPython, kNoBuildIdLib, kHostileLib,
                                             "[kernel.kallsyms]"}));
  // Locations moved with their mappings: every location's mapping is the file
  // its frame came from.
  std::map<std::string, std::set<std::string>> files_of;  // function -> its mappings' files
  for (const pb::Location& location : profile.location()) {
    if (location.mapping_id() == 0) continue;
    files_of[Str(profile, FunctionOf(profile, location).name())].insert(
        files[location.mapping_id() - 1]);
  }
  EXPECT_EQ(files_of["_PyEval_EvalFrameDefault"], std::set<std::string>{kLibPython});
  EXPECT_EQ(files_of[kCxx], std::set<std::string>{kLibPython});
  EXPECT_EQ(files_of["plain_helper"], std::set<std::string>{kNoBuildIdLib});
  EXPECT_EQ(files_of["do_syscall_64"], std::set<std::string>{"[kernel.kallsyms]"});
}

// A Python function is named as its reader knows it (the file's base name and
// the qualified name), its system name the full name of the collapsed text;
// its file and line are the frame's; names and file are escaped as in the
// collapsed text (';' is '_').
TEST_F(PprofEncoderTest, PythonFunctionsAreNamedForPeopleWithTheirFileAndLine) {
  REQUIRE_GO();
  const std::string path = Write(EveryKindDump());
  pb::Profile profile = DecodePprofFile(path);
  auto str = [&](int64_t index) { return Str(profile, index); };
  // (name, system_name, filename) -> the lines of its locations.
  std::map<std::vector<std::string>, std::set<int64_t>> python;
  for (const pb::Location& location : profile.location()) {
    const pb::Function& f = FunctionOf(profile, location);
    if (f.filename() == 0 || str(f.filename()) == Escaped(kHostileFile)) continue;
    EXPECT_EQ(location.mapping_id(), 0u);
    python[{str(f.name()), str(f.system_name()), str(f.filename())}].insert(
        location.line(0).line());
  }
  const std::map<std::vector<std::string>, std::set<int64_t>> expected = {
      {{"calltree.Worker.spin", "work.app.calltree.Worker.spin", kCalltree}, {27}},
      {{"calltree.Worker.run", "work.app.calltree.Worker.run", kCalltree}, {22}},
      {{"semi_colon.odd_name", "app.semi_colon.odd_name", "/app/semi_colon.py"}, {3}},
  };
  EXPECT_EQ(python, expected);
  // -raw: "<id>: 0x0 <name> <file>:<line> s=0(<system name>)".
  PprofReadback back = ReadPprofWithGoTool(path);
  ASSERT_EQ(back.error, "");
  EXPECT_NE(back.raw.find(": 0x0 calltree.Worker.spin /work/app/calltree.py:27 "
                          "s=0(work.app.calltree.Worker.spin)\n"),
            std::string::npos)
      << back.raw;
}

TEST_F(PprofEncoderTest, MessageFollowsTheProfileFormat) {
  Dump dump = EveryKindDump();
  pb::Profile profile = DecodePprofFile(Write(dump));
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
  // Each distinct frame is one location, plus the [No Frames] marker.
  std::set<std::tuple<int, std::string, std::string, int, std::string, uint64_t>> frames;
  for (const auto& [stack, count] : dump.stacks) {
    for (const TestFrame& f : stack.frames) {
      frames.insert({static_cast<int>(f.kind), f.name, f.file, f.line, f.object_path, f.address});
    }
  }
  EXPECT_EQ(profile.location_size(), static_cast<int>(frames.size()) + 1);

  // Markers (and the name of an empty frame) keep their text whole: no
  // system name for pprof to simplify. Python functions (those with a file)
  // have their full name as system name, the others system_name = name.
  for (const auto& f : profile.function()) {
    const std::string name = str(f.name());
    if (name.front() == '[' || name == ebpf::pyperf::kPprofUnnamedFrame) {
      EXPECT_EQ(f.system_name(), 0) << name;
    } else if (f.filename() != 0) {
      const std::string system_name = str(f.system_name());
      EXPECT_GT(system_name.size(), name.size()) << name;
      EXPECT_EQ(system_name.substr(system_name.size() - name.size()), name);
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
    EXPECT_EQ(name_at(1), "calltree.Worker.spin");
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
  dump.Add(TestStack("comm\xfe", 1, 2).Native("py\xff\xc0thon"), 3);
  pb::Profile profile = DecodePprofFile(Write(dump));
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
  pb::Profile profile = DecodePprofFile(Write(dump));
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
  TestStack pool("", 0, 0);
  for (int i = 0; i < 4; ++i) {
    pool.Python("f" + std::to_string(i), "/app/m.py", 10 + i)
        .Native("native_" + std::to_string(i))
        .Kernel("kernel_" + std::to_string(i));
  }
  Dump dump;
  for (uint32_t tid = 0; tid < 10000; ++tid) {
    TestStack stack("many", 1, tid);
    for (size_t bit = 0; bit < pool.frames.size(); ++bit) {
      if ((tid >> bit) & 1u) stack.frames.push_back(pool.frames[bit]);
    }
    if (stack.frames.empty()) stack.frames.push_back(pool.frames[0]);
    dump.Add(stack, 1);
  }
  pb::Profile profile = DecodePprofFile(Write(dump));
  EXPECT_EQ(profile.sample_size(), 10000);
  EXPECT_EQ(profile.location_size(), 12);
  EXPECT_EQ(profile.function_size(), 12);
  EXPECT_EQ(profile.mapping_size(), 1) << "the kernel's";
}

}  // namespace
}  // namespace pyperf_test
