// Tests of NonBlockingLineWriter on real pipes and files: a pipe nobody reads
// never blocks a write (a watchdog aborts the test if one does), dropped lines
// are counted, long lines are cut with the marker, a reader that went away
// neither kills the process nor changes the descriptor.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nonblocking_line_writer.h"
#include "support/test_support.h"

namespace ebpf {
namespace {

using pyperf_test::SplitLines;

// Aborts the test program if it is still alive after `limit`: a write that
// blocks would otherwise hang the test until CTest's timeout.
class Watchdog {
 public:
  explicit Watchdog(std::chrono::seconds limit)
      : thread_([this, limit] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (!done_cv_.wait_for(lock, limit, [this] { return done_; })) {
            fprintf(stderr, "watchdog: still running after %lld s, a write blocked\n",
                    static_cast<long long>(limit.count()));
            std::abort();
          }
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    done_cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

// A pipe whose ends are closed on destruction; both ends are blocking, as a
// program's stderr usually is.
struct Pipe {
  Pipe() {
    int fds[2];
    if (pipe(fds) != 0) std::abort();
    read_end = fds[0];
    write_end = fds[1];
  }
  ~Pipe() {
    if (read_end >= 0) close(read_end);
    if (write_end >= 0) close(write_end);
  }
  void CloseReadEnd() {
    close(read_end);
    read_end = -1;
  }
  // Everything in the pipe now, without waiting for more.
  std::string Drain() {
    int flags = fcntl(read_end, F_GETFL);
    fcntl(read_end, F_SETFL, flags | O_NONBLOCK);  // the test's own end
    std::string text;
    char buf[65536];
    ssize_t n;
    while ((n = read(read_end, buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(n));
    fcntl(read_end, F_SETFL, flags);
    return text;
  }
  int read_end = -1;
  int write_end = -1;
};

std::string NumberedLine(int i) { return "line " + std::to_string(i) + " " + std::string(90, '.'); }

TEST(NonBlockingLineWriter, NeverBlocksOnAPipeNobodyReads) {
  Pipe pipe;
  const int flags_before = fcntl(pipe.write_end, F_GETFL);
  NonBlockingLineWriter writer(pipe.write_end);
  constexpr int kLines = 20000;  // about 2 MB: 30 times a default pipe's capacity
  std::vector<int> written;
  {
    Watchdog watchdog(std::chrono::seconds(60));
    for (int i = 0; i < kLines; ++i)
      if (writer.WriteLine(NumberedLine(i))) written.push_back(i);
  }
  EXPECT_EQ(written.size() + writer.dropped(), static_cast<size_t>(kLines));
  EXPECT_GT(writer.dropped(), 0u) << "the pipe never filled up";
  EXPECT_GT(written.size(), 0u);
  EXPECT_EQ(fcntl(pipe.write_end, F_GETFL), flags_before) << "the writer changed the fd's flags";

  // What reached the reader: exactly the lines reported written, each whole.
  std::vector<std::string> lines = SplitLines(pipe.Drain());
  ASSERT_EQ(lines.size(), written.size());
  for (size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(lines[i], NumberedLine(written[i]));
}

TEST(NonBlockingLineWriter, CountsEachDroppedLineAndWritesAgainOnceDrained) {
  Pipe pipe;
  NonBlockingLineWriter writer(pipe.write_end);
  Watchdog watchdog(std::chrono::seconds(60));
  int i = 0;
  while (writer.WriteLine(NumberedLine(i))) ++i;  // until the pipe is full
  EXPECT_EQ(writer.dropped(), 1u);
  for (uint64_t more = 1; more <= 5; ++more) {
    EXPECT_FALSE(writer.WriteLine("still full"));
    EXPECT_EQ(writer.dropped(), 1u + more);
  }
  std::vector<std::string> lines = SplitLines(pipe.Drain());
  EXPECT_EQ(lines.size(), static_cast<size_t>(i));
  EXPECT_TRUE(writer.WriteLine({"after ", "draining"}));
  EXPECT_EQ(pipe.Drain(), "after draining\n");
  EXPECT_EQ(writer.dropped(), 6u);
}

TEST(NonBlockingLineWriter, CutsLongLinesToOneAtomicWriteWithAMarker) {
  Pipe pipe;
  NonBlockingLineWriter writer(pipe.write_end);
  Watchdog watchdog(std::chrono::seconds(60));

  const std::string longest(NonBlockingLineWriter::kMaxWrite - 1, 'a');  // fits with its '\n'
  ASSERT_TRUE(writer.WriteLine(longest));
  EXPECT_EQ(pipe.Drain(), longest + "\n");
  EXPECT_EQ(writer.cut(), 0u);

  ASSERT_TRUE(writer.WriteLine({"head ", std::string(3 * PIPE_BUF, 'b'), " tail"}));
  std::string text = pipe.Drain();
  EXPECT_EQ(text.size(), NonBlockingLineWriter::kMaxWrite);
  EXPECT_EQ(text.rfind("head bbb", 0), 0u);
  std::string ending = std::string(NonBlockingLineWriter::kCutMarker) + "\n";
  ASSERT_GE(text.size(), ending.size());
  EXPECT_EQ(text.substr(text.size() - ending.size()), ending);
  EXPECT_EQ(text.find("tail"), std::string::npos);
  EXPECT_EQ(writer.cut(), 1u);
  EXPECT_EQ(writer.dropped(), 0u);

  // A cut never splits a UTF-8 character ("é" is two bytes).
  std::string accents;
  while (accents.size() < 2 * PIPE_BUF) accents += "\xc3\xa9";
  ASSERT_TRUE(writer.WriteLine({"x", accents}));
  text = pipe.Drain();
  std::string kept = text.substr(1, text.size() - 1 - ending.size());
  EXPECT_EQ(kept.size() % 2, 0u);
  EXPECT_EQ(kept, accents.substr(0, kept.size()));
}

TEST(NonBlockingLineWriter, ClosedReaderDoesNotKillTheProcess) {
  // In a child, with SIGPIPE's default action (which kills): the write must
  // be dropped and counted, not end the process.
  EXPECT_EXIT(
      {
        signal(SIGPIPE, SIG_DFL);
        Pipe pipe;
        pipe.CloseReadEnd();
        NonBlockingLineWriter writer(pipe.write_end);
        bool written = writer.WriteLine("nobody reads this");
        bool again = writer.WriteLine("nor this");
        sigset_t pending;
        sigpending(&pending);
        bool ok = !written && !again && writer.dropped() == 2 && !sigismember(&pending, SIGPIPE);
        fprintf(stderr, ok ? "dropped and alive\n" : "unexpected\n");
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "dropped and alive");
}

TEST(NonBlockingLineWriter, EpipeFromTheWriteItselfDoesNotKillTheProcess) {
  // A socket shut down for writing polls writable yet fails every write with
  // EPIPE and SIGPIPE: the case of a reader that goes away between the poll
  // and the write.
  EXPECT_EXIT(
      {
        signal(SIGPIPE, SIG_DFL);
        int fds[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0 || shutdown(fds[0], SHUT_WR) != 0)
          std::exit(2);
        NonBlockingLineWriter writer(fds[0]);
        bool written = writer.WriteLine("nobody reads this");
        sigset_t pending;
        sigpending(&pending);
        bool ok = !written && writer.dropped() == 1 && !sigismember(&pending, SIGPIPE);
        fprintf(stderr, ok ? "dropped and alive\n" : "unexpected\n");
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "dropped and alive");
}

TEST(NonBlockingLineWriter, WritesWholeLinesToAFile) {
  pyperf_test::TempDir dir;
  std::string path = dir.File("log");
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  {
    NonBlockingLineWriter writer(fd);
    EXPECT_TRUE(writer.WriteLine("PyPerf: one"));
    EXPECT_TRUE(writer.WriteLine({"PyPerf: ", "two"}));
    EXPECT_TRUE(writer.WriteLine(""));
    EXPECT_EQ(writer.dropped(), 0u);
  }
  close(fd);
  EXPECT_EQ(pyperf_test::ReadFile(path), "PyPerf: one\nPyPerf: two\n\n");
}

}  // namespace
}  // namespace ebpf
