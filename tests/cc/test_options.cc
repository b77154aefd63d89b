// Tests for PyPerf's command line: every flag, gProfiler's exact command
// lines, and the one-line errors with exit status 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "PyPerfOptions.h"
#include "support/option_docs.h"

namespace ebpf::pyperf {
namespace {

CommandLine Parse(const std::vector<std::string>& args) { return ParseCommandLine(args); }

// Parses args that must be valid and returns the options.
Options Valid(const std::vector<std::string>& args) {
  CommandLine cl = Parse(args);
  EXPECT_EQ(cl.action, CommandLine::Action::kRun) << cl.message;
  EXPECT_EQ(cl.exit_code, 0);
  return cl.options;
}

// Parses args that must be refused; returns the error line.
std::string Refused(const std::vector<std::string>& args) {
  CommandLine cl = Parse(args);
  EXPECT_EQ(cl.action, CommandLine::Action::kFail);
  EXPECT_EQ(cl.exit_code, 2);
  // Exactly one line, in the agreed shape.
  EXPECT_EQ(cl.message.find('\n'), std::string::npos) << cl.message;
  const std::string prefix = "PyPerf: error: ", suffix = " (see --help)";
  EXPECT_EQ(cl.message.rfind(prefix, 0), 0u) << cl.message;
  EXPECT_GT(cl.message.size(), prefix.size() + suffix.size()) << cl.message;
  EXPECT_EQ(cl.message.substr(cl.message.size() - std::min(cl.message.size(), suffix.size())),
            suffix);
  return cl.message;
}

// Refused, for each command line of `command_lines`.
void ExpectEachRefused(const std::vector<std::vector<std::string>>& command_lines) {
  for (const auto& args : command_lines) {
    SCOPED_TRACE(::testing::PrintToString(args));
    Refused(args);
  }
}

// Every option a long flag sets, as text, by its name in Options.
std::map<std::string, std::string> Fields(const Options& o) {
  auto on_off = [](bool on) { return std::string(on ? "on" : "off"); };
  auto offset = [](std::optional<uint32_t> v) { return v ? std::to_string(*v) : "unset"; };
  std::string pids;
  for (int pid : o.pids) pids += (pids.empty() ? "" : " ") + std::to_string(pid);
  return {
      {"pids", pids},
      {"sample_mode", o.sample_mode == SampleMode::kPeriod ? "period" : "frequency"},
      {"sample_period_ns", std::to_string(o.sample_period_ns)},
      {"duration_seconds", std::to_string(o.duration_seconds)},
      {"update_interval_seconds", std::to_string(o.update_interval_seconds)},
      {"symbols_map_size", std::to_string(o.symbols_map_size)},
      {"events_buffer_pages", std::to_string(o.events_buffer_pages)},
      {"kernel_stacks_map_size", std::to_string(o.kernel_stacks_map_size)},
      {"user_stacks_pages", std::to_string(o.user_stacks_pages)},
      {"verbosity", std::to_string(o.verbosity)},
      {"output_path", o.output_path},
      {"fs_offset", offset(o.fs_offset)},
      {"stack_offset", offset(o.stack_offset)},
      {"insert_dso_name", on_off(o.insert_dso_name)},
      {"line_numbers", o.line_numbers == LineNumberMode::kFirst ? "first" : "current"},
      {"native_cache", on_off(o.native_cache)},
      {"native_cache_entries", std::to_string(o.native_cache_entries)},
      {"native_cache_bytes", std::to_string(o.native_cache_bytes)},
      {"native_cache_max_age", std::to_string(o.native_cache_max_age)},
  };
}

// Each long flag: the arguments ParsesEveryLongFlag gives it, the option it
// sets (as Fields names it), that option's default and its value after them.
struct LongFlag {
  std::vector<std::string> args;
  const char* field;
  const char* default_value;
  const char* parsed_value;
};
const LongFlag kLongFlags[] = {
    {{"--pid", "12", "--pid", "34"}, "pids", "", "12 34"},
    {{"--sample-rate", "2000000"}, "sample_period_ns", "1000000", "2000000"},
    {{"--duration", "5"}, "duration_seconds", "0", "5"},
    {{"--update-interval", "3"}, "update_interval_seconds", "10", "3"},
    {{"--symbols-map-size", "1000"}, "symbols_map_size", "32768", "1000"},
    {{"--events-buffer-pages", "128"}, "events_buffer_pages", "64", "128"},
    {{"--kernel-stacks-map-size", "4096"}, "kernel_stacks_map_size", "32768", "4096"},
    {{"--user-stacks-pages", "0"}, "user_stacks_pages", "2", "0"},
    {{"--verbose", "3"}, "verbosity", "0", "3"},
    {{"--output", "/tmp/out.col"}, "output_path", "", "/tmp/out.col"},
    {{"--fs-offset", "0xb78"}, "fs_offset", "unset", "2936"},
    {{"--stack-offset", "32"}, "stack_offset", "unset", "32"},
    {{"--insert-dso-name"}, "insert_dso_name", "off", "on"},
    {{"--line-numbers", "current"}, "line_numbers", "first", "current"},
    {{"--native-cache", "off"}, "native_cache", "on", "off"},
    {{"--native-cache-entries", "1024"}, "native_cache_entries", "65536", "1024"},
    {{"--native-cache-bytes", "512K"}, "native_cache_bytes", "16777216", "524288"},  // 16 MiB
    {{"--native-cache-max-age", "7"}, "native_cache_max_age", "600", "7"},
};

TEST(Options, DefaultsWithNoArguments) {
  Options o = Valid({});
  auto fields = Fields(o);
  EXPECT_EQ(fields.at("sample_mode"), "period");
  for (const LongFlag& flag : kLongFlags)
    EXPECT_EQ(fields.at(flag.field), flag.default_value) << flag.field;
  EXPECT_TRUE(o.warnings.empty());
}

TEST(Options, ParsesEveryLongFlag) {
  std::vector<std::string> args;
  for (const LongFlag& flag : kLongFlags)
    args.insert(args.end(), flag.args.begin(), flag.args.end());
  auto fields = Fields(Valid(args));
  EXPECT_EQ(fields.at("sample_mode"), "period");
  for (const LongFlag& flag : kLongFlags)
    EXPECT_EQ(fields.at(flag.field), flag.parsed_value) << flag.field << " after " << flag.args[0];
}

TEST(Options, ParsesShortFlags) {
  Options o = Valid({"-p", "7", "-c", "500000", "-d", "2", "-v", "1", "-o", "out"});
  EXPECT_EQ(o.pids, std::vector<int>{7});
  EXPECT_EQ(o.sample_period_ns, 500000u);
  EXPECT_EQ(o.duration_seconds, 2u);
  EXPECT_EQ(o.verbosity, 1);
  EXPECT_EQ(o.output_path, "out");
}

TEST(Options, FrequencySelectsFrequencyMode) {
  Options o = Valid({"-F", "99"});
  EXPECT_EQ(o.sample_mode, SampleMode::kFrequency);
  EXPECT_EQ(o.sample_frequency_hz, 99u);
  o = Valid({"--frequency", "1000"});
  EXPECT_EQ(o.sample_mode, SampleMode::kFrequency);
  EXPECT_EQ(o.sample_frequency_hz, 1000u);
}

TEST(Options, AcceptsEqualsAndAttachedForms) {
  Options o = Valid({"--verbose=2", "-d7", "--output=/x/y"});
  EXPECT_EQ(o.verbosity, 2);
  EXPECT_EQ(o.duration_seconds, 7u);
  EXPECT_EQ(o.output_path, "/x/y");
}

TEST(Options, RepeatedSingleValueFlagKeepsTheLast) {
  EXPECT_EQ(Valid({"-v", "1", "-v", "4"}).verbosity, 4);
}

TEST(Options, LeadingZeroIsDecimalNotOctal) {
  EXPECT_EQ(Valid({"--fs-offset", "010"}).fs_offset, 10u);
  EXPECT_EQ(Valid({"--stack-offset", "0X20"}).stack_offset, 32u);
}

TEST(Options, NativeCacheBytesSuffixes) {
  EXPECT_EQ(Valid({"--native-cache-bytes", "16M"}).native_cache_bytes, 16u << 20);
  EXPECT_EQ(Valid({"--native-cache-bytes", "16MiB"}).native_cache_bytes, 16u << 20);
  EXPECT_EQ(Valid({"--native-cache-bytes", "1g"}).native_cache_bytes, 1u << 30);
  EXPECT_EQ(Valid({"--native-cache-bytes", "4096"}).native_cache_bytes, 4096u);
  EXPECT_EQ(Valid({"--native-cache-bytes", "100B"}).native_cache_bytes, 100u);
}

TEST(Options, UserStacksPagesAboveTheCapAreCappedWithAWarning) {
  Options o = Valid({"--user-stacks-pages", "32"});
  EXPECT_EQ(o.user_stacks_pages, kMaxUserStacksPages);
  ASSERT_EQ(o.warnings.size(), 1u);
  EXPECT_NE(o.warnings[0].find("capped to 15"), std::string::npos) << o.warnings[0];
  // At the cap: no warning.
  EXPECT_TRUE(Valid({"--user-stacks-pages", "15"}).warnings.empty());
}

TEST(Options, InterleavedNativeFramesCopyEightPagesUnlessToldAndNeedNativeFrames) {
  EXPECT_EQ(Valid({}).native_frames, NativeFramesMode::kLeaf);
  Options o = Valid({"--native-frames", "interleaved"});
  EXPECT_EQ(o.native_frames, NativeFramesMode::kInterleaved);
  EXPECT_EQ(o.user_stacks_pages, kInterleavedUserStacksPages);
  EXPECT_EQ(Valid({"--native-frames", "interleaved", "--user-stacks-pages", "3"}).user_stacks_pages,
            3u);
  EXPECT_EQ(Valid({"--native-frames", "leaf"}).user_stacks_pages, 2u);
  EXPECT_NE(Refused({"--native-frames", "interleaved", "--user-stacks-pages", "0"})
                .find("needs native frames"),
            std::string::npos);
  EXPECT_NE(Refused({"--native-frames", "mixed"}).find("--native-frames"), std::string::npos);
}

TEST(Options, AsyncTasksIsASwitchInEitherNativeFramesMode) {
  EXPECT_FALSE(Valid({}).async_tasks);
  EXPECT_TRUE(Valid({"--async-tasks"}).async_tasks);
  const Options o = Valid({"--async-tasks", "--native-frames", "interleaved"});
  EXPECT_TRUE(o.async_tasks);
  EXPECT_EQ(o.native_frames, NativeFramesMode::kInterleaved);
}

// gProfiler's PythonEbpfProfiler.test(): its output path has a random prefix.
TEST(Options, GProfilerTestCommandLine) {
  Options o =
      Valid({"--output", "/tmp/x/pyperf.abcdefghijklmnop.col", "-F", "1", "--duration", "1"});
  EXPECT_EQ(o.output_path, "/tmp/x/pyperf.abcdefghijklmnop.col");
  EXPECT_EQ(o.sample_mode, SampleMode::kFrequency);
  EXPECT_EQ(o.sample_frequency_hz, 1u);
  EXPECT_EQ(o.duration_seconds, 1u);
}

// The same, with the offsets gProfiler computed with its helper programs.
TEST(Options, GProfilerTestCommandLineWithOffsets) {
  Options o = Valid({"--fs-offset", "2936", "--stack-offset", "32", "--output",
                     "/tmp/x/pyperf.abcdefghijklmnop.col", "-F", "1", "--duration", "1"});
  EXPECT_EQ(o.fs_offset, 2936u);
  EXPECT_EQ(o.stack_offset, 32u);
  EXPECT_EQ(o.output_path, "/tmp/x/pyperf.abcdefghijklmnop.col");
  EXPECT_EQ(o.sample_frequency_hz, 1u);
  EXPECT_EQ(o.duration_seconds, 1u);
}

// gProfiler's PythonEbpfProfiler.start() with every optional part present.
TEST(Options, GProfilerStartCommandLine) {
  Options o = Valid({"--output", "/tmp/x/pyperf.abcdefghijklmnop.col", "-F", "11",
                     "--events-buffer-pages", "256", "--symbols-map-size", "131072",
                     "--insert-dso-name", "--user-stacks-pages", "4", "-v", "4"});
  EXPECT_EQ(o.output_path, "/tmp/x/pyperf.abcdefghijklmnop.col");
  EXPECT_EQ(o.sample_mode, SampleMode::kFrequency);
  EXPECT_EQ(o.sample_frequency_hz, 11u);
  EXPECT_EQ(o.events_buffer_pages, 256u);
  EXPECT_EQ(o.symbols_map_size, 131072u);
  EXPECT_TRUE(o.insert_dso_name);
  EXPECT_EQ(o.user_stacks_pages, 4u);
  EXPECT_EQ(o.verbosity, 4);
  EXPECT_EQ(o.duration_seconds, 0u);  // runs until signalled
}

// What --help must list, in this order: each flag's names, its value and the
// default it states. Written out here, not taken from PyPerfOptions, so a flag
// that goes missing, is renamed or changes its default fails the test.
struct ExpectedFlag {
  const char* names;
  const char* value;
  const char* default_text;  // nullptr: none stated
};
constexpr ExpectedFlag kExpectedFlags[] = {
    {"-h,--help", "", nullptr},
    {"-p,--pid", "PID ...", "every Python process"},
    {"-c,--sample-rate", "PERIOD", "1000000 = 1 kHz"},
    {"-F,--frequency", "HZ", "use -c's period"},
    {"-d,--duration", "SEC", "0"},
    {"--update-interval", "SEC", "10"},
    {"--symbols-map-size", "N", "32768"},
    {"--events-buffer-pages", "N", "64"},
    {"--kernel-stacks-map-size", "N", "32768"},
    {"--user-stacks-pages", "N", "2"},
    {"-v,--verbose", "LEVEL", "0"},
    {"-o,--output", "PATH", "print to stdout"},
    {"--format", "FORMATS", "collapsed"},
    {"--fs-offset", "N", "computed from kernel BTF"},
    {"--stack-offset", "N", "computed from kernel BTF"},
    {"--insert-dso-name", "", "off"},
    {"--line-numbers", "first|current", "first"},
    {"--native-frames", "leaf|interleaved", "leaf"},
    {"--async-tasks", "", "off"},
    {"--native-cache", "on|off", "on"},
    {"--native-cache-entries", "N", "65536"},
    {"--native-cache-bytes", "SIZE", "16M"},
    {"--native-cache-max-age", "ROUNDS", "600"},
};

TEST(Options, HelpListsEveryFlagWithItsDefault) {
  // -v --help reaches the help through the missing-value check, the others
  // through CLI11: all three must print the same flags.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"-h"}, {"--help"}, {"-v", "--help"}}) {
    SCOPED_TRACE(args.back() + (args.size() > 1 ? " after " + args.front() : ""));
    CommandLine cl = Parse(args);
    EXPECT_EQ(cl.action, CommandLine::Action::kPrintHelp);
    EXPECT_EQ(cl.exit_code, 0);
    auto listed = pyperf_test::ParseHelpOptions(cl.message);
    ASSERT_EQ(listed.size(), std::size(kExpectedFlags)) << cl.message;
    for (size_t i = 0; i < listed.size(); ++i) {
      const ExpectedFlag& expected = kExpectedFlags[i];
      EXPECT_EQ(listed[i].Names(), expected.names);
      EXPECT_EQ(listed[i].value, expected.value) << expected.names;
      if (expected.default_text) {
        EXPECT_EQ(listed[i].default_text, std::string(expected.default_text)) << expected.names;
      } else {
        EXPECT_FALSE(listed[i].default_text.has_value()) << expected.names;
      }
    }
  }
}

// A range the help states ("A to B", or "at least A") is the range the
// parser takes: its ends are accepted and the numbers just outside them are
// refused as out of range.
TEST(Options, StatedRangesAreTheAcceptedRanges) {
  auto listed = pyperf_test::ParseHelpOptions(HelpText());
  size_t ranges = 0, lower_bounds = 0;
  for (const auto& option : listed) {
    size_t at_least = option.description.find(", at least ");
    if (!option.range && at_least != std::string::npos) {
      ++lower_bounds;
      const std::string& name = option.names.back();
      uint64_t min = std::stoull(option.description.substr(at_least + 11));
      SCOPED_TRACE(name + " at least " + std::to_string(min));
      Valid({name, std::to_string(min)});
      if (min > 0) {
        EXPECT_NE(Refused({name, std::to_string(min - 1)}).find("is out of range"),
                  std::string::npos);
      }
    }
    if (!option.range) continue;
    ++ranges;
    const std::string& name = option.names.back();
    SCOPED_TRACE(name + " " + *option.range);
    size_t to = option.range->find(" to ");
    ASSERT_NE(to, std::string::npos);
    uint64_t min = std::stoull(option.range->substr(0, to));
    uint64_t max = std::stoull(option.range->substr(to + 4));
    Valid({name, std::to_string(min)});
    Valid({name, std::to_string(max)});
    if (min > 0) {
      EXPECT_NE(Refused({name, std::to_string(min - 1)}).find("is out of range"),
                std::string::npos);
    }
    EXPECT_NE(Refused({name, std::to_string(max + 1)}).find("is out of range (" + *option.range),
              std::string::npos);
  }
  EXPECT_GE(ranges, 3u) << "-c, -F and -v state their ranges";
  EXPECT_GE(lower_bounds, 1u) << "--update-interval states its least value";
}

// --insert-dso-name alone turns the option on; with a value it takes CLI11's
// words for true and false, and the last one given counts.
TEST(Options, InsertDsoNameTakesAnOptionalTruthValue) {
  EXPECT_FALSE(Valid({}).insert_dso_name);
  EXPECT_TRUE(Valid({"--insert-dso-name"}).insert_dso_name);
  EXPECT_TRUE(Valid({"--insert-dso-name=true"}).insert_dso_name);
  EXPECT_FALSE(Valid({"--insert-dso-name=false"}).insert_dso_name);
  EXPECT_FALSE(Valid({"--insert-dso-name", "--insert-dso-name=off"}).insert_dso_name);
  EXPECT_TRUE(Valid({"--insert-dso-name=0", "--insert-dso-name"}).insert_dso_name);
  Refused({"--insert-dso-name=abc"});
}

TEST(Options, HelpWinsOverOtherMistakes) {
  EXPECT_EQ(Parse({"-v", "--help"}).action, CommandLine::Action::kPrintHelp);
}

TEST(Options, UnknownFlagIsAnError) {
  EXPECT_EQ(Refused({"--no-such-flag"}),
            "PyPerf: error: unknown option '--no-such-flag' (see --help)");
  EXPECT_EQ(Refused({"-F", "1", "--no-such-flag=3"}),
            "PyPerf: error: unknown option '--no-such-flag' (see --help)");
  EXPECT_EQ(Refused({"-x"}), "PyPerf: error: unknown option '-x' (see --help)");
}

TEST(Options, StrayArgumentIsAnError) {
  // One value per -p; repeat the flag for more processes.
  EXPECT_EQ(Refused({"-p", "1", "2"}), "PyPerf: error: unexpected argument '2' (see --help)");
  EXPECT_EQ(Refused({"--", "3"}), "PyPerf: error: unexpected argument '3' (see --help)");
}

TEST(Options, TrailingFlagWithoutValueIsAnError) {
  EXPECT_EQ(Refused({"-F", "1", "-v"}), "PyPerf: error: -v/--verbose: missing value (see --help)");
  EXPECT_NE(Refused({"--output"}).find("--output: missing value"), std::string::npos);
}

TEST(Options, FlagFollowedByAnotherFlagIsMissingItsValue) {
  EXPECT_EQ(Refused({"-v", "--pid", "3"}),
            "PyPerf: error: -v/--verbose: missing value (see --help)");
  EXPECT_NE(Refused({"--duration", "--insert-dso-name"}).find("-d/--duration: missing value"),
            std::string::npos);
}

TEST(Options, MalformedNumbersAreErrors) {
  EXPECT_EQ(Refused({"-F", "abc"}),
            "PyPerf: error: -F/--frequency: 'abc' is not a non-negative integer (see --help)");
  ExpectEachRefused({
      {"-F", "10x"},
      {"-F", "1.5"},
      {"-F", " 1"},
      {"-F", "+1"},
      {"-F", ""},
      {"-d", "-1"},
      {"--fs-offset", "0x"},
      {"--fs-offset", "0xZZ"},
      {"-p", "abc"},
      {"--native-cache-bytes", "16Q"},
      {"--native-cache-bytes", "M"},
      {"--symbols-map-size", "99999999999999999999999"},  // overflows u64
  });
}

TEST(Options, OutOfRangeNumbersAreErrors) {
  EXPECT_EQ(Refused({"-v", "5"}),
            "PyPerf: error: -v/--verbose: 5 is out of range (0 to 4) (see --help)");
  ExpectEachRefused({
      {"-F", "0"},
      {"-c", "0"},
      {"--update-interval", "0"},
      {"--symbols-map-size", "0"},
      {"--kernel-stacks-map-size", "0"},
      {"--events-buffer-pages", "0"},
      {"--native-cache-entries", "0"},
      {"--native-cache-max-age", "0"},
      {"--fs-offset", "99999999"},
      {"--user-stacks-pages", "99999999999"},
      {"-p", "0"},
      {"--native-cache-bytes", "99999999999T"},  // overflows when scaled
  });
}

TEST(Options, EventsBufferPagesMustBeAPowerOfTwo) {
  EXPECT_EQ(Refused({"--events-buffer-pages", "100"}),
            "PyPerf: error: --events-buffer-pages: 100 is not a power of 2 (see --help)");
  EXPECT_EQ(Valid({"--events-buffer-pages", "1"}).events_buffer_pages, 1u);
}

TEST(Options, BadChoicesAreErrors) {
  EXPECT_NE(Refused({"--line-numbers", "last"}).find("'last' is not one of first, current"),
            std::string::npos);
  Refused({"--native-cache", "yes"});
}

TEST(Options, SampleRateAndFrequencyAreMutuallyExclusive) {
  EXPECT_EQ(Refused({"-c", "1000000", "-F", "99"}),
            "PyPerf: error: -c/--sample-rate and -F/--frequency cannot be used together "
            "(see --help)");
}

TEST(Options, EmptyOutputPathIsAnError) { Refused({"--output="}); }

TEST(Options, FormatIsCollapsedUnlessAskedOtherwise) {
  EXPECT_EQ(Parse({}).options.formats, std::vector<ProfileFormat>{ProfileFormat::kCollapsed});
  EXPECT_EQ(Parse({"--format", "pprof"}).options.formats,
            std::vector<ProfileFormat>{ProfileFormat::kPprof});
  EXPECT_EQ(Parse({"-o", "/tmp/p", "--format", "flamegraph,collapsed,speedscope"}).options.formats,
            (std::vector<ProfileFormat>{ProfileFormat::kFlameGraph, ProfileFormat::kCollapsed,
                                        ProfileFormat::kSpeedscope}));
}

TEST(Options, BadFormatsAreRefusedWithTheReason) {
  EXPECT_EQ(Refused({"--format", "svg"}),
            "PyPerf: error: --format: 'svg' is not one of collapsed, flamegraph, speedscope, "
            "pprof (see --help)");
  EXPECT_EQ(Refused({"--format", ""}),
            "PyPerf: error: --format: '' is not one of collapsed, flamegraph, speedscope, "
            "pprof (see --help)");
  EXPECT_EQ(Refused({"-o", "/tmp/p", "--format", "pprof,pprof"}),
            "PyPerf: error: --format: pprof is given twice (see --help)");
  EXPECT_EQ(Refused({"--format", "collapsed,pprof"}),
            "PyPerf: error: --format: several formats need -o/--output (stdout takes one) (see "
            "--help)");
}

}  // namespace
}  // namespace ebpf::pyperf
