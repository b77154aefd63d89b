// PythonStackDecoder: turns the Python part of a BPF event (symbol ids, leaf
// first) into a sample's frames (Sample.h), root first. Symbol ids are
// resolved by the PythonSymbolTable (decoded, cached and aged there). With
// --line-numbers current, each frame's executing line is decoded from its
// code object's line table, read with process_vm_readv at the process's own
// offsets (TrackedProcess) in the format its layout names.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "PyPerfBpfShared.h"
#include "PythonSymbols.h"
#include "Sample.h"
#include "TrackedProcess.h"

namespace ebpf::pyperf {

// Line-table decoders, one per format; `offset` is in the units the BPF
// program reports for that version. nullopt when the offset has no line.
// <= 3.9 co_lnotab: (byte offset increment, line increment) pairs.
std::optional<int> LineFromLnotab(std::string_view table, int first_line, int byte_offset,
                                  bool signed_line_deltas);
// 3.10 co_linetable: (byte length, signed line delta or -128) pairs.
std::optional<int> LineFromLinetable310(std::string_view table, int first_line, int byte_offset);
// 3.11+ co_linetable location entries; `unit_offset` counts 2-byte code units.
std::optional<int> LineFromLocationTable(std::string_view table, int first_line, int unit_offset);
// The line of `byte_offset` in a table of `format` (enum pyperf_line_table_format).
std::optional<int> LineFromTable(int64_t format, std::string_view table, int first_line,
                                 int byte_offset);

class PythonStackDecoder {
 public:
  // `symbols` outlives the decoder.
  PythonStackDecoder(PythonSymbolTable* symbols, bool current_lines);

  // Frames of `event` appended to `out` root first, their strings interned
  // in `dictionary`. Counts frames whose symbol could not be resolved in
  // *symbol_errors (each is a marker frame).
  // With `leaf_count`, only the leaf-most that many.
  void AppendFrames(const pyperf_event& event, const TrackedProcess& process,
                    FrameDictionary* dictionary, std::vector<SampleFrame>* out,
                    uint64_t* symbol_errors, uint32_t leaf_count = PYPERF_MAX_FRAMES);

  // --async-tasks: the event's task chain appended to `out` root first, each
  // task a frame of kind kTask (its name, its coroutine's qualified name),
  // after a marker when the chain's root end could not be read. Counts
  // unreadable chains and coroutine symbols in *task_errors.
  void AppendTaskFrames(const pyperf_event& event, FrameDictionary* dictionary,
                        std::vector<SampleFrame>* out, uint64_t* task_errors);

  // Called once per sampling round: bounds the line-table cache (emptied
  // above 16384 tables or 16 MiB).
  void EndRound();
  void ForgetProcess(pid_t pid);
  size_t line_tables() const { return line_tables_.size(); }
  size_t line_table_bytes() const { return line_table_bytes_; }

 private:
  std::optional<int> CurrentLine(const TrackedProcess& process, const pyperf_frame& frame,
                                 const PythonSymbol& symbol);

  PythonSymbolTable* symbols_;
  bool current_lines_;

  // (pid, code address, symbol id) -> the code object's line table bytes.
  std::map<std::tuple<pid_t, uint64_t, int32_t>, std::string> line_tables_;
  size_t line_table_bytes_ = 0;  // of line_tables_' values
};

}  // namespace ebpf::pyperf
