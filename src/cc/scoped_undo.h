// ScopedUndo: the undo half of a scoped change to this process's or thread's
// state (ScopedPriorityBoost, ScopedNonRootEuid). The scoped type makes its
// change in its constructor and, when the change was made, arms a ScopedUndo
// with what the undo needs (the old values); the undo then runs exactly once,
// on Restore() or at the end of the scope, and never for a change not made.
// Not copyable: one change, one undo.
#pragma once

#include <optional>
#include <utility>

namespace ebpf {

template <typename Saved>
class ScopedUndo {
 public:
  using Undo = void (*)(const Saved& saved);

  explicit ScopedUndo(Undo undo) : undo_(undo) {}
  ScopedUndo(const ScopedUndo&) = delete;
  ScopedUndo& operator=(const ScopedUndo&) = delete;
  ~ScopedUndo() { Restore(); }

  // The change was made: Restore() or the end of the scope puts `saved` back.
  void Arm(Saved saved) { saved_ = std::move(saved); }
  // Undoes the change; nothing when it was not made or is already undone.
  void Restore() {
    if (!saved_) return;
    Saved saved = std::move(*saved_);
    saved_.reset();
    undo_(saved);
  }
  bool armed() const { return saved_.has_value(); }

 private:
  Undo undo_;
  std::optional<Saved> saved_;
};

}  // namespace ebpf
