// The op table as CSV: header, exact microsecond figures, RFC 4180 quoting of shape lists.
#include <gtest/gtest.h>

#include <sstream>

#include "npuscope/analysis/op_table_csv.h"

namespace npuscope {
namespace {

TEST(OpTableCsv, WritesExactFiguresAndQuotesShapes) {
  OpAggregateTable t;
  OpAggregate a;
  a.name = "aten::addmm";
  a.input_shapes = "[[10], [64, 784], [784, 10]]";
  a.calls = 3;
  a.total_ns = 3001;
  a.self_ns = 1500;
  a.min_ns = 999;
  a.max_ns = 1002;
  a.avg_ns = 3001 / 3.0;
  a.self_pct = 62.5;
  a.total_pct = 125.04;
  a.device_ns = 12;
  a.device_calls = 3;
  t.rows.push_back(a);
  OpAggregate b;
  b.name = "weird \"op\"";
  b.calls = 1;
  t.rows.push_back(b);

  std::ostringstream by_name;
  writeOpTableCsv(t, OpGroupBy::kName, by_name);
  EXPECT_EQ(by_name.str(),
            "Name,Self CPU %,Self CPU (us),CPU total %,CPU total (us),CPU time avg (us),CPU time min (us),"
            "CPU time max (us),# of Calls,Device time (modeled) (us),Device calls\n"
            "aten::addmm,62.50,1.500,125.04,3.001,1.000,0.999,1.002,3,0.012,3\n"
            "\"weird \"\"op\"\"\",0.00,0.000,0.00,0.000,0.000,0.000,0.000,1,0.000,0\n");

  std::ostringstream by_shape;
  writeOpTableCsv(t, OpGroupBy::kNameAndShapes, by_shape);
  const std::string s = by_shape.str();
  EXPECT_EQ(s.substr(0, s.find('\n')).rfind("Name,Input Shapes,Self CPU %", 0), 0u);
  EXPECT_NE(s.find("aten::addmm,\"[[10], [64, 784], [784, 10]]\",62.50,"), std::string::npos) << s;
}

TEST(OpTableCsv, FieldsNeedingNoQuotesStayBare) {
  EXPECT_EQ(csvField("aten::mm"), "aten::mm");
  EXPECT_EQ(csvField("a,b"), "\"a,b\"");
  EXPECT_EQ(csvField("line\nbreak"), "\"line\nbreak\"");
  EXPECT_EQ(csvField(""), "");
}

}  // namespace
}  // namespace npuscope
