// StopSymbols: a frame's symbol is in the set as spelled, demangled, or as the
// ".cold" part of a function in the set; nothing else is.
#include <gtest/gtest.h>

#include "stop_symbols.h"

namespace ebpf {
namespace {

TEST(StopSymbols, MatchesNamesTheirColdPartsAndDemangledNamesOnly) {
  StopSymbols stops({"_PyEval_EvalFrameDefault", "PyEval_EvalFrameEx", "ns::Loop::run()"});
  EXPECT_TRUE(stops.Contains("_PyEval_EvalFrameDefault"));
  EXPECT_TRUE(stops.Contains("_PyEval_EvalFrameDefault.cold"));
  EXPECT_TRUE(stops.Contains("PyEval_EvalFrameEx"));
  EXPECT_TRUE(stops.Contains("_ZN2ns4Loop3runEv"));
  EXPECT_FALSE(stops.Contains("_PyEval_EvalFrameDefault.part.0"));
  EXPECT_FALSE(stops.Contains("_PyEval_EvalFrame"));
  EXPECT_FALSE(stops.Contains(".cold"));
  EXPECT_FALSE(stops.Contains(""));
  EXPECT_FALSE(StopSymbols({}).Contains("_PyEval_EvalFrameDefault"));
}

}  // namespace
}  // namespace ebpf
