#include "npuscope/store/op_aggregator.h"

namespace npuscope {

OpAggregateTable OpAggregator::table(const std::function<std::string(int64_t)>& string_of, OpSortKey sort,
                                     bool descending) const {
  OpAggregateTable table;
  table.op_count = selected_;
  table.group_count = static_cast<int64_t>(groups_.size());
  for (const Group& g : groups_) {
    table.self_sum_ns = saturatingAdd(table.self_sum_ns, g.self);
    table.total_device_ns = saturatingAdd(table.total_device_ns, g.device);
  }
  table.rows.reserve(groups_.size());
  for (const Group& g : groups_) {
    table.rows.push_back(makeOpAggregate(string_of(g.name_id), by_shapes_ ? string_of(g.shapes_id) : std::string(),
                                         g.calls, g.total, g.self, g.min, g.max, g.device, g.device_calls,
                                         table.self_sum_ns));
  }
  sortOpTable(&table.rows, sort, descending);
  return table;
}

}  // namespace npuscope
