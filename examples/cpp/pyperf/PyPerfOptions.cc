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
#include <limits>
#include <string_view>

namespace pyperf {
namespace {

// Text of an option that takes a value, with the option itself so we know
// whether it was given at all.
struct ValueArg {
  std::string text;
  CLI::Option* option = nullptr;
  bool given() const { return option != nullptr && option->count() > 0; }
};

struct RawArgs {
  std::vector<std::string> pids;
  CLI::Option* pid_option = nullptr;
  ValueArg sample_rate, frequency, duration, update_interval, symbols_map_size, events_buffer_pages,
      kernel_stacks_map_size, user_stacks_pages, verbose, output, fs_offset, stack_offset,
      line_numbers, format, native_cache, native_cache_entries, native_cache_bytes,
      native_cache_max_age;
  bool insert_dso_name = false;
};

constexpr char kProgramName[] = "PyPerf";

// Declares every flag. The defaults the help states are Options' own values;
// the values are bound as text and converted by Convert().
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

  auto value = [&app](const char* names, ValueArg& arg, const char* type, const std::string& help) {
    arg.option = app.add_option(names, arg.text, help)->type_name(type);
  };
  const Options defaults;
  auto by_default = [](const std::string& value) { return " (default: " + value + ")"; };
  auto number = [](uint64_t n) { return std::to_string(n); };
  auto on_off = [](bool on) { return std::string(on ? "on" : "off"); };

