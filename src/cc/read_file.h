// Reading a whole file into memory: the one reader the library uses for /proc
// files (maps, stat, kallsyms) and anything else read whole. /proc files report
// a size of 0, so it reads until end of file rather than trusting fstat.
#pragma once

#include <string>

#include "status.h"

namespace ebpf {

// Replaces *out with the bytes of `path`, reusing its capacity: a caller that
// reads the same file again and again (a process's maps every round) allocates
// nothing once the buffer is large enough. Returns 0, or the errno of the open
// or read that failed (then *out holds what was read before the failure).
int ReadFileInto(const char* path, std::string* out);

// The bytes of `path`, or an error naming the path and the reason.
Result<std::string> ReadFile(const std::string& path);

// "cannot read PATH: <strerror(err)>", the message for a failed ReadFileInto.
std::string FileReadError(const std::string& path, int err);

}  // namespace ebpf
