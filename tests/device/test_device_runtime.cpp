// The torch-free runtime: devices and the environment, memory pools, the float-status register,
// the cost model and the stream model.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <mutex>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "npuscope/device/npu.h"

namespace npu = npuscope::npu;

namespace {

// Runs the probe with extra environment assignments ("A=1 B=2") and returns its key=value lines
// plus the whole output under "_all".
std::map<std::string, std::string> probe(const std::string& env) {
  const std::string cmd = "env -u ASCEND_RT_VISIBLE_DEVICES -u ASCEND_DEVICE_ID -u NPUSCOPE_NPU_COUNT " + env +
                          " " NPU_ENV_PROBE " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  std::map<std::string, std::string> out;
  std::array<char, 512> buf{};
  while (pipe && fgets(buf.data(), buf.size(), pipe.get())) {
    std::string line(buf.data());
    out["_all"] += line;
    if (!line.empty() && line.back() == '\n') line.pop_back();
    const auto eq = line.find('=');
    if (eq != std::string::npos && line[0] != '[') out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

}  // namespace

TEST(DeviceEnvironment, DefaultsToEightDevicesStartingAtZero) {
  auto p = probe("");
  EXPECT_EQ(p["status"], "ok");
  EXPECT_EQ(p["count"], "8");
  EXPECT_EQ(p["physical"], "0,1,2,3,4,5,6,7");
  EXPECT_EQ(p["current"], "0");
  EXPECT_EQ(p["tensor_device"], "npu:0");
  EXPECT_EQ(p["capacity"], std::to_string(32ull << 30));
}

TEST(DeviceEnvironment, VisibleDevicesLimitAndRenumber) {
  auto p = probe("ASCEND_RT_VISIBLE_DEVICES=2,5,7");
  EXPECT_EQ(p["status"], "ok");
  EXPECT_EQ(p["count"], "3");
  EXPECT_EQ(p["physical"], "2,5,7");
}

TEST(DeviceEnvironment, DeviceIdPicksTheDefaultDevice) {
  auto p = probe("ASCEND_RT_VISIBLE_DEVICES=4,6 ASCEND_DEVICE_ID=1");
  EXPECT_EQ(p["current"], "1");
  EXPECT_EQ(p["tensor_device"], "npu:1");
}

TEST(DeviceEnvironment, DeviceCountIsConfigurable) {
  auto p = probe("NPUSCOPE_NPU_COUNT=2");
  EXPECT_EQ(p["count"], "2");
  EXPECT_EQ(p["physical"], "0,1");
}

TEST(DeviceEnvironment, BadValuesAreNamedErrors) {
  auto p = probe("ASCEND_RT_VISIBLE_DEVICES=1,x");
  EXPECT_NE(p["status"].find("ASCEND_RT_VISIBLE_DEVICES='1,x'"), std::string::npos) << p["_all"];
  EXPECT_EQ(p["count"], "0");
  p = probe("ASCEND_RT_VISIBLE_DEVICES=9");
  EXPECT_NE(p["status"].find("not a device id from 0 to 7"), std::string::npos) << p["_all"];
  p = probe("ASCEND_DEVICE_ID=8");
  EXPECT_NE(p["status"].find("ASCEND_DEVICE_ID='8'"), std::string::npos) << p["_all"];
  p = probe("NPUSCOPE_NPU_COUNT=0");
  EXPECT_NE(p["status"].find("NPUSCOPE_NPU_COUNT"), std::string::npos) << p["_all"];
}

TEST(DeviceEnvironment, CapacityFromEnvironment) {
  auto p = probe("NPUSCOPE_NPU_MEMORY=512M");
  EXPECT_EQ(p["capacity"], std::to_string(512ull << 20));
}

TEST(DeviceEnvironment, ThreadsFollowTheCores) {
  auto p = probe("");
  EXPECT_EQ(p["threads"], std::to_string(std::thread::hardware_concurrency()));
  p = probe("NPUSCOPE_NUM_THREADS=1");
  EXPECT_EQ(p["threads"], "1");
}

TEST(DeviceEnvironment, LogLevelAndDestination) {
  // Level 3 (error, the default): neither line. Level 1 to stdout: both, in Ascend's format.
  auto quiet = probe("ASCEND_GLOBAL_LOG_LEVEL=3");
  EXPECT_EQ(quiet["_all"].find("probe warning line"), std::string::npos);
  auto loud = probe("ASCEND_GLOBAL_LOG_LEVEL=1 ASCEND_SLOG_PRINT_TO_STDOUT=1");
  EXPECT_NE(loud["_all"].find("[WARNING] NPU("), std::string::npos) << loud["_all"];
  EXPECT_NE(loud["_all"].find("probe info line"), std::string::npos);
  auto warn = probe("ASCEND_GLOBAL_LOG_LEVEL=2 ASCEND_SLOG_PRINT_TO_STDOUT=1");
  EXPECT_NE(warn["_all"].find("probe warning line"), std::string::npos);
  EXPECT_EQ(warn["_all"].find("probe info line"), std::string::npos);
  auto none = probe("ASCEND_GLOBAL_LOG_LEVEL=4 ASCEND_SLOG_PRINT_TO_STDOUT=1");
  EXPECT_EQ(none["_all"].find("probe warning line"), std::string::npos);
}

TEST(DeviceEnvironment, TaskQueueSwitch) {
  EXPECT_EQ(probe("")["task_queue"], "1");
  EXPECT_EQ(probe("TASK_QUEUE_ENABLE=0")["task_queue"], "0");
}

TEST(DeviceNames, ParseAndFormat) {
  EXPECT_EQ(npu::device_name(3), "npu:3");
  EXPECT_EQ(*npu::parse_device("npu:2"), 2);
  EXPECT_EQ(*npu::parse_device("5"), 5);
  EXPECT_FALSE(npu::parse_device("gpu:1").isOk());
  EXPECT_NE(npu::parse_device("gpu:1").status().message().find("'gpu:1'"), std::string::npos);
  auto s = npu::parse_device("npu:8");
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.status().message().find("npu:8 does not exist"), std::string::npos);
  EXPECT_FALSE(npu::set_device(-1).isOk());
}

TEST(MemoryPool, AccountsRoundedBlocksAndCachesThem) {
  const int dev = 6;
  npu::empty_cache(dev);
  const auto before = npu::memory_stats(dev);
  auto a = npu::allocate(dev, 1000);  // rounds to 1024
  ASSERT_TRUE(a.isOk());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*a) % 64, 0u);
  auto s1 = npu::memory_stats(dev);
  EXPECT_EQ(s1.allocated - before.allocated, 1024u);
  EXPECT_EQ(s1.reserved - before.reserved, 1024u);
  npu::release(*a);
  auto s2 = npu::memory_stats(dev);
  EXPECT_EQ(s2.allocated, before.allocated);
  EXPECT_EQ(s2.reserved - before.reserved, 1024u);  // cached, still reserved
  auto b = npu::allocate(dev, 900);                  // same block size: served from the cache
  ASSERT_TRUE(b.isOk());
  EXPECT_EQ(*b, *a);
  npu::release(*b);
  npu::empty_cache(dev);
  EXPECT_EQ(npu::memory_stats(dev).reserved, before.reserved);
  EXPECT_GE(npu::memory_stats(dev).peak_allocated, before.allocated + 1024);
}

