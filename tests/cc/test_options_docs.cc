// The flags are described in three places: `PyPerf --help` (built from the
// code), the README's "Command line" block and the manual page
// (debian/PyPerf.8). The help is the one source: each document lists every
// flag it lists, in its order, with the same names and value, states the same
// default wherever the help states one, and gives no other range than the
// help's; neither names a flag the help lacks.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "support/option_docs.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

std::string RunHelp() {
  CommandResult result = RunCommand({PyPerfBinary(), "--help"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  return result.out;
}

std::string LongName(const OptionDoc& doc) {
  for (const auto& name : doc.names)
    if (name.rfind("--", 0) == 0) return name;
  return doc.Names();
}

// Adds a failure for each way `docs` (from `where`) departs from `help`.
void ExpectMatchesHelp(const std::vector<OptionDoc>& help, const std::vector<OptionDoc>& docs,
                       const std::string& where) {
  ASSERT_FALSE(help.empty()) << "--help lists no options";
  std::set<std::string> help_names;
  for (const auto& option : help) help_names.insert(option.names.begin(), option.names.end());

  std::vector<std::string> help_order, doc_order;
  for (const auto& option : help) help_order.push_back(LongName(option));
  for (const auto& doc : docs) {
    doc_order.push_back(LongName(doc));
    for (const auto& name : doc.names)
      EXPECT_TRUE(help_names.count(name))
          << where << " documents " << name << ", which --help lacks";
    for (const auto& flag : LongFlagsIn(doc.description))
      EXPECT_TRUE(help_names.count(flag)) << where << " mentions " << flag << " (under "
                                          << LongName(doc) << "), which --help lacks";
  }
  EXPECT_EQ(doc_order, help_order)
      << where << " does not list the flags --help lists, in its order";

  for (const auto& option : help) {
    SCOPED_TRACE(where + ", " + LongName(option));
    auto doc = std::find_if(docs.begin(), docs.end(),
                            [&](const OptionDoc& d) { return LongName(d) == LongName(option); });
    if (doc == docs.end()) continue;  // reported by the order check
    EXPECT_EQ(doc->Names(), option.Names());
    EXPECT_EQ(doc->value, option.value);
    if (option.default_text) {
      EXPECT_EQ(doc->default_text.value_or("(none stated)"), *option.default_text)
          << "in: " << doc->description;
    } else {
      EXPECT_FALSE(doc->default_text) << "--help states no default; in: " << doc->description;
    }
    if (doc->range) {
      EXPECT_EQ(*doc->range, option.range.value_or("(none stated)")) << "in: " << doc->description;
    }
  }
}

TEST(OptionDocs, ReadmeCommandLineBlockMatchesHelp) {
  std::string readme = ReadFile(std::string(PYPERF_SOURCE_DIR) + "/README.md");
  ASSERT_FALSE(readme.empty());
  ExpectMatchesHelp(ParseHelpOptions(RunHelp()), ParseReadmeOptions(readme), "README.md");
}

TEST(OptionDocs, ManPageMatchesHelp) {
  std::string page = ReadFile(std::string(PYPERF_SOURCE_DIR) + "/debian/PyPerf.8");
  ASSERT_FALSE(page.empty());
  std::vector<OptionDoc> help = ParseHelpOptions(RunHelp());
  ExpectMatchesHelp(help, ParseManPageOptions(page), "PyPerf.8");
  // Anywhere in the page, not only under OPTIONS.
  std::set<std::string> help_names;
  for (const auto& option : help) help_names.insert(option.names.begin(), option.names.end());
  for (const auto& flag : LongFlagsIn(ManPageText(page)))
    EXPECT_TRUE(help_names.count(flag)) << "PyPerf.8 mentions " << flag << ", which --help lacks";
}

// The readers themselves, on text whose options are known.
TEST(OptionDocs, ReadersFindNamesValuesDefaultsAndRanges) {
  auto help = ParseHelpOptions(
      "Options:\n"
      "  -h,--help            Print help\n"
      "  -c,--rate PERIOD     Every PERIOD ns, 10 to 20 (default: 15 = fast; not with -F)\n");
  ASSERT_EQ(help.size(), 2u);
  EXPECT_EQ(help[0].Names(), "-h,--help");
  EXPECT_EQ(help[0].value, "");
  EXPECT_FALSE(help[0].default_text);
  EXPECT_EQ(help[1].Names(), "-c,--rate");
  EXPECT_EQ(help[1].value, "PERIOD");
  EXPECT_EQ(help[1].default_text, "15 = fast");
  EXPECT_EQ(help[1].range, "10 to 20");

  auto readme = ParseReadmeOptions(
      "## Command line\n\n```\nPyPerf [OPTIONS]\n"
      "  --pid PID ...     Only this process;\n"
      "                    more text (default 7)\n```\n  --after X   not in the block\n");
  ASSERT_EQ(readme.size(), 1u);
  EXPECT_EQ(readme[0].value, "PID ...");
  EXPECT_EQ(readme[0].description, "Only this process; more text (default 7)");
  EXPECT_EQ(readme[0].default_text, "7");

  auto page = ParseManPageOptions(
      ".SH OPTIONS\n.TP\n.BR \\-p \", \" \\-\\-pid \" \\fIPID\\fR ...\"\nOne\n.I PID\n"
      "(default: all).\n.TP\n.BR \\-\\-mode \" \\fBa\\fR|\\fBb\\fR\"\nA or B.\n.SH NEXT\n.TP\n");
  ASSERT_EQ(page.size(), 2u);
  EXPECT_EQ(page[0].Names(), "-p,--pid");
  EXPECT_EQ(page[0].value, "PID ...");
  EXPECT_EQ(page[0].description, "One PID (default: all).");
  EXPECT_EQ(page[0].default_text, "all");
  EXPECT_EQ(page[1].Names(), "--mode");
  EXPECT_EQ(page[1].value, "a|b");
  EXPECT_EQ(LongFlagsIn("use --a-b, not x--c or ---d"), std::vector<std::string>{"--a-b"});
}

}  // namespace
}  // namespace pyperf_test
