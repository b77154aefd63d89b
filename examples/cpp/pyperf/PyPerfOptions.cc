// PyPerfOptions: see PyPerfOptions.h.
//
// CLI11 does the tokenising (long/short names, --name=value, -v4, repeats,
// --help). Every value is taken as text and converted here, because CLI11's
// integer conversion reads a leading 0 as octal and its messages do not say
// which range is allowed; converting ourselves gives one message style for
// every mistake. CLI11 throws; nothing escapes this file.
#include "PyPerfOptions.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <functional>
#include <limits>
#include <string_view>
#include <utility>

namespace ebpf::pyperf {
namespace {

constexpr char kProgramName[] = "PyPerf";
constexpr uint64_t kU32Max = std::numeric_limits<uint32_t>::max();
constexpr uint64_t kMapMax = 1u << 24;         // far above any useful BPF map size
constexpr uint64_t kTaskStructMax = 1u << 20;  // task_struct is a few KiB; 1 MiB is a mistake

// A non-negative integer: decimal (a leading 0 does not mean octal) or 0x hex.
// No sign, no spaces, no overflow.
std::optional<uint64_t> ParseUnsigned(std::string_view text) {
  int base = 10;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    base = 16;
    text.remove_prefix(2);
  }
  if (text.empty()) return std::nullopt;
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// A size in bytes: a number with an optional K/M/G/T suffix (powers of 1024),
// optionally followed by "B" or "iB": 16777216, 16M, 16MiB, 512k.
std::optional<uint64_t> ParseSize(std::string_view text) {
  bool hex = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  size_t digits = text.size();
  if (!hex) {
    digits = 0;
    while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  }
  auto number = ParseUnsigned(text.substr(0, digits));
  if (!number) return std::nullopt;
  std::string suffix;
  for (char c : text.substr(digits)) suffix += static_cast<char>(std::tolower(c));
  int shift = 0;
  if (!suffix.empty()) {
    static constexpr std::string_view kUnits = "kmgt";
    auto unit = kUnits.find(suffix[0]);
    if (unit != std::string_view::npos) {
      shift = 10 * (static_cast<int>(unit) + 1);
      suffix.erase(0, 1);
      if (suffix != "" && suffix != "b" && suffix != "ib") return std::nullopt;
    } else if (suffix != "b") {
      return std::nullopt;
    }
  }
  if (shift > 0 && *number > (std::numeric_limits<uint64_t>::max() >> shift)) return std::nullopt;
  return *number << shift;
}

// What a flag's value is and where it goes: the placeholder --help shows, the
// range it states, the default it states (Options{}'s own value), and the
// conversion of the given text into Options. A conversion returns what is
// wrong with the text, which the caller prefixes with the flag's names.
struct FlagValue {
  using Converter = std::function<std::optional<std::string>(const std::string& text, Options& o)>;
  std::string placeholder;  // empty: a switch, which takes no value (its text is "on" or "off")
  Converter convert;
  std::string range;         // replaces "{range}" in the help
  std::string default_text;  // appended to the help unless it states its own default
};

// One flag of the command line, declared once: --help, parsing and the range
// check all come from it.
struct Flag {
  const char* names;
  FlagValue value;
  std::string help;
};

std::string RangeText(uint64_t min, uint64_t max) {
  if (max == kU32Max) return "at least " + std::to_string(min);
  return std::to_string(min) + " to " + std::to_string(max);
}

// How a number is written: a plain integer, or a size such as 16M.
enum class Notation { kInteger, kSize };

// A whole number in [min, max], handed to `store`.
template <typename Store>
FlagValue NumberInto(std::string placeholder, uint64_t min, uint64_t max, Notation notation,
                     Store store, std::string default_text) {
  auto convert = [=](const std::string& text, Options& o) -> std::optional<std::string> {
    bool size = notation == Notation::kSize;
    auto value = size ? ParseSize(text) : ParseUnsigned(text);
    if (!value) {
      return "'" + text + "' is not a " +
             (size ? "size (e.g. 16777216, 512K, 16M)" : "non-negative integer");
    }
    if (*value < min || *value > max) {
      return text + " is out of range (" + std::to_string(min) + " to " + std::to_string(max) + ")";
    }
    store(o, *value);
    return std::nullopt;
  };
  return {std::move(placeholder), convert, RangeText(min, max), std::move(default_text)};
}

template <typename T>
FlagValue Number(std::string placeholder, T Options::*field, uint64_t min, uint64_t max) {
  auto store = [field](Options& o, uint64_t value) { o.*field = static_cast<T>(value); };
  return NumberInto(std::move(placeholder), min, max, Notation::kInteger, store,
                    std::to_string(Options{}.*field));
}

// A number of bytes; the default is stated in the largest unit that divides it.
FlagValue Size(std::string placeholder, uint64_t Options::*field, uint64_t min, uint64_t max) {
  auto store = [field](Options& o, uint64_t value) { o.*field = value; };
  uint64_t bytes = Options{}.*field;
  std::string default_text = std::to_string(bytes);
  static constexpr std::pair<int, char> kUnits[] = {{30, 'G'}, {20, 'M'}, {10, 'K'}};
  for (auto [shift, unit] : kUnits) {
    if (bytes != 0 && bytes % (1ull << shift) == 0) {
      default_text = std::to_string(bytes >> shift) + unit;
      break;
    }
  }
  return NumberInto(std::move(placeholder), min, max, Notation::kSize, store, default_text);
}

// -F/--frequency: a rate that also switches sampling from period to frequency.
FlagValue Frequency(uint64_t min, uint64_t max) {
  auto store = [](Options& o, uint64_t hz) {
    o.sample_frequency_hz = hz;
    o.sample_mode = SampleMode::kFrequency;
  };
  return NumberInto("HZ", min, max, Notation::kInteger, store, "");
}

// A task_struct offset that overrides the one computed from BTF.
FlagValue Offset(std::optional<uint32_t> Options::*field) {
  auto store = [field](Options& o, uint64_t value) { o.*field = static_cast<uint32_t>(value); };
  return NumberInto("N", 0, kTaskStructMax, Notation::kInteger, store, "");
}

FlagValue PowerOfTwo(std::string placeholder, uint32_t Options::*field, uint64_t min,
                     uint64_t max) {
  FlagValue value = Number(std::move(placeholder), field, min, max);
  value.convert = [number = value.convert, field](const std::string& text,
                                                  Options& o) -> std::optional<std::string> {
    if (auto error = number(text, o)) return error;
    if ((o.*field & (o.*field - 1)) != 0) return text + " is not a power of 2";
    return std::nullopt;
  };
  return value;
}

// One of two words; the placeholder is "first|second".
template <typename T>
FlagValue Choice(T Options::*field, std::pair<const char*, T> first,
                 std::pair<const char*, T> second) {
  auto convert = [=](const std::string& text, Options& o) -> std::optional<std::string> {
    if (text == first.first) {
      o.*field = first.second;
    } else if (text == second.first) {
      o.*field = second.second;
    } else {
      return "'" + text + "' is not one of " + first.first + ", " + second.first;
    }
    return std::nullopt;
  };
  const char* default_word = Options{}.*field == first.second ? first.first : second.first;
  return {std::string(first.first) + "|" + second.first, convert, "", default_word};
}

// A flag given alone (on), or as --flag=VALUE with any of CLI11's words for
// true and false; the last one given counts.
FlagValue Switch(bool Options::*field) {
  auto convert = [field](const std::string& text, Options& o) -> std::optional<std::string> {
    o.*field = text == "on";
    return std::nullopt;
  };
  return {"", convert, "", Options{}.*field ? "on" : "off"};
}

FlagValue OutputPath() {
  auto convert = [](const std::string& text, Options& o) -> std::optional<std::string> {
    if (text.empty()) return std::string("the path is empty");
    o.output_path = text;
    return std::nullopt;
  };
  return {"PATH", convert, "", ""};
}

// "collapsed, flamegraph, ...": every format's name and, with `extensions`,
// what its dumped files' names end in.
std::string FormatNames(bool extensions) {
  std::string names;
  for (ProfileFormat format : AllProfileFormats()) {
    if (!names.empty()) names += ", ";
    names += ProfileFormatName(format);
    if (extensions && !ProfileFormatExtension(format).empty())
      names += " (" + std::string(ProfileFormatExtension(format)) + ")";
  }
  return names;
}

// A comma-separated list of formats, each at most once.
FlagValue Formats() {
  auto convert = [](const std::string& text, Options& o) -> std::optional<std::string> {
    o.formats.clear();
    std::string_view list = text;
    while (true) {
      size_t comma = list.find(',');
      std::string_view name = list.substr(0, comma);
      std::optional<ProfileFormat> format = ParseProfileFormat(name);
      if (!format) {
        return "'" + std::string(name) + "' is not one of " + FormatNames(false);
      }
      if (std::find(o.formats.begin(), o.formats.end(), *format) != o.formats.end())
        return std::string(name) + " is given twice";
      o.formats.push_back(*format);
      if (comma == std::string_view::npos) return std::nullopt;
      list.remove_prefix(comma + 1);
    }
  };
  return {"FORMATS", convert, "", std::string(ProfileFormatName(Options{}.formats.front()))};
}

// Every flag but -h and -p, in the order --help lists them, one row each
// (left unwrapped, as a table). "{range}" in a help stands for the value's
// range; a help that does not state its default gets Options{}'s.
const std::vector<Flag>& Flags() {
  auto number = [](uint64_t n) { return std::to_string(n); };
  // clang-format off
  static const std::vector<Flag> flags = {
      {"-c,--sample-rate", Number("PERIOD", &Options::sample_period_ns, 1000, 60'000'000'000ull), "Sample every PERIOD ns of CPU time, {range} (default: " + number(kDefaultSamplePeriodNs) + " = " + number(1000000 / kDefaultSamplePeriodNs) + " kHz; cannot be combined with -F)"},
      {"-F,--frequency", Frequency(1, 1'000'000), "Sample HZ times a second of CPU time, {range} (default: use -c's period)"},
      {"-d,--duration", Number("SEC", &Options::duration_seconds, 0, kU32Max), "Stop after SEC seconds; 0 runs until SIGINT/SIGTERM"},
      {"--update-interval", Number("SEC", &Options::update_interval_seconds, 1, kU32Max), "Rescan for new Python processes every SEC seconds, {range}"},
      {"--symbols-map-size", Number("N", &Options::symbols_map_size, 1, kMapMax), "Entries of the BPF map of Python symbols"},
      {"--events-buffer-pages", PowerOfTwo("N", &Options::events_buffer_pages, 1, 1u << 16), "Pages of perf buffer per CPU, a power of 2"},
      {"--kernel-stacks-map-size", Number("N", &Options::kernel_stacks_map_size, 1, kMapMax), "Entries of each of the two BPF maps of kernel stacks"},
      {"--user-stacks-pages", Number("N", &Options::user_stacks_pages, 0, kU32Max), "4 KiB pages of user stack copied per sample for native unwinding; 0 = no native frames; values above " + number(kMaxUserStacksPages) + " are capped to " + number(kMaxUserStacksPages) + " to fit a perf record"},
      {"-v,--verbose", Number("LEVEL", &Options::verbosity, 0, 4), "Log verbosity on stderr, {range}"},
      {"-o,--output", OutputPath(), "Write collapsed stacks to the transient file PATH and, on SIGUSR2 or exit, rename it to PATH.<YYYYmmddHHMMSScc> (UTC start of the interval; --format's extension follows) and start a new PATH (default: print to stdout)"},
      {"--format", Formats(), "Output format, or a comma-separated list of them with -o (one file each per dump): " + FormatNames(true)},
      {"--fs-offset", Offset(&Options::fs_offset), "Offset of task_struct.thread.fsbase, decimal or 0x hex (default: computed from kernel BTF); checked against the running kernel at start-up"},
      {"--stack-offset", Offset(&Options::stack_offset), "Offset of task_struct.stack, decimal or 0x hex (default: computed from kernel BTF); checked against the running kernel at start-up"},
      {"--insert-dso-name", Switch(&Options::insert_dso_name), "Append the file a native frame comes from to its name"},
      {"--line-numbers", Choice(&Options::line_numbers, {"first", LineNumberMode::kFirst}, {"current", LineNumberMode::kCurrent}), "Python frames report the function's first line or the line being executed"},
      {"--native-frames", Choice(&Options::native_frames, {"leaf", NativeFramesMode::kLeaf}, {"interleaved", NativeFramesMode::kInterleaved}), "Native frames above the innermost Python frame only (leaf), or the whole native stack with each eval-loop frame replaced by the Python frames it ran (interleaved; --user-stacks-pages then defaults to " + number(kInterleavedUserStacksPages) + ")"},
      {"--async-tasks", Switch(&Options::async_tasks), "CPython 3.14+: samples of a thread running an asyncio task start with the tasks awaiting it, root first, then the task's own frames (its coroutine's frame on, native ones between them with --native-frames interleaved); other versions are profiled as without it"},
      {"--native-cache", Choice(&Options::native_cache, {"on", true}, {"off", false}), "Cache native symbols by file and offset, shared across processes"},
      {"--native-cache-entries", Number("N", &Options::native_cache_entries, 1, 1u << 26), "Most entries the native symbol cache keeps"},
      {"--native-cache-bytes", Size("SIZE", &Options::native_cache_bytes, 1, 1ull << 40), "Most memory the native symbol cache uses; suffixes K, M, G are powers of 1024"},
      {"--native-cache-max-age", Number("ROUNDS", &Options::native_cache_max_age, 1, kU32Max), "Sampling rounds an unused native cache entry, file or process survives; a round is 100 ms of sampling"},
  };
  // clang-format on
  return flags;
}

// The help line of `flag`: its text with the range filled in and, unless the
// text states one, the default.
std::string HelpOf(const Flag& flag) {
  std::string help = flag.help;
  if (auto at = help.find("{range}"); at != std::string::npos)
    help.replace(at, std::string_view("{range}").size(), flag.value.range);
  if (!flag.value.default_text.empty() && help.find("(default:") == std::string::npos)
    help += " (default: " + flag.value.default_text + ")";
  return help;
}

// What CLI11 collected: the -p values, and the text (or presence) of each
// flag of Flags(), in the same order.
struct RawArgs {
  std::vector<std::string> pids;
  struct Given {
    std::string text;
    bool on = false;  // a switch's value, as CLI11 converted it
    CLI::Option* option = nullptr;
    bool given() const { return option != nullptr && option->count() > 0; }
  };
  std::vector<Given> flags = std::vector<Given>(Flags().size());

  bool given(std::string_view name) const {
    for (const Given& flag : flags) {
      if (flag.option->check_name(std::string(name))) return flag.given();
    }
    return false;
  }
};

void DefineOptions(CLI::App& app, RawArgs& raw) {
  app.name(kProgramName);
  app.description(
      "PyPerf: an eBPF sampling profiler for CPython. Samples the CPU-clock perf event and "
      "writes collapsed stacks (\"<comm>-<pid>/<tid>;frame;frame <count>\" per line).");
  // A repeated single-valued flag keeps its last value, as getopt tools do.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.get_formatter()->column_width(36);
  // Leftover arguments are reported by UnexpectedArgument(), which words the
  // message better than CLI11 ("unknown option '--foo'").
  app.allow_extras(true);

  app.add_option("-p,--pid", raw.pids,
                 "Profile only this process; repeat for several "
                 "(default: every Python process)")
      ->type_name("PID")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  for (size_t i = 0; i < Flags().size(); ++i) {
    const Flag& flag = Flags()[i];
    RawArgs::Given& given = raw.flags[i];
    if (flag.value.placeholder.empty()) {
      given.option = app.add_flag(flag.names, given.on)->description(HelpOf(flag));
    } else {
      given.option =
          app.add_option(flag.names, given.text, HelpOf(flag))->type_name(flag.value.placeholder);
    }
  }
  app.footer(
      "Exit status: 0 on success or --help, 2 on a command-line error, 1 on any other error.");
}

// "-v/--verbose" for messages, from the option's own names.
std::string DisplayName(const CLI::Option* option) {
  std::string out;
  for (const auto& s : option->get_snames()) out += "-" + s + "/";
  for (const auto& l : option->get_lnames()) out += "--" + l + "/";
  if (!out.empty()) out.pop_back();
  return out;
}

// The complete error line main prints.
CommandLine Failure(const std::string& what) {
  CommandLine result;
  result.action = CommandLine::Action::kFail;
  result.message = std::string(kProgramName) + ": error: " + what + " (see --help)";
  result.exit_code = kUsageExitCode;
  return result;
}

// Turns the raw text into Options, or the first error found.
CommandLine Convert(const RawArgs& raw) {
  CommandLine result;
  Options& o = result.options;

  if (raw.given("--sample-rate") && raw.given("--frequency"))
    return Failure("-c/--sample-rate and -F/--frequency cannot be used together");

  for (const auto& text : raw.pids) {
    auto pid = ParseUnsigned(text);
    // pid_max is at most 2^22 on Linux.
    if (!pid || *pid == 0 || *pid > (1u << 22))
      return Failure("-p/--pid: '" + text + "' is not a process id");
    o.pids.push_back(static_cast<int>(*pid));
  }
  for (size_t i = 0; i < Flags().size(); ++i) {
    const RawArgs::Given& given = raw.flags[i];
    if (!given.given()) continue;
    const Flag& flag = Flags()[i];
    std::string text = flag.value.placeholder.empty() ? (given.on ? "on" : "off") : given.text;
    if (auto error = flag.value.convert(text, o))
      return Failure(DisplayName(given.option) + ": " + *error);
  }

  if (o.formats.size() > 1 && o.output_path.empty())
    return Failure("--format: several formats need -o/--output (stdout takes one)");
  if (o.native_frames == NativeFramesMode::kInterleaved) {
    if (!raw.given("--user-stacks-pages")) o.user_stacks_pages = kInterleavedUserStacksPages;
    if (o.user_stacks_pages == 0)
      return Failure("--native-frames interleaved: needs native frames (--user-stacks-pages 0)");
  }
  if (o.user_stacks_pages > kMaxUserStacksPages) {
    // Capped rather than refused: a too-large request from a caller such as
    // gProfiler should still profile, with the most that fits a perf record.
    o.warnings.push_back("--user-stacks-pages " + std::to_string(o.user_stacks_pages) +
                         " capped to " + std::to_string(kMaxUserStacksPages) +
                         ": one sample must fit in a 64 KiB perf record");
    o.user_stacks_pages = kMaxUserStacksPages;
  }
  return result;
}

// CLI11 lets an option that needs a value swallow the next token even when it
// is another flag ("-v --pid 3" would set verbosity to "--pid" and then
// complain about "3"). Catch that first so the message names the real
// mistake. A token is a flag if it starts with '-' and is not a negative
// number or a lone "-".
std::optional<std::string> FindMissingValue(const CLI::App& app, int argc,
                                            const char* const argv[]) {
  auto looks_like_flag = [](std::string_view token) {
    return token.size() > 1 && token[0] == '-' &&
           !std::isdigit(static_cast<unsigned char>(token[1]));
  };
  for (int i = 1; i < argc; ++i) {
    std::string_view token = argv[i];
    if (token == "--") break;
    if (!looks_like_flag(token) || token.find('=') != std::string_view::npos) continue;
    const CLI::Option* needs_value = nullptr;
    for (const CLI::Option* option : app.get_options()) {
      if (option->get_items_expected_min() > 0 && option->check_name(std::string(token))) {
        needs_value = option;
        break;
      }
    }
    if (needs_value == nullptr) continue;
    if (i + 1 >= argc || looks_like_flag(argv[i + 1]))
      return DisplayName(needs_value) + ": missing value";
    ++i;  // skip the value
  }
  return std::nullopt;
}

// The first argument CLI11 could not place: an unknown option or a stray word.
std::optional<std::string> UnexpectedArgument(const std::vector<std::string>& extras) {
  for (const std::string& extra : extras) {
    if (extra == "--") continue;  // the end-of-options marker is harmless alone
    bool option =
        extra.size() > 1 && extra[0] == '-' && !std::isdigit(static_cast<unsigned char>(extra[1]));
    if (option) return "unknown option '" + extra.substr(0, extra.find('=')) + "'";
    return "unexpected argument '" + extra + "'";
  }
  return std::nullopt;
}

// CLI11's messages start with a capital; ours are one lower-case clause.
std::string Clause(std::string text) {
  if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

}  // namespace

CommandLine ParseCommandLine(int argc, const char* const argv[]) {
  RawArgs raw;
  CLI::App app;
  DefineOptions(app, raw);
  if (auto missing = FindMissingValue(app, argc, argv)) {
    // --help wins over any other mistake, as CLI11 itself does.
    for (int i = 1; i < argc; ++i) {
      std::string_view token = argv[i];
      if (token == "-h" || token == "--help")
        return {CommandLine::Action::kPrintHelp, {}, HelpText(), 0};
    }
    return Failure(*missing);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    return {CommandLine::Action::kPrintHelp, {}, app.help(), 0};
  } catch (const CLI::CallForAllHelp&) {
    return {CommandLine::Action::kPrintHelp, {}, app.help(), 0};
  } catch (const CLI::Error& e) {
    return Failure(Clause(e.what()));
  } catch (const std::exception& e) {
    return Failure(Clause(e.what()));
  }
  if (auto unexpected = UnexpectedArgument(app.remaining())) return Failure(*unexpected);
  return Convert(raw);
}

CommandLine ParseCommandLine(const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  argv.reserve(args.size() + 2);
  argv.push_back(kProgramName);
  for (const auto& arg : args) argv.push_back(arg.c_str());
  argv.push_back(nullptr);
  return ParseCommandLine(static_cast<int>(args.size() + 1), argv.data());
}

std::string HelpText() {
  RawArgs raw;
  CLI::App app;
  DefineOptions(app, raw);
  return app.help();
}

}  // namespace ebpf::pyperf
