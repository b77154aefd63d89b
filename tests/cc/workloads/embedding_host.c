// A program that embeds CPython from a shared libpython named on its command
// line: `embedding_host LIBPYTHON [python arguments...]` loads LIBPYTHON and
// runs it as the `python` command would (Py_BytesMain). test_e2e_versions
// runs it inside Debian sid's root with sid's own libpython3.14.so.1.0 and
// libpython3.15.so.1.0, the only shared 3.14 and 3.15 this machine has:
// Debian's python3.X executables hold their interpreter, so without a host the
// shared-library layout of those versions (_PyRuntime and the eval loop in a
// .so) is never profiled. The library is opened
// at run time, as uWSGI or mod_wsgi open theirs, so this program links
// against nothing but libc and runs in any root with a newer glibc.
#include <dlfcn.h>
#include <stdio.h>

typedef int (*BytesMain)(int argc, char** argv);

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s LIBPYTHON [python arguments...]\n", argv[0]);
    return 2;
  }
  void* library = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  if (library == NULL) {
    fprintf(stderr, "embedding_host: cannot load %s: %s\n", argv[1], dlerror());
    return 2;
  }
  BytesMain bytes_main = (BytesMain)dlsym(library, "Py_BytesMain");
  if (bytes_main == NULL) {
    fprintf(stderr, "embedding_host: %s has no Py_BytesMain (CPython 3.8 or later)\n", argv[1]);
    return 2;
  }
  // Python sees this program as argv[0] and the rest as its own arguments.
  argv[1] = argv[0];
  return bytes_main(argc - 1, argv + 1);
}
