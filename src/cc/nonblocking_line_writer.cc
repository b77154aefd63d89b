// NonBlockingLineWriter: see nonblocking_line_writer.h.
#include "nonblocking_line_writer.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

namespace ebpf {
namespace {

// True if `fd` can take a write now without blocking. A pipe without readers
// reports POLLERR (a write would only fail with EPIPE); a hung-up terminal,
// POLLHUP.
bool WritableNow(int fd) {
  struct pollfd p = {};
  p.fd = fd;
  p.events = POLLOUT;
  int ready;
  do {
    ready = poll(&p, 1, 0);
  } while (ready < 0 && errno == EINTR);
  return ready == 1 && (p.revents & POLLOUT) && !(p.revents & (POLLERR | POLLHUP | POLLNVAL));
}

// write(2) with SIGPIPE blocked in this thread, consuming the SIGPIPE a
// reader that went away (after the poll) makes the write raise: the caller
// gets EPIPE and the process lives, even where SIGPIPE is not ignored.
ssize_t WriteWithoutSigpipe(int fd, const char* data, size_t size) {
  sigset_t sigpipe, old_mask, pending;
  sigemptyset(&sigpipe);
  sigaddset(&sigpipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &sigpipe, &old_mask);
  // One already pending (sent by someone else) is not ours to consume.
  sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE);
  ssize_t written;
  do {
    written = write(fd, data, size);
  } while (written < 0 && errno == EINTR);
  const int write_errno = errno;
  if (written < 0 && write_errno == EPIPE && !was_pending) {
    struct timespec no_wait = {0, 0};
    while (sigtimedwait(&sigpipe, nullptr, &no_wait) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  errno = write_errno;
  return written;
}

}  // namespace

bool NonBlockingLineWriter::WriteLine(std::initializer_list<std::string_view> pieces) {
  size_t size = 0;
  // After a short write the reader holds a partial line: end it first.
  if (mid_line_) buffer_[size++] = '\n';
  const size_t room = kMaxWrite - size - 1;  // and one byte for the newline
  size_t total = 0;
  for (std::string_view piece : pieces) total += piece.size();
  const bool cut = total > room;
  const size_t keep = cut ? room - kCutMarker.size() : total;
  size_t left = keep;
  for (std::string_view piece : pieces) {
    size_t n = piece.size() < left ? piece.size() : left;
    memcpy(buffer_ + size, piece.data(), n);
    size += n;
    left -= n;
    if (left == 0) break;
  }
  if (cut) {
    // Do not leave half a UTF-8 sequence before the marker.
    const size_t start = size - keep;
    auto byte = [&](size_t i) { return static_cast<unsigned char>(buffer_[i]); };
    size_t lead = size;
    while (lead > start && size - lead < 3 && (byte(lead - 1) & 0xC0) == 0x80) --lead;
    if (lead > start && (byte(lead - 1) & 0xC0) == 0xC0) {
      const unsigned char c = byte(lead - 1);
      const size_t length = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
      if (size - (lead - 1) < length) size = lead - 1;
    }
    memcpy(buffer_ + size, kCutMarker.data(), kCutMarker.size());
    size += kCutMarker.size();
  }
  buffer_[size++] = '\n';
  if (!Write(size)) {
    ++dropped_;
    return false;
  }
  if (cut) ++cut_;
  return true;
}

bool NonBlockingLineWriter::Write(size_t size) {
  if (!WritableNow(fd_)) return false;
  ssize_t written = WriteWithoutSigpipe(fd_, buffer_, size);
  if (written <= 0) return false;
  if (static_cast<size_t>(written) < size) {
    mid_line_ = buffer_[written - 1] != '\n';
    return false;
  }
  mid_line_ = false;
  return true;
}

}  // namespace ebpf
