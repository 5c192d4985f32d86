#include <gtest/gtest.h>

#include "npuscope/core/format.h"
#include "npuscope/core/status.h"

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

}  // namespace
}  // namespace npuscope