TEST(MemoryPool, CapacityErrorNamesEverythingAndTheProcessCanRetry) {
  const int dev = 7;
  npu::empty_cache(dev);
  npu::set_memory_capacity(dev, 8ull << 20);
  auto a = npu::allocate(dev, 6ull << 20);
  ASSERT_TRUE(a.isOk());
  auto b = npu::allocate(dev, 4ull << 20);
  ASSERT_FALSE(b.isOk());
  EXPECT_EQ(b.status().code(), npuscope::StatusCode::kOutOfMemory);
  const std::string& m = b.status().message();
  EXPECT_NE(m.find("npu:7 out of memory"), std::string::npos) << m;
  EXPECT_NE(m.find("tried to allocate 4.00 MiB"), std::string::npos) << m;
  EXPECT_NE(m.find("6.00 MiB in use"), std::string::npos) << m;
  EXPECT_NE(m.find("capacity of 8.00 MiB"), std::string::npos) << m;
  EXPECT_EQ(npu::memory_stats(dev).num_ooms, 1u);
  npu::release(*a);
  // Freed memory sits in the cache; a request that needs it makes the pool release the cache.
  auto c = npu::allocate(dev, 7ull << 20);
  ASSERT_TRUE(c.isOk()) << c.status().message();
  npu::release(*c);
  npu::empty_cache(dev);
  npu::set_memory_capacity(dev, 32ull << 30);
}

