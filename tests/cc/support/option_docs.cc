// Readers of PyPerf's option docs: see option_docs.h.
#include "support/option_docs.h"

#include <algorithm>
#include <regex>
#include <sstream>

#include "support/test_support.h"

namespace pyperf_test {
namespace {

std::string Trim(const std::string& s) {
  size_t start = s.find_first_not_of(' ');
  if (start == std::string::npos) return "";
  return s.substr(start, s.find_last_not_of(' ') - start + 1);
}

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// The lines after the first one `opens` accepts, up to the next one `closes`
// accepts (or the end).
template <typename Opens, typename Closes>
std::vector<std::string> Section(const std::vector<std::string>& lines, Opens opens,
                                 Closes closes) {
  auto begin = std::find_if(lines.begin(), lines.end(), opens);
  if (begin != lines.end()) ++begin;
  return {begin, std::find_if(begin, lines.end(), closes)};
}

// Fills the fields read from the description.
void ReadDescription(OptionDoc* doc) {
  static const std::regex default_re("\\(default:? ([^;)]*)");
  static const std::regex range_re("(\\d+) to (\\d+)");
  std::smatch m;
  if (std::regex_search(doc->description, m, default_re)) doc->default_text = Trim(m[1].str());
  if (std::regex_search(doc->description, m, range_re)) doc->range = m[0].str();
}

std::vector<std::string> SplitNames(const std::string& names) {
  std::vector<std::string> out;
  std::stringstream in(names);
  std::string name;
  while (std::getline(in, name, ',')) {
    name = Trim(name);
    if (!name.empty()) out.push_back(name);
  }
  return out;
}

// "  -c,--sample-rate PERIOD      text": names, then the value up to a run
// of two spaces, then the text.
std::optional<OptionDoc> ParseOptionLine(const std::string& line) {
  if (!StartsWith(line, "  -")) return std::nullopt;
  OptionDoc doc;
  std::string rest = line.substr(2);
  size_t space = rest.find(' ');
  doc.names = SplitNames(rest.substr(0, space));
  rest = space == std::string::npos ? "" : rest.substr(space);
  if (!StartsWith(rest, "  ")) {  // a value follows the names after one space
    size_t gap = rest.find("  ");
    doc.value = Trim(rest.substr(0, gap));
    rest = gap == std::string::npos ? "" : rest.substr(gap);
  }
  doc.description = Trim(rest);
  return doc;
}

// One line of troff as text: the macro name and quotes dropped, escapes
// undone. Comment lines give "".
std::string ManLine(const std::string& line) {
  if (StartsWith(line, ".\\\"")) return "";
  std::string text = line;
  if (StartsWith(text, ".")) {
    size_t space = text.find(' ');
    text = space == std::string::npos ? "" : text.substr(space + 1);
  }
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"') continue;
    if (c == '\\' && i + 1 < text.size()) {
      char next = text[i + 1];
      if (next == '-') {
        out.push_back('-');
        ++i;
      } else if (next == 'f' && i + 2 < text.size()) {
        i += 2;  // a font change: \fB, \fI, \fR, \fP
      } else if (next == '&') {
        ++i;
      } else if (next == '(' && i + 3 < text.size()) {
        i += 3;  // a special character such as \(bu
      } else {
        out.push_back(c);
      }
      continue;
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace

std::string OptionDoc::Names() const {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ",") + name;
  return out;
}

std::vector<OptionDoc> ParseHelpOptions(const std::string& help) {
  std::vector<OptionDoc> out;
  for (const std::string& line : SplitLines(help)) {
    if (auto doc = ParseOptionLine(line)) {
      ReadDescription(&*doc);
      out.push_back(std::move(*doc));
    }
  }
  return out;
}

std::vector<OptionDoc> ParseReadmeOptions(const std::string& readme) {
  auto under_heading = Section(
      SplitLines(readme), [](const std::string& line) { return line == "## Command line"; },
      [](const std::string&) { return false; });
  auto is_fence = [](const std::string& line) { return StartsWith(line, "```"); };
  std::vector<OptionDoc> out;
  for (const std::string& line : Section(under_heading, is_fence, is_fence)) {
    if (auto doc = ParseOptionLine(line)) {
      out.push_back(std::move(*doc));
    } else if (!out.empty() && StartsWith(line, "    ")) {
      std::string& description = out.back().description;
      description += (description.empty() ? "" : " ") + Trim(line);
    }
  }
  for (auto& doc : out) ReadDescription(&doc);
  return out;
}

std::vector<OptionDoc> ParseManPageOptions(const std::string& page) {
  std::vector<std::string> lines = Section(
      SplitLines(page), [](const std::string& line) { return line == ".SH OPTIONS"; },
      [](const std::string& line) { return StartsWith(line, ".SH"); });
  std::vector<OptionDoc> out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i] != ".TP" || i + 1 >= lines.size()) continue;
    OptionDoc doc;
    std::stringstream tag(ManLine(lines[++i]));
    std::string token;
    while (tag >> token) {
      if (token == ",") continue;
      if (doc.value.empty() && StartsWith(token, "-")) {
        for (const auto& name : SplitNames(token)) doc.names.push_back(name);
      } else {
        doc.value += (doc.value.empty() ? "" : " ") + token;
      }
    }
    while (i + 1 < lines.size() && lines[i + 1] != ".TP") {
      std::string text = Trim(ManLine(lines[++i]));
      if (!text.empty()) doc.description += (doc.description.empty() ? "" : " ") + text;
    }
    ReadDescription(&doc);
    out.push_back(std::move(doc));
  }
  return out;
}

std::string ManPageText(const std::string& page) {
  std::string out;
  for (const std::string& line : SplitLines(page)) out += ManLine(line) + "\n";
  return out;
}

std::vector<std::string> LongFlagsIn(const std::string& text) {
  static const std::regex flag_re("(^|[^\\w-])(--[a-z][a-z0-9-]*)");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), flag_re);
       it != std::sregex_iterator(); ++it)
    out.push_back((*it)[2].str());
  return out;
}

}  // namespace pyperf_test
