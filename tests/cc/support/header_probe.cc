// Probes compiled against an interpreter's own headers: see header_probe.h.
#include "support/header_probe.h"

#include <cstdio>
#include <sstream>

#include "support/test_support.h"

namespace pyperf_test {

ebpf::Result<InterpreterHeaders> QueryInterpreterHeaders(const std::string& python,
                                                           const PythonRoot* root) {
  const char* script =
      "import sys, sysconfig\n"
      "sys.stdout.write('%d %d %d\\n' % tuple(sys.version_info[:3]))\n"
      "sys.stdout.write(sysconfig.get_config_var('INCLUDEPY') + '\\n')\n"
      "flags = (sysconfig.get_config_var('PY_CORE_CFLAGS') or '').split()\n"
      "sys.stdout.write(' '.join(['defines:'] + [f for f in flags if f.startswith(('-D_Py', "
      "'-DPy_'))\n"
      "                                          and not f.startswith('-DPy_BUILD_CORE')]))\n";
  std::vector<std::string> argv = {python, "-c", script};
  if (root) argv.insert(argv.begin(), {"chroot", root->dir});
  auto run = RunCommand(argv);
  if (run.exit_code != 0) {
    return ebpf::Status::Error(python + " exited with " + std::to_string(run.exit_code) + ": " +
                                 run.err);
  }
  InterpreterHeaders info;
  std::istringstream in(run.out);
  std::string defines_tag;
  if (!(in >> info.version.major >> info.version.minor >> info.version.micro) ||
      !(in >> info.include_dir >> defines_tag) || defines_tag != "defines:")
    return ebpf::Status::Error("unexpected version output from " + python + ": " + run.out);
  for (std::string define; in >> define;) info.core_defines.push_back(define);
  if (root) {
    info.include_dir = root->dir + info.include_dir;
    info.sysroot = root->dir;
  }
  return info;
}

ebpf::Result<std::string> CompileAndRunProbe(const InterpreterHeaders& headers,
                                               const std::string& source) {
  TempDir dir;
  std::string source_path = dir.File("probe.c"), binary = dir.File("probe");
  if (FILE* f = std::fopen(source_path.c_str(), "w")) {
    std::fwrite(source.data(), 1, source.size(), f);
    std::fclose(f);
  } else {
    return ebpf::Status::Error("cannot write " + source_path);
  }
  std::vector<std::string> cc = {"cc", "-I" + headers.include_dir};
  cc.insert(cc.end(), headers.core_defines.begin(), headers.core_defines.end());
  // Debian's pyconfig.h includes <x86_64-linux-gnu/pythonX.Y/pyconfig.h>:
  // look for it in the root, after the host's own headers (libc stays the host's).
  if (!headers.sysroot.empty())
    cc.insert(cc.end(), {"-idirafter", headers.sysroot + "/usr/include"});
  cc.insert(cc.end(), {source_path, "-o", binary});
  auto compile = RunCommand(cc);
  if (compile.exit_code != 0) {
    return ebpf::Status::Error("probe for " + headers.version.ToString() +
                                 " did not compile against " + headers.include_dir + ":\n" +
                                 compile.err + "\n" + source);
  }
  auto run = RunCommand({binary});
  if (run.exit_code != 0)
    return ebpf::Status::Error("probe exited with " + std::to_string(run.exit_code));
  return run.out;
}

}  // namespace pyperf_test