TEST(MemoryPool, ObserverSeesEveryChange) {
  static int calls = 0;
  static uint64_t last_allocated = 0;
  calls = 0;
  npu::set_memory_observer([](int device, uint64_t allocated, uint64_t) {
    if (device == 5) {
      ++calls;
      last_allocated = allocated;
    }
  });
  auto a = npu::allocate(5, 4096);
  ASSERT_TRUE(a.isOk());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(last_allocated, npu::memory_stats(5).allocated);
  npu::release(*a);
  EXPECT_EQ(calls, 2);
  npu::set_memory_observer(nullptr);
}

// A block larger than the cache limit (1 GiB) goes back to the host at once; the observer must
// still be told which device (the header was read after being freed: a crash in ResNet-50 at
// batch 32 under recording, where glibc had unmapped the block).
TEST(MemoryPool, ObserverOfABlockTooLargeToCache) {
  static int device_seen = -1;
  static uint64_t allocated_seen = 1;
  npu::set_memory_observer([](int device, uint64_t allocated, uint64_t) {
    device_seen = device;
    allocated_seen = allocated;
  });
  auto a = npu::allocate(6, (1ull << 30) + (64ull << 20));  // never touched: no pages committed
  ASSERT_TRUE(a.isOk()) << a.status().message();
  const uint64_t reserved = npu::memory_stats(6).reserved;
  npu::release(*a);
  EXPECT_EQ(device_seen, 6);
  EXPECT_EQ(allocated_seen, 0u);
  EXPECT_LT(npu::memory_stats(6).reserved, reserved);  // not cached
  npu::set_memory_observer(nullptr);
}

TEST(FloatStatus, StickyPerDeviceUntilCleared) {
  npu::clear_float_status(0);
  npu::clear_float_status(1);
  EXPECT_FALSE(npu::get_float_status(0));
  npu::raise_float_status(1);
  EXPECT_FALSE(npu::get_float_status(0));
  EXPECT_TRUE(npu::get_float_status(1));
  EXPECT_TRUE(npu::get_float_status(1));  // reading does not clear
  npu::clear_float_status(1);
  EXPECT_FALSE(npu::get_float_status(1));
}

TEST(FloatStatus, ModeNames) {
  EXPECT_EQ(*npu::parse_overflow_mode("saturation"), npu::OverflowMode::kSaturation);
  EXPECT_EQ(*npu::parse_overflow_mode("inf_nan"), npu::OverflowMode::kInfNan);
  EXPECT_FALSE(npu::parse_overflow_mode("clamp").isOk());
}

TEST(CostModel, CubeWorkIsComputeBound) {
  npu::CostModelParams p;
  npu::OpWork mm{npu::ComputeUnit::kCube, true, 2.0 * 4096 * 4096 * 4096, 3.0 * 4096 * 4096 * 2};
  const double expect_s = mm.flops / p.cube_fp16_flops_per_s;
  EXPECT_EQ(npu::modeled_duration_ns(mm, p), p.launch_ns + static_cast<int64_t>(expect_s * 1e9 + 0.5));
  mm.low_precision = false;  // fp32 matrix work at the fp32 rate
  EXPECT_NEAR(npu::modeled_duration_ns(mm, p) - p.launch_ns, mm.flops / p.cube_fp32_flops_per_s * 1e9, 2.0);
  mm.efficiency = 0.25;  // a quarter of the Cube busy: four times as long
  EXPECT_NEAR(npu::modeled_duration_ns(mm, p) - p.launch_ns, 4 * mm.flops / p.cube_fp32_flops_per_s * 1e9, 8.0);
}

// A matmul with few rows (a batch-32 fully connected layer) streams its weight and does little
// arithmetic: bound by reading its inputs and writing its output, by hand.
TEST(CostModel, SkinnyMatmulIsBoundByItsOperands) {
  npu::CostModelParams p;
  const at::Tensor x = at::empty({32, 4096}, at::TensorOptions().device(at::kMeta));
  const at::Tensor w = at::empty({4096, 9216}, at::TensorOptions().device(at::kMeta));
  const at::Tensor y = at::empty({32, 9216}, at::TensorOptions().device(at::kMeta));
  const npu::OpWork work = npu::estimate_op_work("aten::mm", {x, w}, {y});
  const double in = 4.0 * (32 * 4096 + 4096 * 9216), out = 4.0 * 32 * 9216;
  EXPECT_DOUBLE_EQ(work.out_bytes, out);
  const double s = in / p.cube_read_bytes_per_s + out / p.cube_write_bytes_per_s;
  ASSERT_GT(s, work.flops / p.cube_fp32_flops_per_s);
  EXPECT_EQ(npu::modeled_duration_ns(work, p), p.launch_ns + static_cast<int64_t>(s * 1e9 + 0.5));
}