  raw.pid_option = app.add_option("-p,--pid", raw.pids,
                                  "Profile only this process; repeat for several "
                                  "(default: every Python process)")
                       ->type_name("PID")
                       ->allow_extra_args(false)
                       ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  value("-c,--sample-rate", raw.sample_rate, "PERIOD",
        "Sample every PERIOD ns of CPU time, 1000 to 60000000000 (default: " +
            number(kDefaultSamplePeriodNs) + " = " + number(1000000 / kDefaultSamplePeriodNs) +
            " kHz; cannot be combined with -F)");
  value("-F,--frequency", raw.frequency, "HZ",
        "Sample HZ times a second of CPU time, 1 to 1000000 (default: use -c's period)");
  value("-d,--duration", raw.duration, "SEC",
        "Stop after SEC seconds; 0 runs until SIGINT/SIGTERM" +
            by_default(number(defaults.duration_seconds)));
  value("--update-interval", raw.update_interval, "SEC",
        "Rescan for new Python processes every SEC seconds, at least 1" +
            by_default(number(defaults.update_interval_seconds)));
  value("--symbols-map-size", raw.symbols_map_size, "N",
        "Entries of the BPF map of Python symbols" + by_default(number(defaults.symbols_map_size)));
  value("--events-buffer-pages", raw.events_buffer_pages, "N",
        "Pages of perf buffer per CPU, a power of 2" +
            by_default(number(defaults.events_buffer_pages)));
  value("--kernel-stacks-map-size", raw.kernel_stacks_map_size, "N",
        "Entries of each of the two BPF maps of kernel stacks" +
            by_default(number(defaults.kernel_stacks_map_size)));
  value("--user-stacks-pages", raw.user_stacks_pages, "N",
        "4 KiB pages of user stack copied per sample for native unwinding; 0 = no native "
        "frames; values above " +
            number(kMaxUserStacksPages) + " are capped to " + number(kMaxUserStacksPages) +
            " to fit a perf record" + by_default(number(defaults.user_stacks_pages)));
  value("-v,--verbose", raw.verbose, "LEVEL",
        "Log verbosity on stderr, 0 to 4" + by_default(number(defaults.verbosity)));
  value("-o,--output", raw.output, "PATH",
        "Write collapsed stacks to the transient file PATH and, on SIGUSR2 or exit, rename it to "
        "PATH.<YYYYmmddHHMMSScc> (UTC start of the interval; --format's extension follows) and "
        "start a new PATH (default: print to stdout)");
  value("--format", raw.format, "FORMATS",
        "Output format, or a comma-separated list of them with -o (one file each per dump): "
        "collapsed, flamegraph (.html), speedscope (.speedscope.json), pprof (.pb.gz) "
        "(default: collapsed)");
  value("--fs-offset", raw.fs_offset, "N",
        "Offset of task_struct.thread.fsbase, decimal or 0x hex (default: computed from kernel "
        "BTF); checked against the running kernel at start-up");
  value("--stack-offset", raw.stack_offset, "N",
        "Offset of task_struct.stack, decimal or 0x hex (default: computed from kernel BTF); "
        "checked against the running kernel at start-up");
  app.add_flag("--insert-dso-name", raw.insert_dso_name,
               "Append the file a native frame comes from to its name" +
                   by_default(on_off(defaults.insert_dso_name)));
  value("--line-numbers", raw.line_numbers, "first|current",
        "Python frames report the function's first line or the line being executed" +
            by_default(defaults.line_numbers == LineNumberMode::kFirst ? "first" : "current"));
  value("--native-cache", raw.native_cache, "on|off",
        "Cache native symbols by file and offset, shared across processes" +
            by_default(on_off(defaults.native_cache)));
  value("--native-cache-entries", raw.native_cache_entries, "N",
        "Most entries the native symbol cache keeps" +
            by_default(number(defaults.native_cache_entries)));
  value("--native-cache-bytes", raw.native_cache_bytes, "SIZE",
        "Most memory the native symbol cache uses; suffixes K, M, G are powers of 1024" +
            by_default(number(defaults.native_cache_bytes >> 20) + "M"));
  value("--native-cache-max-age", raw.native_cache_max_age, "ROUNDS",
        "Sampling rounds an unused native cache entry, file or process survives; a round is 100 ms "
        "of sampling" +
            by_default(number(defaults.native_cache_max_age)));

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

// The complete error line main prints.
CommandLine Failure(const std::string& what) {
  CommandLine result;
  result.action = CommandLine::Action::kFail;
  result.message = std::string(kProgramName) + ": error: " + what + " (see --help)";
  result.exit_code = kUsageExitCode;
  return result;
}

// Converts a given numeric flag into *out, checking [min, max]. Returns an
// error message, or nullopt when the flag was absent or valid.
template <typename T>
std::optional<std::string> ConvertNumber(const ValueArg& arg, uint64_t min, uint64_t max, T* out,
                                         bool size_suffixes = false) {
  if (!arg.given()) return std::nullopt;
  const std::string name = DisplayName(arg.option);
  auto value = size_suffixes ? ParseSize(arg.text) : ParseUnsigned(arg.text);
  if (!value) {
    return name + ": '" + arg.text + "' is not a " +
           (size_suffixes ? "size (e.g. 16777216, 512K, 16M)" : "non-negative integer");
  }
  if (*value < min || *value > max) {
    return name + ": " + arg.text + " is out of range (" + std::to_string(min) + " to " +
           std::to_string(max) + ")";
  }
  *out = static_cast<T>(*value);
  return std::nullopt;
}

// Converts a flag whose value is one of two words.
std::optional<std::string> ConvertChoice(const ValueArg& arg, const char* first, const char* second,
                                         bool* is_first) {
  if (!arg.given()) return std::nullopt;
  if (arg.text == first) {
    *is_first = true;
  } else if (arg.text == second) {
    *is_first = false;
  } else {
    return DisplayName(arg.option) + ": '" + arg.text + "' is not one of " + first + ", " + second;
  }
  return std::nullopt;
}

// Turns the raw text into Options, or the first error found.
CommandLine Convert(const RawArgs& raw) {
  CommandLine result;
  Options& o = result.options;
  constexpr uint64_t kU32Max = std::numeric_limits<uint32_t>::max();
  constexpr uint64_t kMapMax = 1u << 24;  // far above any useful BPF map size

  if (raw.sample_rate.given() && raw.frequency.given())
    return Failure("-c/--sample-rate and -F/--frequency cannot be used together");

  for (const auto& text : raw.pids) {
    auto pid = ParseUnsigned(text);
    // pid_max is at most 2^22 on Linux.
    if (!pid || *pid == 0 || *pid > (1u << 22))
      return Failure("-p/--pid: '" + text + "' is not a process id");
    o.pids.push_back(static_cast<int>(*pid));
  }

  std::optional<std::string> error;
  auto check = [&error](std::optional<std::string> e) {
    if (!error && e) error = std::move(e);
  };
  check(ConvertNumber(raw.sample_rate, 1000, 60'000'000'000ull, &o.sample_period_ns));
  if (raw.frequency.given()) {
    check(ConvertNumber(raw.frequency, 1, 1'000'000, &o.sample_frequency_hz));
    o.sample_mode = SampleMode::kFrequency;
  }
  check(ConvertNumber(raw.duration, 0, kU32Max, &o.duration_seconds));
  check(ConvertNumber(raw.update_interval, 1, kU32Max, &o.update_interval_seconds));
  check(ConvertNumber(raw.symbols_map_size, 1, kMapMax, &o.symbols_map_size));
  check(ConvertNumber(raw.events_buffer_pages, 1, 1u << 16, &o.events_buffer_pages));
  check(ConvertNumber(raw.kernel_stacks_map_size, 1, kMapMax, &o.kernel_stacks_map_size));
  check(ConvertNumber(raw.user_stacks_pages, 0, kU32Max, &o.user_stacks_pages));
  check(ConvertNumber(raw.verbose, 0, 4, &o.verbosity));
  // task_struct is a few KiB; anything near 1 MiB is a mistake.
  uint32_t offset = 0;
  if (raw.fs_offset.given()) {
    check(ConvertNumber(raw.fs_offset, 0, 1u << 20, &offset));
    o.fs_offset = offset;
  }
  if (raw.stack_offset.given()) {
    check(ConvertNumber(raw.stack_offset, 0, 1u << 20, &offset));
    o.stack_offset = offset;
  }
  bool first = true;
  check(ConvertChoice(raw.line_numbers, "first", "current", &first));
  o.line_numbers = first ? LineNumberMode::kFirst : LineNumberMode::kCurrent;
  check(ConvertChoice(raw.native_cache, "on", "off", &o.native_cache));
  check(ConvertNumber(raw.native_cache_entries, 1, 1u << 26, &o.native_cache_entries));
  check(ConvertNumber(raw.native_cache_bytes, 1, 1ull << 40, &o.native_cache_bytes, true));
  check(ConvertNumber(raw.native_cache_max_age, 1, kU32Max, &o.native_cache_max_age));
  if (error) return Failure(*error);

  if (raw.events_buffer_pages.given() &&
      (o.events_buffer_pages & (o.events_buffer_pages - 1)) != 0) {
    return Failure("--events-buffer-pages: " + raw.events_buffer_pages.text +
                   " is not a power of 2");
  }
  if (raw.output.given()) {
    if (raw.output.text.empty()) return Failure("-o/--output: the path is empty");
    o.output_path = raw.output.text;
  }
  if (o.user_stacks_pages > kMaxUserStacksPages) {
    // Capped rather than refused: a too-large request from a caller such as
    // gProfiler should still profile, with the most that fits a perf record.
    o.warnings.push_back("--user-stacks-pages " + std::to_string(o.user_stacks_pages) +
                         " capped to " + std::to_string(kMaxUserStacksPages) +
                         ": one sample must fit in a 64 KiB perf record");
    o.user_stacks_pages = kMaxUserStacksPages;
  }
  if (raw.format.given()) {
    o.formats.clear();
    std::string_view list = raw.format.text;
    while (true) {
      size_t comma = list.find(',');
      std::string_view name = list.substr(0, comma);
      std::optional<ProfileFormat> format = ParseProfileFormat(name);
      if (!format) {
        return Failure("--format: '" + std::string(name) +
                       "' is not one of collapsed, flamegraph, speedscope, pprof");
      }
      if (std::find(o.formats.begin(), o.formats.end(), *format) != o.formats.end()) {
        return Failure("--format: " + std::string(name) + " is given twice");
      }
      o.formats.push_back(*format);
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
    if (o.formats.size() > 1 && o.output_path.empty()) {
      return Failure("--format: several formats need -o/--output (stdout takes one)");
    }
  }
  o.insert_dso_name = raw.insert_dso_name;
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

}  // namespace pyperf
