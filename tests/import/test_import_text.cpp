// The importers' text helpers against hand-written expectations.
#include <gtest/gtest.h>

#include "text.h"

namespace npuscope::import {
namespace {

TEST(MicrosToNs, KeepsEveryNanosecondOfAUnixTime) {
  // A double holds this µs value only to 0.25 µs; the decimal text is exact.
  EXPECT_EQ(microsToNs("1736408883686740.710"), 1736408883686740710);
  EXPECT_EQ(microsToNs("\"1736408883686740.711\""), 1736408883686740711);
  EXPECT_EQ(microsToNs("88437691101.749"), 88437691101749);
  EXPECT_EQ(microsToNs("1736408883704643.212\t"), 1736408883704643212);  // torch_npu CSV: trailing tab
  EXPECT_EQ(microsToNs("0.0005"), 1);   // half a ns rounds up
  EXPECT_EQ(microsToNs("0.00049"), 0);
  EXPECT_EQ(microsToNs("-2.5"), -2500);
  EXPECT_EQ(microsToNs("12"), 12000);
  EXPECT_EQ(microsToNs("1e-05"), 0);    // 0.01 ns
  EXPECT_EQ(microsToNs("2.5e3"), 2500000);
}

TEST(MicrosToNs, RefusesWhatIsNotANumber) {
  EXPECT_FALSE(microsToNs(""));
  EXPECT_FALSE(microsToNs("N/A"));
  EXPECT_FALSE(microsToNs("12us"));
  EXPECT_FALSE(microsToNs("."));
  EXPECT_FALSE(microsToNs("99999999999999999999999"));  // past int64 ns
}

TEST(Csv, TorchNpuQuotingAndTabs) {
  // A kernel_details.csv row: triple-quoted shapes, a time stamp ending in a tab, N/A.
  const auto f = splitCsvRecord("50,trans_TransData_0,1736408883704643.212\t,\"\"\"32,3,224,224\"\"\",N/A,");
  ASSERT_EQ(f.size(), 6u);
  EXPECT_EQ(f[0], "50");
  EXPECT_EQ(f[2], "1736408883704643.212");
  EXPECT_EQ(f[3], "32,3,224,224");
  EXPECT_EQ(f[4], "N/A");
  EXPECT_EQ(f[5], "");
  EXPECT_EQ(splitCsvRecord("\"a \"\"b\"\" c\",d")[0], "a \"b\" c");
}

TEST(Csv, ReaderKeepsLineBreaksInsideQuotesAndCountsLines) {
  CsvReader r("\xEF\xBB\xBFh1,h2\r\n\"x\ny\",2\n\n3,4\n");
  int64_t line = 0;
  auto a = r.next(&line);
  ASSERT_TRUE(a);
  EXPECT_EQ((*a)[0], "h1");  // BOM dropped
  EXPECT_EQ(line, 1);
  auto b = r.next(&line);
  ASSERT_TRUE(b);
  EXPECT_EQ((*b)[0], "x\ny");
  EXPECT_EQ(line, 2);
  auto c = r.next(&line);
  ASSERT_TRUE(c);
  EXPECT_EQ((*c)[1], "4");
  EXPECT_EQ(line, 5);
  EXPECT_FALSE(r.next());
}

}  // namespace
}  // namespace npuscope::import
