// The line-table decoders (lnotab of 2.7 and 3.6 .. 3.9, the 3.10 linetable,
// the 3.11+ location table) against the interpreters themselves: each
// installed CPython compiles tests/cc/workloads/line_table_dump.py's code
// (large and negative line jumps, bodies of thousands of bytes, wide
// columns that need long-form location entries, comprehensions, exception
// handlers) and prints every code object's table with the line its own API
// (co_positions, co_lines, dis.findlinestarts) gives for each instruction
// offset; LineFromTable, with the format PyOffsets names for that version,
// must give the same line at every offset.
#include <gtest/gtest.h>

#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "PyOffsets.h"
#include "PythonStackDecoder.h"
#include "support/e2e.h"
#include "support/python_roots.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

struct CodeTable {
  std::string name;
  int first_line = 0;
  std::string table;                                      // raw bytes
  std::vector<std::pair<int, std::optional<int>>> lines;  // byte offset -> line
};

std::string FromHex(const std::string& hex) {
  std::string out;
  if (hex == "-") return out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

std::vector<CodeTable> Parse(const std::string& text) {
  std::vector<CodeTable> codes;
  for (const auto& line : SplitLines(text)) {
    std::istringstream in(line);
    std::string kind;
    in >> kind;
    if (kind == "code") {
      CodeTable c;
      std::string hex;
      in >> c.name >> c.first_line >> hex;
      c.table = FromHex(hex);
      codes.push_back(std::move(c));
    } else if (kind == "at" && !codes.empty()) {
      int offset;
      std::string value;
      in >> offset >> value;
      codes.back().lines.emplace_back(
          offset, value == "-" ? std::nullopt : std::optional<int>(std::stoi(value)));
    }
  }
  return codes;
}

struct Case {
  std::string name;
  std::string spec;  // pyenv minor, a host path, or "root:<suite>"
};

class LineTables : public ::testing::TestWithParam<Case> {};

TEST_P(LineTables, DecodersGiveTheInterpretersOwnLineAtEveryOffset) {
  const Case& c = GetParam();
  std::vector<std::string> python;
  std::string script = WorkloadPath("line_table_dump.py");
  std::unique_ptr<RootTempDir> root_dir;
  if (c.spec.rfind("root:", 0) == 0) {
    std::string why;
    auto root = EnsurePythonRoot(c.spec.substr(5), &why);
    if (!root) PYPERF_SKIP_OR_FAIL("no Debian root " + c.spec + ": " + why);
    root_dir = std::make_unique<RootTempDir>(*root);
    script = root_dir->Copy(script, "line_table_dump.py");
    python = {"chroot", root->dir, root->python};
  } else {
    auto found = FindInterpreter(c.spec);
    if (!found) PYPERF_SKIP_OR_FAIL("interpreter " + c.spec + " is not installed");
    python = {found->path};
  }
  std::vector<std::string> version_argv = python;
  version_argv.insert(version_argv.end(),
                      {"-c", "import sys; print('%d %d %d' % sys.version_info[:3])"});
  auto version_run = RunCommand(version_argv);
  ASSERT_EQ(version_run.exit_code, 0) << version_run.err;
  ebpf::pyperf::PythonVersion v;
  std::istringstream(version_run.out) >> v.major >> v.minor >> v.micro;
  const pyperf_offsets* offsets = ebpf::pyperf::FindOffsets(v);
  ASSERT_NE(offsets, nullptr) << v.ToString();

  std::vector<std::string> dump_argv = python;
  dump_argv.push_back(script);
  auto dump = RunCommand(dump_argv);
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  auto codes = Parse(dump.out);
  ASSERT_GE(codes.size(), 9u) << dump.out.substr(0, 500);

  size_t checked = 0, wrong = 0;
  for (const CodeTable& code : codes) {
    SCOPED_TRACE("code object " + code.name);
    ASSERT_FALSE(code.lines.empty());
    for (const auto& [offset, expected] : code.lines) {
      auto got =
          ebpf::pyperf::LineFromTable(offsets->line_table_format, code.table, code.first_line, offset);
      ++checked;
      if (got != expected && ++wrong <= 5) {
        ADD_FAILURE() << "byte offset " << offset << ": decoded "
                      << (got ? std::to_string(*got) : "no line") << ", the interpreter says "
                      << (expected ? std::to_string(*expected) : "no line");
      }
    }
  }
  EXPECT_EQ(wrong, 0u) << "of " << checked << " offsets";
  std::cout << "[ lines ] " << c.name << " (" << v.ToString() << "): " << checked << " offsets in "
            << codes.size() << " code objects, " << wrong << " wrong" << std::endl;
}

INSTANTIATE_TEST_SUITE_P(
    Interpreters, LineTables,
    ::testing::Values(Case{"pyenv_2_7", "2.7"}, Case{"pyenv_3_6", "3.6"}, Case{"pyenv_3_7", "3.7"},
                      Case{"pyenv_3_8", "3.8"}, Case{"pyenv_3_9", "3.9"},
                      Case{"pyenv_3_10", "3.10"}, Case{"pyenv_3_11", "3.11"},
                      Case{"pyenv_3_12", "3.12"}, Case{"pyenv_3_13", "3.13"},
                      Case{"debian_3_11", "/usr/bin/python3.11"},
                      Case{"trixie_3_13", "root:trixie"}, Case{"sid_3_14", "root:sid"},
                      Case{"sid_3_15", "root:sid/python3.15"}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace pyperf_test