TEST(CostModel, VectorWorkCostsItsFamilysSetupAndBandwidth) {
  npu::CostModelParams p;
  const double n = 1 << 24;
  npu::OpWork add{npu::ComputeUnit::kVector, false, n, 3 * 4 * n};
  const npu::VectorCost& ew = p.cost(npu::VectorKind::kElementwise);
  EXPECT_EQ(npu::modeled_duration_ns(add, p),
            p.launch_ns + static_cast<int64_t>((ew.setup_us * 1e-6 + add.bytes / ew.bytes_per_s) * 1e9 + 0.5));
  npu::OpWork tiny{npu::ComputeUnit::kMemory, false, 0, 64};
  tiny.kind = npu::VectorKind::kCopy;
  EXPECT_EQ(npu::modeled_duration_ns(tiny, p),
            p.launch_ns + static_cast<int64_t>((p.cost(npu::VectorKind::kCopy).setup_us * 1e-6 + 64 / p.cost(npu::VectorKind::kCopy).bytes_per_s) * 1e9 + 0.5));
  // The same bytes permuted cost more than copied: a transpose's setup and bandwidth.
  npu::OpWork copy{npu::ComputeUnit::kMemory, false, 0, 8e6};
  copy.kind = npu::VectorKind::kCopy;
  npu::OpWork transpose = copy;
  transpose.kind = npu::VectorKind::kTranspose;
  EXPECT_GT(npu::modeled_duration_ns(transpose, p), 2 * npu::modeled_duration_ns(copy, p));
  for (int k = 0; k < static_cast<int>(npu::VectorKind::kCount); ++k) {
    EXPECT_GT(p.vector[k].bytes_per_s, 0) << npu::vectorKindName(static_cast<npu::VectorKind>(k));
    EXPECT_GE(p.vector[k].setup_us, 0) << npu::vectorKindName(static_cast<npu::VectorKind>(k));
  }
}

// Which family an op falls in: from its name and, for copies, its operands.
TEST(CostModel, OpsFallInTheirFamilies) {
  const at::Tensor t = at::ones({64, 32});
  const at::Tensor h = t.to(at::kHalf);
  auto kind = [](const char* op, std::vector<at::Tensor> in, std::vector<at::Tensor> out) {
    return npu::estimate_op_work(op, in, out).kind;
  };
  using K = npu::VectorKind;
  EXPECT_EQ(kind("aten::add", {t, t}, {t}), K::kElementwise);
  EXPECT_EQ(kind("aten::exp", {t}, {t}), K::kTranscendental);
  EXPECT_EQ(kind("aten::copy_", {h, t}, {h}), K::kCast);
  EXPECT_EQ(kind("aten::copy_", {t, t}, {t}), K::kCopy);
  EXPECT_EQ(kind("aten::clone", {t.t()}, {t.t().contiguous()}), K::kTranspose);
  EXPECT_EQ(kind("aten::sum", {t}, {at::ones({})}), K::kReduceAll);
  EXPECT_EQ(kind("aten::sum", {t}, {at::ones({32})}), K::kReducePartial);
  EXPECT_EQ(kind("aten::max_pool2d_with_indices_backward", {t}, {t}), K::kPoolGrad);
  EXPECT_EQ(kind("aten::native_batch_norm", {t}, {t}), K::kNorm);
  EXPECT_EQ(kind("aten::native_layer_norm_backward", {t}, {t}), K::kNormGrad);
  EXPECT_EQ(kind("aten::_foreach_add_", {t, t}, {}), K::kForeach);
  EXPECT_EQ(kind("aten::cat", {t, t}, {at::ones({128, 32})}), K::kStridedCopy);
  // A slice reads only what it writes.
  const npu::OpWork slice = npu::estimate_op_work("aten::slice", {t}, {at::ones({8, 32})});
  EXPECT_DOUBLE_EQ(slice.bytes, 2.0 * 8 * 32 * 4);
  // Recorded (boxed) reductions keep the dimensions not in their dim list.
  const std::vector<c10::IValue> all = {t}, rows = {t, c10::IValue(std::vector<int64_t>{1}), false};
  EXPECT_EQ(npu::estimate_op_work("aten::sum", c10::ArrayRef<const c10::IValue>(all.data(), all.size())).kind, K::kReduceAll);
  const npu::OpWork partial =
      npu::estimate_op_work("aten::sum.dim_IntList", c10::ArrayRef<const c10::IValue>(rows.data(), rows.size()));
  EXPECT_EQ(partial.kind, K::kReducePartial);
  EXPECT_DOUBLE_EQ(partial.bytes, 4.0 * (64 * 32 + 64));
}

