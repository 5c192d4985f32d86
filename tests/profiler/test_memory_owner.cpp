// Memory by owner: the built-in CNN trained on the npu under amp O0, O1 and O2 (+ combine_grad)
// with a fused Adam, its device blocks' categories checked against what the configuration
// implies (sizes computed here from the model's parameters and the combined-tensor layout
// contract), the peak's live blocks against the pool's own counter, and an induced
// out-of-memory against its snapshot.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>

#include "npuscope/analysis/memory_breakdown.h"
#include "npuscope/device/npu.h"
#include "npuscope/store/format.h"
#include "npuscope/store/trace_reader.h"
#include "npuscope/workloads/models.h"
#include "npuscope/workloads/trainer.h"

namespace npuscope {
namespace {

std::string tempPath(const std::string& name) {
  std::string p = testing::TempDir() + "/npuscope_mem_" + name;
  for (const char* s : {"", "-wal", "-shm"}) std::remove((p + s).c_str());
  return p;
}

// torch_npu's combined-tensor contract: a tensor of n elements takes ceil16(n) + 32 of them.
int64_t padded(int64_t n) { return (n + 15) / 16 * 16 + 32; }

struct ParamCounts {
  int64_t count = 0;   // elements of the model's parameters
  int64_t padded = 0;  // the elements a combined buffer of them holds
};

ParamCounts cnnParams() {
  auto model = workloads::makeModel("cnn");
  EXPECT_TRUE(model.isOk());
  ParamCounts c;
  for (const auto& p : (*model)->parameters()) {
    c.count += p.numel();
    c.padded += padded(p.numel());
  }
  return c;
}

workloads::TrainOptions cnnOptions(const std::string& db, const std::string& level) {
  workloads::TrainOptions o;
  o.model = "cnn";
  o.dataset = "synthetic";
  o.synthetic_size = 256;
  o.batch_size = 32;
  o.max_steps = 4;
  o.optimizer = "adam";
  o.lr = 1e-3;
  o.amp.opt_level = level;
  o.amp.verbosity = 0;
  o.db = db;
  return o;
}

// Requested bytes by category of the blocks live at the run's peak.
struct AtPeak {
  int64_t requested[kMemoryCategoryCount] = {};
  int64_t allocated = 0;       // the live blocks' sizes added up
  int64_t recorder_peak = 0;   // the recorder's peak (the pool's counter at that event)
  int64_t sample_peak = 0;     // the highest allocated of the run's memory samples
  int64_t peak_step = -1;
  std::vector<MemoryBlockRecord> blocks;
};

AtPeak readPeak(const std::string& db) {
  AtPeak out;
  auto reader = TraceReader::open(db);
  EXPECT_TRUE(reader.isOk()) << reader.status().message();
  if (!reader.isOk()) return out;
  auto run = (*reader)->latestRun();
  EXPECT_TRUE(run.isOk());
  auto mem = memoryByDevice(**reader, run->id);
  EXPECT_TRUE(mem.isOk()) << mem.status().message();
  EXPECT_EQ(mem->size(), 1u);
  if (!mem.isOk() || mem->empty()) return out;
  const DeviceMemory& d = mem->front();
  for (const auto& b : d.at_peak.blocks) out.requested[b.category] += b.requested;
  out.allocated = d.at_peak.allocated;
  out.peak_step = d.peak_step;
  out.blocks = d.at_peak.blocks;
  auto devices = (*reader)->memoryDevices(run->id);
  EXPECT_TRUE(devices.isOk());
  if (devices.isOk() && !devices->empty()) out.recorder_peak = devices->front().peak_allocated;
  auto peaks = (*reader)->memoryPeaks(run->id);
  if (peaks.isOk() && !peaks->empty()) out.sample_peak = peaks->front().allocated;
  return out;
}

int64_t of(const AtPeak& p, MemoryCategory c) { return p.requested[static_cast<int>(c)]; }

TEST(MemoryByOwner, O2CategoriesAreWhatMasterWeightsAndAdamImply) {
  const ParamCounts n = cnnParams();
  const std::string db = tempPath("o2.db");
  auto o = cnnOptions(db, "O2");
  o.amp.combine_grad = true;
  o.amp.keep_batchnorm_fp32 = false;  // (the CNN has no BatchNorm: every parameter is fp16)
  auto r = workloads::train(o, nullptr);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  const AtPeak p = readPeak(db);
  // fp16 model copy, fp32 masters, Adam's two fp32 state buffers, fp16 model grads + fp32
  // master grads: each a combined buffer of the padded layout.
  EXPECT_EQ(of(p, MemoryCategory::kParameter), 2 * n.padded);
  EXPECT_EQ(of(p, MemoryCategory::kMasterWeight), 4 * n.padded);
  EXPECT_GE(of(p, MemoryCategory::kMasterWeight), 4 * n.count);
  EXPECT_EQ(of(p, MemoryCategory::kOptimizerState), 8 * n.padded);
  EXPECT_EQ(of(p, MemoryCategory::kGradient), 2 * n.padded + 4 * n.padded);
  // The owners say which buffer is which: the model's grads are fp16 like its parameters.
  int64_t model_grads = 0, master_grads = 0;
  for (const auto& b : p.blocks) {
    if (b.owner == "NpuFusedAdam bank 0 grads") model_grads += b.requested;
    if (b.owner == "NpuFusedAdam bank 0 master grads") master_grads += b.requested;
  }
  EXPECT_EQ(model_grads, 2 * n.padded);
  EXPECT_EQ(master_grads, 4 * n.padded);
  // At the peak the categories add up to the allocated bytes exactly: the recorder's peak and
  // the highest of the pool's allocated samples.
  EXPECT_GT(p.allocated, 0);
  EXPECT_EQ(p.allocated, p.recorder_peak);
  EXPECT_EQ(p.allocated, p.sample_peak);
  EXPECT_GE(p.peak_step, 1);  // after the first step created Adam's state
}

TEST(MemoryByOwner, O0AndO1KeepFp32ParametersAndNoMasters) {
  const ParamCounts n = cnnParams();
  for (const char* level : {"O0", "O1"}) {
    SCOPED_TRACE(level);
    const std::string db = tempPath(std::string(level) + ".db");
    auto r = workloads::train(cnnOptions(db, level), nullptr);
    ASSERT_TRUE(r.isOk()) << r.status().message();
    const AtPeak p = readPeak(db);
    EXPECT_EQ(of(p, MemoryCategory::kMasterWeight), 0);
    EXPECT_EQ(of(p, MemoryCategory::kParameter), 4 * n.padded);
    EXPECT_EQ(of(p, MemoryCategory::kGradient), 4 * n.padded);  // fp32, like the parameters
    EXPECT_EQ(of(p, MemoryCategory::kOptimizerState), 8 * n.padded);
    EXPECT_EQ(p.allocated, p.sample_peak);
    // The rest of the live set is the step's own: activations and temporaries from ops.
    for (const auto& b : p.blocks) {
      if (b.category == static_cast<uint8_t>(MemoryCategory::kActivation) ||
          b.category == static_cast<uint8_t>(MemoryCategory::kTemporary)) {
        EXPECT_GE(b.op_id, 0) << "an inferred block names its allocating op";
      }
    }
  }
}

TEST(MemoryByOwner, AnInducedOutOfMemoryLeavesASnapshotThatAddsUp) {
  const std::string db = tempPath("oom.db");
  const uint64_t capacity = npu::memory_stats(0).capacity;
  npu::empty_cache(0);
  npu::set_memory_capacity(0, 24ull << 20);  // the CNN's batch-32 forward needs more
  auto o = cnnOptions(db, "O2");
  o.batch_size = 256;
  o.synthetic_size = 1024;
  auto r = workloads::train(o, nullptr);
  npu::set_memory_capacity(0, capacity);
  ASSERT_FALSE(r.isOk());
  const std::string message = r.status().message();
  EXPECT_NE(message.find("out of memory"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;

  auto reader = TraceReader::open(db);
  ASSERT_TRUE(reader.isOk());
  auto run = (*reader)->latestRun();
  ASSERT_TRUE(run.isOk());
  EXPECT_EQ(run->status, "failed");
  auto mem = memoryByDevice(**reader, run->id);
  ASSERT_TRUE(mem.isOk());
  ASSERT_EQ(mem->size(), 1u);
  ASSERT_EQ(mem->front().ooms.size(), 1u);
  const DeviceMemory::Oom& oom = mem->front().ooms.front();
  // The live blocks add up to the bytes the pool had in use, as its last sample said.
  MemoryQuery q;
  q.run_id = run->id;
  auto samples = (*reader)->memory(q);
  ASSERT_TRUE(samples.isOk());
  int64_t in_use = -1;
  for (const auto& s : *samples) {
    if (s.ts_ns <= oom.record.ts_ns) in_use = s.allocated;
  }
  EXPECT_EQ(oom.live.allocated, in_use);
  EXPECT_NE(message.find(formatBytes(static_cast<uint64_t>(in_use)) + " in use"), std::string::npos) << message;
  // The message names the category holding most, as the snapshot counts it.
  int largest = 0;
  for (int c = 0; c < kMemoryCategoryCount; ++c) {
    if (oom.live.bytes[c] > oom.live.bytes[largest]) largest = c;
  }
  EXPECT_NE(message.find(std::string("most held by ") + memoryCategoryName(largest)), std::string::npos)
      << message << "\nsnapshot: " << categorySummary(oom.live);
  EXPECT_EQ(oom.record.message, message.substr(message.find("npu:0 out of memory")));
}

}  // namespace
}  // namespace npuscope
