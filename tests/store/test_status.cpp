#include <gtest/gtest.h>
#include <pty.h>
#include <unistd.h>

#include <sstream>

#include "npuscope/store/console.h"
#include "npuscope/store/format.h"
#include "npuscope/store/status.h"

namespace npuscope {
namespace {

StatusOr<int> half(int v) {
  if (v % 2) return invalidArgument(std::to_string(v) + " is odd");
  return v / 2;
}

StatusOr<int> quarter(int v) {
  ASSIGN_OR_RETURN(int h, half(v));
  ASSIGN_OR_RETURN(int q, half(h));
  return q;
}

Status checkEven(int v) {
  RETURN_IF_ERROR(half(v).status());
  return Status::ok();
}

TEST(Status, PropagatesTheFirstError) {
  EXPECT_EQ(*quarter(8), 2);
  auto r = quarter(6);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().message(), "3 is odd");
  EXPECT_EQ(r.status().toString(), "invalid argument: 3 is odd");
  EXPECT_TRUE(checkEven(4).isOk());
  EXPECT_EQ(checkEven(5).code(), StatusCode::kInvalidArgument);
}

TEST(Format, Bytes) {
  EXPECT_EQ(formatBytes(512), "512 B");
  EXPECT_EQ(formatBytes(1536), "1.50 KiB");
  EXPECT_EQ(formatBytes(48ull << 20), "48.00 MiB");
  EXPECT_EQ(formatBytes(32ull << 30), "32.00 GiB");
}

// The NPUSCOPE_* size syntax: binary units, fractions; the fallback for what is not a size.
TEST(Format, ParsedByteCounts) {
  EXPECT_EQ(parseBytes("4096", 7), 4096u);
  EXPECT_EQ(parseBytes("512M", 7), 512ull << 20);
  EXPECT_EQ(parseBytes("64k", 7), 64ull << 10);
  EXPECT_EQ(parseBytes("1.5G", 7), 3ull << 29);
  EXPECT_EQ(parseBytes("2T", 7), 2ull << 40);
  for (const char* bad : {"", "M", "abc", "0", "-1G"}) EXPECT_EQ(parseBytes(bad, 7), 7u) << bad;
  EXPECT_EQ(parseBytes(nullptr, 7), 7u);
}

// Numbers in messages as a std::ostream prints them (the loss-scale settings' errors quote them).
TEST(Format, GeneralNumbersAsAStreamPrintsThem) {
  for (double v : {65536.0, 0.5, 1e-7, 2.0 / 3.0, 1e6, 1234567.0, -0.0001, 0.0}) {
    std::ostringstream os;
    os << v;
    EXPECT_EQ(formatGeneral(v), os.str()) << v;
  }
  EXPECT_EQ(formatGeneral(65536), "65536");
  EXPECT_EQ(formatGeneral(1e-7), "1e-07");
}

TEST(Format, StartsWith) {
  EXPECT_TRUE(startsWith("hcom_allReduce", "hcom_"));
  EXPECT_TRUE(startsWith("aten::mm", ""));
  EXPECT_TRUE(startsWith("npu::", "npu::"));
  EXPECT_FALSE(startsWith("hcom", "hcom_"));
  EXPECT_FALSE(startsWith("xhcom_", "hcom_"));
  EXPECT_FALSE(startsWith("", "a"));
}

TEST(Format, Durations) {
  EXPECT_EQ(formatDuration(999), "0.999us");
  EXPECT_EQ(formatDuration(1234), "1.234us");
  EXPECT_EQ(formatDuration(1234567), "1.235ms");
  EXPECT_EQ(formatDuration(2500000000), "2.500s");
  EXPECT_EQ(formatDuration(-1500), "-1.500us");
}

// What a terminal and a pipe receive: on the terminal the line first clears the progress bar's
// line ("\r" then ESC [K); through a pipe it is the line alone.
TEST(ConsoleLine, ClearsAProgressBarOnATerminalOnly) {
  int master = -1, slave = -1;
  ASSERT_EQ(::openpty(&master, &slave, nullptr, nullptr, nullptr), 0);
  std::FILE* tty = ::fdopen(slave, "w");
  ASSERT_NE(tty, nullptr);
  std::fputs("\r[#####     ] 5/10", tty);
  consoleLine(tty, "npuscope: warning: the disk is full");
  std::fclose(tty);
  // A pty may hand the bytes over in more than one read: read until the closed side's EIO.
  std::string got;
  char buf[256];
  for (ssize_t n; (n = ::read(master, buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  ::close(master);
  // The terminal turns "\n" into "\r\n" (onlcr).
  EXPECT_EQ(got, "\r[#####     ] 5/10\r\033[Knpuscope: warning: the disk is full\r\n");

  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::FILE* pipe = ::fdopen(fds[1], "w");
  consoleLine(pipe, "npuscope: warning: the disk is full");
  std::fclose(pipe);
  const ssize_t m = ::read(fds[0], buf, sizeof buf);
  ::close(fds[0]);
  EXPECT_EQ(std::string(buf, static_cast<size_t>(std::max<ssize_t>(m, 0))), "npuscope: warning: the disk is full\n");
}

}  // namespace
}  // namespace npuscope