// Few input channels leave the Cube idle: a 3-channel convolution (padded to 8 fp32 channels)
// runs at 8 / (8 + 64) of the rate, a 256-channel one at 256 / (256 + 64).
TEST(CostModel, ConvolutionEfficiencyFollowsInputChannels) {
  npu::CostModelParams p;
  const at::Tensor x3 = at::empty({8, 3, 32, 32}, at::TensorOptions().device(at::kMeta));
  const at::Tensor w3 = at::empty({64, 3, 3, 3}, at::TensorOptions().device(at::kMeta));
  const at::Tensor y = at::empty({8, 64, 30, 30}, at::TensorOptions().device(at::kMeta));
  const npu::OpWork a = npu::estimate_op_work("aten::convolution", {x3, w3}, {y});
  EXPECT_DOUBLE_EQ(a.efficiency, 8.0 / (8.0 + p.conv_channel_half));
  EXPECT_DOUBLE_EQ(a.flops, 2.0 * 8 * 64 * 30 * 30 * 8 * 9);  // channels padded to C0 = 8
  const at::Tensor x256 = at::empty({8, 256, 32, 32}, at::TensorOptions().device(at::kMeta));
  const at::Tensor w256 = at::empty({64, 256, 3, 3}, at::TensorOptions().device(at::kMeta));
  EXPECT_DOUBLE_EQ(npu::estimate_op_work("aten::convolution", {x256, w256}, {y}).efficiency, 256.0 / (256.0 + p.conv_channel_half));
  // The TransData torch_npu runs around it: the input and output between NCHW and NC1HWC0, the
  // weight to FRACTAL_Z; each a task of its own (launch + setup) moving its bytes twice.
  npu::OpWork plain = a;
  plain.format_act_tasks = plain.format_weight_tasks = 0;
  const double act = 2.0 * 4 * (8 * 3 * 32 * 32 + 8 * 64 * 30 * 30), weight = 2.0 * 4 * 64 * 3 * 3 * 3;
  const npu::VectorCost& ca = p.cost(npu::VectorKind::kFormatActivation);
  const npu::VectorCost& cw = p.cost(npu::VectorKind::kFormatWeight);
  const double extra_ns = 3.0 * p.launch_ns + (2 * ca.setup_us + cw.setup_us) * 1e3 + act / ca.bytes_per_s * 1e9 +
                          weight / cw.bytes_per_s * 1e9;
  EXPECT_NEAR(npu::modeled_duration_ns(a, p) - npu::modeled_duration_ns(plain, p), extra_ns, 2.0);
}

// An op torch_npu runs on the host (its tocpu list) is charged as copies over PCIe plus host
// compute, not as a device kernel: by hand, launch + sync + bytes / PCIe + flops / host rate.
TEST(CostModel, HostFallbackOpsAreChargedAsCopiesAndHostCompute) {
  npu::CostModelParams p;
  npu::OpWork w;
  w.unit = npu::ComputeUnit::kVector;
  w.flops = 4e6;
  w.bytes = 8e6;
  const int64_t on_device = npu::modeled_duration_ns(w, p);
  w.host_fallback = true;
  const double s = 8e6 / 25e9 + 4e6 / 20e9;  // the documented 25 GB/s PCIe, 20 GFLOPS host core
  EXPECT_EQ(npu::modeled_duration_ns(w, p), p.launch_ns + 30000 + static_cast<int64_t>(s * 1e9 + 0.5));
  EXPECT_GT(npu::modeled_duration_ns(w, p), 10 * on_device);
  // Which ops: torch_npu 2.0.1 lists _fft_r2c under tocpu (analysis/data: "aten::_fft_r2c<TAB>fallback"),
  // add has an NPU kernel.
  const at::Tensor t = at::ones({64, 64});
  EXPECT_TRUE(npu::estimate_op_work("aten::_fft_r2c", {t}, {t}).host_fallback);
  EXPECT_FALSE(npu::estimate_op_work("aten::add", {t, t}, {t}).host_fallback);
  EXPECT_FALSE(npu::estimate_op_work("aten::convolution", {t, t}, {t}).host_fallback);
}

