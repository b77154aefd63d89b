// PythonStackDecoder: see PythonStackDecoder.h.
#include "PythonStackDecoder.h"

#include <climits>
#include <cstring>
#include <string>

#include "FrameSpelling.h"
#include "PythonText.h"
#include "process_memory.h"

namespace ebpf::pyperf {
namespace {

constexpr size_t kMaxLineTableBytes = 1 << 16;
constexpr size_t kMaxCachedLineTables = 16384;
constexpr size_t kMaxCachedLineTableBytes = size_t{16} << 20;

// Unsigned varint of the 3.11+ location table: 6-bit chunks, 0x40 = more.
uint32_t ReadVarint(std::string_view t, size_t* pos) {
  uint32_t value = 0;
  int shift = 0;
  while (*pos < t.size()) {
    uint8_t b = static_cast<uint8_t>(t[(*pos)++]);
    value |= static_cast<uint32_t>(b & 0x3f) << shift;
    shift += 6;
    if (!(b & 0x40) || shift > 30) break;
  }
  return value;
}

int32_t ReadSignedVarint(std::string_view t, size_t* pos) {
  uint32_t v = ReadVarint(t, pos);
  return (v & 1) ? -static_cast<int32_t>(v >> 1) : static_cast<int32_t>(v >> 1);
}

// Lines are summed in 64 bits: the first line and the deltas come from the
// process's memory, and a corrupt table must not overflow an int. A line
// outside int's range is no line.
std::optional<int> AsLine(int64_t line) {
  if (line < INT_MIN || line > INT_MAX) return std::nullopt;
  return static_cast<int>(line);
}

}  // namespace

std::optional<int> LineFromLnotab(std::string_view table, int first_line, int byte_offset,
                                  bool signed_line_deltas) {
  int64_t line = first_line;
  int addr = 0;
  for (size_t i = 0; i + 1 < table.size(); i += 2) {
    addr += static_cast<uint8_t>(table[i]);
    if (addr > byte_offset) break;
    line +=
        signed_line_deltas ? static_cast<int8_t>(table[i + 1]) : static_cast<uint8_t>(table[i + 1]);
  }
  return AsLine(line);
}

std::optional<int> LineFromLinetable310(std::string_view table, int first_line, int byte_offset) {
  int64_t line = first_line;
  int start = 0;
  for (size_t i = 0; i + 1 < table.size(); i += 2) {
    int end = start + static_cast<uint8_t>(table[i]);
    int8_t delta = static_cast<int8_t>(table[i + 1]);
    bool has_line = delta != -128;
    if (has_line) line += delta;
    if (byte_offset >= start && byte_offset < end) return has_line ? AsLine(line) : std::nullopt;
    start = end;
  }
  return std::nullopt;
}

std::optional<int> LineFromLocationTable(std::string_view table, int first_line, int unit_offset) {
  int64_t line = first_line;
  int start = 0;
  size_t pos = 0;
  while (pos < table.size()) {
    uint8_t first = static_cast<uint8_t>(table[pos]);
    if (!(first & 0x80)) return std::nullopt;  // not at an entry start: corrupt
    int code = (first >> 3) & 15;
    int length = (first & 7) + 1;
    size_t body = pos + 1;
    int delta = 0;
    if (code == 14 || code == 13) {
      delta = ReadSignedVarint(table, &body);
    } else if (code >= 10 && code <= 12) {
      delta = code - 10;
    }
    line += delta;
    int end = start + length;
    if (unit_offset >= start && unit_offset < end) return code == 15 ? std::nullopt : AsLine(line);
    start = end;
    // The next entry starts at the next byte with the high bit set.
    pos = body;
    while (pos < table.size() && !(static_cast<uint8_t>(table[pos]) & 0x80)) ++pos;
  }
  return std::nullopt;
}

std::optional<int> LineFromTable(int64_t format, std::string_view table, int first_line,
                                 int byte_offset) {
  switch (format) {
    case PYPERF_LINES_LNOTAB:
      return LineFromLnotab(table, first_line, byte_offset, false);
    case PYPERF_LINES_LNOTAB_SIGNED:
      return LineFromLnotab(table, first_line, byte_offset, true);
    case PYPERF_LINES_LINETABLE:
      return LineFromLinetable310(table, first_line, byte_offset);
    case PYPERF_LINES_LOCATIONS:
      return LineFromLocationTable(table, first_line, byte_offset / 2);
    default:
      return std::nullopt;
  }
}

PythonStackDecoder::PythonStackDecoder(PythonSymbolTable* symbols, bool current_lines)
    : symbols_(symbols), current_lines_(current_lines) {}

std::optional<int> PythonStackDecoder::CurrentLine(const TrackedProcess& process,
                                                   const pyperf_frame& frame,
                                                   const PythonSymbol& symbol) {
  const pyperf_offsets* o = process.offsets;
  if (!o || frame.code == 0 || frame.lasti < -1) return std::nullopt;
  pid_t pid = process.pid;
  auto key = std::make_tuple(pid, frame.code, frame.symbol_id);
  auto it = line_tables_.find(key);
  if (it == line_tables_.end()) {
    uint64_t table_obj = 0;
    if (!ReadProcessMemory(pid, frame.code + o->code_linetable, &table_obj, sizeof(table_obj)) ||
        table_obj == 0)
      return std::nullopt;
    int64_t size = 0;
    if (!ReadProcessMemory(pid, table_obj + o->var_object_size, &size, sizeof(size)) || size < 0 ||
        static_cast<uint64_t>(size) > kMaxLineTableBytes)
      return std::nullopt;
    std::string bytes(static_cast<size_t>(size), '\0');
    if (!ReadProcessMemory(pid, table_obj + o->bytes_data, bytes.data(), bytes.size()))
      return std::nullopt;
    line_table_bytes_ += bytes.size();
    it = line_tables_.emplace(key, std::move(bytes)).first;
  }
  int first = symbol.first_line;
  if (frame.lasti < 0) return first;
  // lasti is read from the process: a corrupt one must not overflow. No code
  // object is 2 GiB long, so such an offset has no line.
  const int64_t offset = static_cast<int64_t>(frame.lasti) * o->lasti_unit;
  if (offset > INT_MAX) return std::nullopt;
  return LineFromTable(o->line_table_format, it->second, first, static_cast<int>(offset));
}

namespace {

// A marker frame standing where a frame could not be had, counted in *errors.
void AppendCountedMarker(std::string_view text, FrameDictionary* dictionary,
                         std::vector<SampleFrame>* out, uint64_t* errors) {
  SampleFrame frame;
  frame.kind = FrameKind::kMarker;
  frame.name = dictionary->Intern(text);
  out->push_back(frame);
  ++*errors;
}

}  // namespace

void PythonStackDecoder::AppendFrames(const pyperf_event& event, const TrackedProcess& process,
                                      FrameDictionary* dictionary, std::vector<SampleFrame>* out,
                                      uint64_t* symbol_errors, uint32_t leaf_count) {
  auto marker = [&](std::string_view text) {
    AppendCountedMarker(text, dictionary, out, symbol_errors);
  };
  uint32_t n = event.frame_count < PYPERF_MAX_FRAMES ? event.frame_count : PYPERF_MAX_FRAMES;
  if (leaf_count < n) n = leaf_count;
  for (uint32_t i = n; i-- > 0;) {
    const pyperf_frame& raw = event.frames[i];
    if (raw.symbol_id == PYPERF_SYMBOL_MISSING) {
      marker(kMissingPythonFrame);
      continue;
    }
    const PythonSymbol* symbol = raw.symbol_id >= 0 ? symbols_->Resolve(raw.symbol_id) : nullptr;
    if (!symbol) {
      marker(kLostSymbol);
      continue;
    }
    // Interned once per symbol and dictionary, not per sample.
    if (symbol->dictionary_generation != dictionary->generation()) {
      symbol->name_id = dictionary->Intern(symbol->qualified_name);
      symbol->file_id = dictionary->Intern(symbol->file);
      symbol->dictionary_generation = dictionary->generation();
    }
    SampleFrame frame;
    frame.kind = FrameKind::kPython;
    frame.name = symbol->name_id;
    frame.file = symbol->file_id;
    frame.line = symbol->first_line;
    if (current_lines_) {
      auto line = CurrentLine(process, raw, *symbol);
      if (line) frame.line = *line;
    }
    out->push_back(frame);
  }
}

void PythonStackDecoder::AppendTaskFrames(const pyperf_event& event, FrameDictionary* dictionary,
                                          std::vector<SampleFrame>* out, uint64_t* task_errors) {
  auto marker = [&](std::string_view text) {
    AppendCountedMarker(text, dictionary, out, task_errors);
  };
  if (event.task_error == PYPERF_TASK_ERROR_TOO_DEEP) marker(kTaskChainTooDeep);
  if (event.task_error == PYPERF_TASK_ERROR_UNREADABLE) marker(kTaskUnreadable);
  const uint32_t n = event.task_count < PYPERF_MAX_TASKS ? event.task_count : PYPERF_MAX_TASKS;
  for (uint32_t i = n; i-- > 0;) {
    const pyperf_task& raw = event.tasks[i];
    SampleFrame frame;
    frame.kind = FrameKind::kTask;
    if (raw.name_kind == PYPERF_TASK_NAME_TEXT) {
      frame.name = dictionary->Intern(DecodePythonText(raw.name, sizeof(raw.name), raw.name_text));
    } else if (raw.name_kind == PYPERF_TASK_NAME_NUMBER) {
      frame.name =
          dictionary->Intern(std::string(kDefaultTaskNamePrefix) + std::to_string(raw.number));
    } else {
      frame.name = dictionary->Intern(kUnreadableTaskName);
      ++*task_errors;
    }
    const PythonSymbol* coro = raw.coro_symbol >= 0 ? symbols_->Resolve(raw.coro_symbol) : nullptr;
    if (coro) {
      frame.file = dictionary->Intern(coro->qualified_name);
    } else {
      frame.file = dictionary->Intern(raw.coro_symbol == PYPERF_SYMBOL_MISSING ? kMissingPythonFrame
                                                                               : kLostSymbol);
      ++*task_errors;
    }
    out->push_back(frame);
  }
}

void PythonStackDecoder::EndRound() {
  if (line_tables_.size() > kMaxCachedLineTables || line_table_bytes_ > kMaxCachedLineTableBytes) {
    line_tables_.clear();
    line_table_bytes_ = 0;
  }
}

void PythonStackDecoder::ForgetProcess(pid_t pid) {
  auto it = line_tables_.lower_bound(std::make_tuple(pid, uint64_t{0}, INT32_MIN));
  while (it != line_tables_.end() && std::get<0>(it->first) == pid) {
    line_table_bytes_ -= it->second.size();
    it = line_tables_.erase(it);
  }
}

}  // namespace ebpf::pyperf
