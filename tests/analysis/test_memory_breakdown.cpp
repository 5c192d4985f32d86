// memory_breakdown's arithmetic against plain reference computations: the allocated bytes at
// many times at once (allocatedAtTimes) against the live set's filter (liveAtTime), and the
// components' peaks (componentPeaks) against sums worked out by hand.
#include <gtest/gtest.h>

#include <random>

#include "npuscope/analysis/memory_breakdown.h"

namespace npuscope {
namespace {

TEST(MemoryBreakdown, AllocatedAtTimesAgreesWithTheLiveSetAtEachTime) {
  std::mt19937_64 rng(7);
  std::vector<MemoryBlockRecord> blocks;
  for (int i = 0; i < 400; ++i) {
    MemoryBlockRecord b;
    b.device = static_cast<int32_t>(rng() % 2);
    b.alloc_ns = static_cast<int64_t>(rng() % 1000);
    b.alloc_seq = i + 1;
    b.size = static_cast<int64_t>(512 * (1 + rng() % 64));
    if (rng() % 4 != 0) {  // a quarter stays live
      b.free_ns = b.alloc_ns + static_cast<int64_t>(rng() % 300);  // freed at the allocation's time too
      b.free_seq = 1000 + i;
    }
    blocks.push_back(b);
  }
  std::vector<int64_t> times;
  for (int64_t t = -5; t <= 1400; t += 7) times.push_back(t);
  times.push_back(blocks[3].alloc_ns);  // exactly at an allocation, and out of order
  for (int device : {0, 1}) {
    const std::vector<int64_t> got = allocatedAtTimes(blocks, device, times);
    ASSERT_EQ(got.size(), times.size());
    for (size_t k = 0; k < times.size(); ++k) {
      int64_t expected = 0;  // the reference: the blocks allocated by then and not yet freed
      for (const MemoryBlockRecord& b : blocks) {
        if (b.device == device && b.alloc_ns <= times[k] && (b.free_seq < 0 || b.free_ns > times[k])) expected += b.size;
      }
      EXPECT_EQ(got[k], expected) << "device " << device << " at " << times[k];
      EXPECT_EQ(got[k], liveAtTime(blocks, device, times[k]).allocated);
    }
  }
}

TEST(MemoryBreakdown, ComponentPeaksAddTheComponentsAtTheirHighestMoment) {
  auto row = [](int32_t device, const char* c, int64_t ts, int64_t mb) {
    MemoryComponentRecord r;
    r.device = device;
    r.component = c;
    r.ts_ns = ts;
    r.reserved = mb << 20;
    return r;
  };
  // npu:0: APP peaks at t=20 (100), HCCL at t=30 (60); the total is highest at t=20 (100 + 40 +
  // 5 = 145; t=30: 70 + 60 + 5 = 135). RUNTIME appears once. npu:1: a single component.
  const std::vector<MemoryComponentRecord> rows = {
      row(0, "APP", 10, 50),  row(0, "HCCL", 10, 40), row(0, "RUNTIME", 10, 5), row(0, "APP", 20, 100),
      row(0, "HCCL", 20, 40), row(0, "APP", 30, 70),  row(0, "HCCL", 30, 60),  row(1, "APP", 15, 7),
  };
  const std::vector<DeviceComponents> peaks = componentPeaks(rows);
  ASSERT_EQ(peaks.size(), 2u);
  const DeviceComponents& d = peaks[0];
  EXPECT_EQ(d.device, 0);
  EXPECT_EQ(d.total_peak, int64_t{145} << 20);
  EXPECT_EQ(d.total_peak_ns, 20);
  ASSERT_EQ(d.components.size(), 3u);
  EXPECT_EQ(d.components[0].component, "APP");  // highest own peak first
  EXPECT_EQ(d.components[0].peak, int64_t{100} << 20);
  EXPECT_EQ(d.components[0].peak_ns, 20);
  EXPECT_EQ(d.components[0].at_total_peak, int64_t{100} << 20);
  EXPECT_EQ(d.components[1].component, "HCCL");
  EXPECT_EQ(d.components[1].peak, int64_t{60} << 20);
  EXPECT_EQ(d.components[1].peak_ns, 30);
  EXPECT_EQ(d.components[1].at_total_peak, int64_t{40} << 20);
  EXPECT_EQ(d.components[2].component, "RUNTIME");
  EXPECT_EQ(d.components[2].at_total_peak, int64_t{5} << 20);
  EXPECT_EQ(peaks[1].device, 1);
  EXPECT_EQ(peaks[1].total_peak, int64_t{7} << 20);
}

}  // namespace
}  // namespace npuscope