TEST(StreamModel, QueueOverlapsLaunchWithExecution) {
  npu::StreamModel s(true);
  // Op 0 launched at 0 runs 0..100; op 1 launched at 10 waits for op 0; op 2 launched late starts at once.
  auto a = s.submit(0, 100), b = s.submit(10, 50), c = s.submit(500, 20);
  EXPECT_EQ(a.start_ns, 0);
  EXPECT_EQ(a.end_ns, 100);
  EXPECT_EQ(b.start_ns, 100);
  EXPECT_EQ(b.end_ns, 150);
  EXPECT_EQ(c.start_ns, 500);
  EXPECT_EQ(c.end_ns, 520);
}

TEST(StreamModel, WithoutQueueTheHostWaitsForEachOp) {
  npu::StreamModel s(false);
  auto a = s.submit(0, 100);   // host blocked until 100
  auto b = s.submit(10, 50);   // launched 10 ns after op 0's launch: really at 110
  EXPECT_EQ(a.end_ns, 100);
  EXPECT_EQ(b.start_ns, 110);
  EXPECT_EQ(b.end_ns, 160);
  EXPECT_EQ(s.host_delay_ns(), 150);
}

// The process's shared streams (what the recorder submits every device op to) follow
// StreamModel's rule, and ops submitted from several threads at once never overlap on a stream:
// together they fill it from the first start without a gap.
TEST(StreamModel, SharedStreamsTileOpsFromManyThreads) {
  if (!npu::task_queue_enabled()) GTEST_SKIP() << "TASK_QUEUE_ENABLE=0";
  npu::reset_streams();
  const auto a = npu::submit_to_stream(1, 0, 100), b = npu::submit_to_stream(1, 10, 50);
  const auto c = npu::submit_to_stream(1, 500, 20);
  EXPECT_EQ(a.start_ns, 0);
  EXPECT_EQ(b.start_ns, 100);
  EXPECT_EQ(b.end_ns, 150);
  EXPECT_EQ(c.start_ns, 500);
  npu::reset_streams();
  constexpr int kThreads = 4, kOps = 20000;
  std::vector<std::vector<npu::StreamSlot>> slots(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&slots, t] {
      for (int i = 0; i < kOps; ++i) slots[t].push_back(npu::submit_to_stream(2, 0, 1 + (i + t) % 7));
    });
  }
  for (std::thread& th : threads) th.join();
  std::vector<std::pair<int64_t, int64_t>> all;
  int64_t total = 0;
  for (const auto& v : slots) {
    for (const auto& s : v) {
      all.emplace_back(s.start_ns, s.end_ns);
      total += s.end_ns - s.start_ns;
    }
  }
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), static_cast<size_t>(kThreads * kOps));
  EXPECT_EQ(all.front().first, 0);
  for (size_t i = 1; i < all.size(); ++i) ASSERT_EQ(all[i].first, all[i - 1].second) << "slot " << i;
  EXPECT_EQ(all.back().second, total);
  npu::reset_streams();
}

// libtorch's at::parallel_for is an inline template that runs on the calling thread alone unless
// its translation unit is built with OpenMP: every torch TU of the project is (npuscope::torch),
// so the device's conversions and the fused optimizers' kernels use the intra-op threads.
TEST(DeviceThreads, ParallelForInProjectCodeUsesTheIntraOpThreads) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one core";
  const int before = npuscope::npu::num_threads();
  npuscope::npu::set_num_threads(2);
  std::mutex mu;
  std::set<std::thread::id> used;
  for (int rep = 0; rep < 20 && used.size() < 2; ++rep) {
    at::parallel_for(0, int64_t{1} << 20, int64_t{1} << 16, [&](int64_t, int64_t) {
      std::lock_guard<std::mutex> lock(mu);
      used.insert(std::this_thread::get_id());
    });
  }
  npuscope::npu::set_num_threads(before);
  EXPECT_EQ(used.size(), 2u);
}

