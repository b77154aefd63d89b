// Readers of the three places PyPerf's flags are described: `PyPerf --help`,
// the README's "Command line" block and the manual page (debian/PyPerf.8).
// Each gives the flags in order with what a test can compare: the names, the
// value's name, the stated default and the stated range.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace pyperf_test {

struct OptionDoc {
  std::vector<std::string> names;  // e.g. {"-c", "--sample-rate"}
  std::string value;               // e.g. "PERIOD", "PID ...", "on|off"; "" for a switch
  std::string description;         // the text, joined into one line
  // What "(default: X; ...)" or "(default X)" says, up to ';' or ')'.
  std::optional<std::string> default_text;
  // The first "A to B" with two numbers, e.g. "1000 to 60000000000".
  std::optional<std::string> range;

  std::string Names() const;  // "-c,--sample-rate"
};

// The options of `PyPerf --help` ("  -c,--sample-rate PERIOD   text").
std::vector<OptionDoc> ParseHelpOptions(const std::string& help);
// The options of the README's block under "## Command line": the same shape,
// with descriptions continued on more indented lines. Empty if there is no
// such block.
std::vector<OptionDoc> ParseReadmeOptions(const std::string& readme);
// The options of the manual page's OPTIONS section: a .TP per option, its tag
// line naming the flags and the value, its body the description.
std::vector<OptionDoc> ParseManPageOptions(const std::string& page);

// The man page's text with troff escapes and font changes taken out (\- is
// '-', \fB.. \fR dropped), macro names dropped and quotes removed.
std::string ManPageText(const std::string& page);

// Every "--word" in `text`.
std::vector<std::string> LongFlagsIn(const std::string& text);

}  // namespace pyperf_test
