// The dumper's background writers, torch-free: several threads, rows in push order, payloads
// intact through the buffer pool and stored once per step; the pool's reuse rules.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "dump_writer.h"
#include "npuscope/analysis/compare.h"
#include "npuscope/store/trace_reader.h"
#include "npuscope/store/trace_writer.h"

namespace npuscope::dumper {
namespace {

namespace fs = std::filesystem;

// Payload i: a mix of runs (compressible) and noise (not), of a size that varies from op to op
// so that the writer threads finish ops out of order.
std::vector<uint8_t> payload(uint32_t i) {
  const size_t sizes[] = {200, size_t{3} << 20, 70 << 10, size_t{1} << 20, 4096, 300 << 10};
  std::vector<uint8_t> v(sizes[i % 6]);
  uint32_t x = i * 2654435761u + 1;
  for (size_t k = 0; k < v.size(); ++k) {
    if ((i % 3) == 0) {
      x ^= x << 13;
      x ^= x >> 17;
      x ^= x << 5;
      v[k] = static_cast<uint8_t>(x);
    } else {
      v[k] = static_cast<uint8_t>((k / 64 + i) % 7 == 0 ? k : 0);
    }
  }
  return v;
}

// A captured tensor as the op thread hands it over in tensor mode: data copied (into a buffer
// from `pool` when given, as the capture takes its buffers), statistics left to the writer
// threads, hashed for sharing.
CapturedTensor captured(const std::vector<uint8_t>& bytes, PayloadPool* pool = nullptr) {
  CapturedTensor c;
  c.dtype = tensor::DType::kUInt8;
  c.shape = {static_cast<int64_t>(bytes.size())};
  c.format = "ND";
  c.bytes = bytes.size();
  if (pool) c.data = pool->take(bytes.size());
  c.data.assign(bytes.begin(), bytes.end());
  c.stats_pending = true;
  hashPayload(c);
  return c;
}

// Payloads i and i + 42 are equal (sizes repeat every 6, the runs every 7), so rows also share.
TEST(DumpWriter, SeveralThreadsHandRowsInPushOrderWithPayloadsIntact) {
  const fs::path dir = fs::path(testing::TempDir()) / "npuscope_dump_writer_order";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string db = (dir / "trace.db").string();
  constexpr uint32_t kOps = 120;
  PayloadPool pool(size_t{16} << 20);
  {
    auto trace = TraceWriter::open(db);
    ASSERT_TRUE(trace.isOk());
    ASSERT_TRUE((*trace)->beginRun(RunInfo{}).isOk());
    DumpWriter::Options o;
    o.rows = trace->get();
    o.threads = 4;
    o.pool = &pool;
    o.max_queued_bytes = size_t{8} << 20;
    {
      DumpWriter w(o);
      for (uint32_t i = 0; i < kOps; ++i) {
        DumpedOp op;
        op.dir = (dir / "files").string();
        op.file = "op." + std::to_string(i);
        op.op_name = "mm." + std::to_string(i) + ".forward";
        op.op_type = "aten::mm";
        op.step = 1;
        op.outputs.push_back(captured(payload(i), &pool));
        w.push(std::move(op));
      }
    }  // drained: every file written, every row handed over
    ASSERT_TRUE((*trace)->flush().isOk());
    EXPECT_GT(pool.cachedBytes(), 0u);  // compressed payloads' buffers came back
  }
  auto reader = TraceReader::open(db);
  ASSERT_TRUE(reader.isOk()) << reader.status().message();
  auto dumps = (*reader)->tensorDumps(1);
  ASSERT_TRUE(dumps.isOk()) << dumps.status().message();
  ASSERT_EQ(dumps->size(), kOps);
  int shared = 0;
  for (uint32_t i = 0; i < kOps; ++i) {
    const TensorDumpInfo& d = (*dumps)[i];
    shared += d.data_ref >= 0;
    ASSERT_EQ(d.op_name, "mm." + std::to_string(i) + ".forward") << "row " << i << " out of push order";
    auto stored = (*reader)->tensorDumpData(d.id);
    ASSERT_TRUE(stored.isOk());
    auto raw = tensor::decodeDumpPayload(stored->bytes, stored->zstd_frame);
    ASSERT_TRUE(raw.isOk());
    const auto expected = payload(i);
    ASSERT_EQ(*raw, expected) << d.op_name;
    uint64_t sum = 0;
    for (uint8_t b : expected) sum += b;
    EXPECT_DOUBLE_EQ(*d.mean, static_cast<double>(sum) / static_cast<double>(expected.size())) << d.op_name;
    EXPECT_EQ(fs::file_size(dir / "files" / ("op." + std::to_string(i))) > expected.size(), true) << d.op_name;
  }
  EXPECT_GT(shared, 0) << "payloads i and i + 42 of the runs kind are equal";
  fs::remove_all(dir);
}

// Bytes an earlier tensor of the same step holds are stored once: the later row refers to it.
// Equal sizes with other bytes, another step, and payloads too small to be worth a reference
// are stored again. Every row reads back its own bytes, and every Ascend file keeps them all.
TEST(DumpWriter, PayloadsRepeatedWithinAStepAreStoredOnce) {
  const fs::path dir = fs::path(testing::TempDir()) / "npuscope_dump_writer_shared";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string db = (dir / "trace.db").string();
  const auto x = payload(1), y = payload(7), z = std::vector<uint8_t>(100, 5);
  ASSERT_EQ(x.size(), y.size());
  struct Op {
    int64_t step;
    std::vector<const std::vector<uint8_t>*> inputs, outputs;
  };
  const std::vector<Op> ops = {{1, {}, {&x}}, {1, {&x}, {&y}}, {1, {&z}, {&z}}, {2, {&y}, {}}, {2, {&y}, {}}};
  {
    auto trace = TraceWriter::open(db);
    ASSERT_TRUE(trace.isOk());
    ASSERT_TRUE((*trace)->beginRun(RunInfo{}).isOk());
    DumpWriter::Options o;
    o.rows = trace->get();
    o.threads = 2;
    {
      DumpWriter w(o);
      for (size_t i = 0; i < ops.size(); ++i) {
        DumpedOp op;
        op.dir = (dir / "files").string();
        op.file = "op." + std::to_string(i);
        op.op_name = "relu." + std::to_string(i) + ".forward";
        op.op_type = "aten::relu";
        op.step = ops[i].step;
        for (const auto* b : ops[i].inputs) op.inputs.push_back(captured(*b));
        for (const auto* b : ops[i].outputs) op.outputs.push_back(captured(*b));
        w.push(std::move(op));
      }
    }
    ASSERT_TRUE((*trace)->flush().isOk());
  }
  auto reader = TraceReader::open(db);
  ASSERT_TRUE(reader.isOk()) << reader.status().message();
  auto rows = (*reader)->tensorDumps(1);
  ASSERT_TRUE(rows.isOk()) << rows.status().message();
  ASSERT_EQ(rows->size(), 7u);
  // Rows in order: op0 out x | op1 in x, out y | op2 in z, out z | op3 in y | op4 in y.
  const std::vector<const std::vector<uint8_t>*> expected = {&x, &x, &y, &z, &z, &y, &y};
  const std::vector<int> holder = {-1, 0, -1, -1, -1, -1, 5};  // index of the row holding the bytes
  for (size_t i = 0; i < rows->size(); ++i) {
    SCOPED_TRACE(i);
    const TensorDumpInfo& d = (*rows)[i];
    EXPECT_EQ(d.data_ref, holder[i] < 0 ? -1 : (*rows)[holder[i]].id);
    auto stored = (*reader)->tensorDumpData(d.id);
    ASSERT_TRUE(stored.isOk());
    auto raw = tensor::decodeDumpPayload(stored->bytes, stored->zstd_frame);
    ASSERT_TRUE(raw.isOk());
    EXPECT_EQ(*raw, *expected[i]);
    EXPECT_EQ(d.data_bytes, static_cast<int64_t>(stored->bytes.size()));
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    size_t payloads = 0;
    for (const auto* list : {&ops[i].inputs, &ops[i].outputs})
      for (const auto* b : *list) payloads += b->size();
    EXPECT_GT(fs::file_size(dir / "files" / ("op." + std::to_string(i))), payloads) << "op " << i;
  }
  fs::remove_all(dir);
}

TEST(PayloadPool, ReusesBuffersOfAFittingSizeWithinItsBound) {
  PayloadPool pool(size_t{3} << 20);
  std::vector<uint8_t> a = pool.take(size_t{1} << 20);
  EXPECT_TRUE(a.empty());
  EXPECT_GE(a.capacity(), size_t{1} << 20);
  a.assign(size_t{1} << 20, 7);
  const uint8_t* a_mem = a.data();
  pool.give(std::move(a));
  EXPECT_EQ(pool.cachedBytes(), size_t{1} << 20);

  std::vector<uint8_t> small = pool.take(100 << 10);  // the cached MiB is over twice too big
  EXPECT_NE(small.data(), a_mem);
  std::vector<uint8_t> b = pool.take(900 << 10);  // fits: the same memory, handed out empty
  EXPECT_EQ(b.data(), a_mem);
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(pool.cachedBytes(), 0u);

  std::vector<uint8_t> tiny;
  tiny.reserve(1000);
  pool.give(std::move(tiny));  // below kMinPooledBytes: freed
  EXPECT_EQ(pool.cachedBytes(), 0u);

  for (int i = 0; i < 5; ++i) {
    std::vector<uint8_t> v;
    v.reserve(size_t{1} << 20);
    pool.give(std::move(v));
  }
  EXPECT_EQ(pool.cachedBytes(), size_t{3} << 20);  // the bound: two of the five were freed
}

}  // namespace
}  // namespace npuscope::dumper
