// record_native_snapshots OUT_DIR: records the native-stack fixtures a
// benchmark replays (bench/ uses them through LoadRecorded):
//   OUT_DIR/cxx_debuglink    native_fixture, depth 4, C library with a
//                            .gnu_debuglink file (every frame named)
//   OUT_DIR/cxx_stripped     native_fixture, depth 16, stripped C library
//                            (the static function is `module+0xaddr`)
//   OUT_DIR/python3_ctypes   Debian's python3 calling the capture library
//                            through ctypes (libffi, _ctypes and
//                            _PyEval_EvalFrameDefault frames), if present
// Each directory holds regs, stack.bin, maps and root/ with copies of every
// mapped file.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "native_snapshot_files.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string out = argv[1];
  const std::string fixture = pyperf_fixture::FixtureDir();
  int failures = 0;
  auto record = [&](const char* name, const std::vector<std::string>& cmd,
                    std::map<std::string, std::string> env) {
    ebpf::Status s = pyperf_fixture::RecordSnapshot(cmd, std::move(env), out + "/" + name);
    printf("%s: %s\n", name, s.ok() ? "recorded" : s.message().c_str());
    if (!s.ok()) ++failures;
  };
  record("cxx_debuglink", {fixture + "/native_fixture", "--depth", "4"},
         {{"LD_LIBRARY_PATH", pyperf_fixture::FixtureLibraryPath("debuglink")}});
  record("cxx_stripped", {fixture + "/native_fixture", "--depth", "16"},
         {{"LD_LIBRARY_PATH", pyperf_fixture::FixtureLibraryPath("stripped")}});
  const char* python = "/usr/bin/python3";
  if (access(python, X_OK) == 0) {
    record("python3_ctypes", pyperf_fixture::CtypesCaptureCommand(python, 6), {});
  } else {
    printf("python3_ctypes: skipped, no %s\n", python);
  }
  return failures ? 1 : 0;
}
