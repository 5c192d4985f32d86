// bench_dump: the op dumper on the test CNN's training step (two 3x3 conv blocks of 16 and 32
// channels with ReLU and 2x2 max-pool, a linear classifier; batch 64 of 28x28 images, SGD with
// momentum, its update marked as the dumper's update phase, so not dumped, as in training).
//   fraction_of_write_bandwidth: bytes a full `tensor` dump writes per step (the Ascend files
//     and the trace file's tensor_dumps rows: twice the payload, as a user reads it back) over
//     the extra time the step takes with dumping, divided by this disk's sequential write
//     bandwidth. The rows store a payload compressed and once per step (shared_payload_fraction
//     of it repeats earlier tensors of the step), so fewer bytes reach the disk. Both sides reach
//     the disk inside their timing: the dumped step ends when the dumper is stopped (files
//     written), the writer flushed (rows committed) and the filesystem synced (syncfs); the
//     plain step it is compared with ends with a syncfs too. The bandwidth: a 256 MiB buffered
//     write and its fsync, once per iteration between the steps (a single write at the start
//     varied 3x from run to run). Medians of all are reported. Target >= 0.5.
//   stats_mode_ratio_vs_none: step time with `stats` dumping (rows flushed) over no dumping.
//     Target <= 2.0 (msprobe's statistics dump costs 4.5-26x).
// Steps alternate between the variants so drift hits all of them; medians are reported.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <vector>

#include "npuscope/store/trace_writer.h"
#include "npuscope/device/npu.h"
#include "npuscope/dumper/dumper.h"
#include "ratio.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using npuscope::dumper::Dumper;
using npuscope::dumper::DumpConfig;
using npuscope::dumper::DumpDataKind;

struct Cnn : torch::nn::Module {
  torch::nn::Conv2d c1{torch::nn::Conv2dOptions(1, 16, 3).padding(1)};
  torch::nn::Conv2d c2{torch::nn::Conv2dOptions(16, 32, 3).padding(1)};
  torch::nn::Linear fc{32 * 7 * 7, 10};
  Cnn() {
    register_module("c1", c1);
    register_module("c2", c2);
    register_module("fc", fc);
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(c1(x)), 2);
    x = torch::max_pool2d(torch::relu(c2(x)), 2);
    return fc(x.flatten(1));
  }
};

// Bytes per second of a buffered write of `bytes` to a new file in `dir` and its fsync.
double writeBandwidth(const fs::path& dir, size_t bytes) {
  const size_t chunk = size_t{4} << 20;
  static const std::vector<char> buf(chunk, 1);
  const fs::path p = dir / "bandwidth.bin";
  const auto t0 = Clock::now();
  int fd = ::open(p.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  for (size_t done = 0; done < bytes; done += chunk) {
    const size_t n = std::min(chunk, bytes - done);
    if (::write(fd, buf.data(), n) != static_cast<ssize_t>(n)) break;
  }
  ::fsync(fd);
  ::close(fd);
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  fs::remove(p);
  return static_cast<double>(bytes) / s;
}

// Writes back every dirty page of the filesystem holding `dir`.
void syncFilesystem(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  ::syncfs(fd);
  ::close(fd);
}

constexpr size_t kBandwidthBytes = size_t{256} << 20;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

void BM_DumpCnnStep(benchmark::State& state) {
  const fs::path dir = fs::temp_directory_path() / ("npuscope_bench_dump_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);

  torch::manual_seed(0);
  const auto dev = npuscope::npu::device(0);
  auto model = std::make_shared<Cnn>();
  model->to(dev);
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  const at::Tensor x = torch::randn({64, 1, 28, 28}).to(dev);
  const at::Tensor y = torch::randint(0, 10, {64}).to(dev);
  auto step = [&] {
    opt.zero_grad();
    torch::nn::functional::cross_entropy(model->forward(x), y).backward();
    Dumper::UpdatePhase update;
    opt.step();
  };

  auto writer = npuscope::TraceWriter::open((dir / "trace.db").string());
  if (!writer.isOk()) {
    state.SkipWithError(writer.status().message().c_str());
    return;
  }
  (void)(*writer)->beginRun(npuscope::RunInfo{});
  Dumper& d = Dumper::instance();
  d.attach(writer->get());
  DumpConfig tensor_cfg;
  tensor_cfg.dump_path = (dir / "dumps").string();
  DumpConfig stats_cfg;
  stats_cfg.data = DumpDataKind::kStats;

  // One dumped step, the files written and the rows committed: everything it costs is inside
  // the time; with `synced`, until the bytes are on the disk.
  auto dumped = [&](const DumpConfig& c, bool synced, uint64_t* bytes, uint64_t* shared = nullptr) {
    (void)d.configure(c);
    const auto t0 = Clock::now();
    (void)d.start();
    step();
    (void)d.stop();
    (void)(*writer)->flush();
    if (synced) syncFilesystem(dir);
    const double s = seconds(t0, Clock::now());
    if (bytes) *bytes = d.counters().payload_bytes;
    if (shared) *shared = d.counters().shared_payload_bytes;
    return s;
  };
  auto plain = [&](bool synced) {
    const auto t0 = Clock::now();
    step();
    if (synced) syncFilesystem(dir);
    return seconds(t0, Clock::now());
  };
  // Not timed: keeps the disk from filling and starts each measurement with nothing dirty.
  auto clearDumps = [&] {
    fs::remove_all(dir / "dumps");
    syncFilesystem(dir);
  };
  uint64_t bytes = 0, shared = 0;
  for (int i = 0; i < 2; ++i) {  // warm-up
    plain(false);
    dumped(stats_cfg, false, nullptr);
    dumped(tensor_cfg, true, &bytes);
    clearDumps();
  }
  std::vector<double> t_none, t_none_synced, t_stats, t_tensor, bandwidth;
  for (auto _ : state) {
    t_none.push_back(plain(false));
    t_stats.push_back(dumped(stats_cfg, false, nullptr));
    t_none_synced.push_back(plain(true));
    t_tensor.push_back(dumped(tensor_cfg, true, &bytes, &shared));
    state.PauseTiming();
    clearDumps();
    bandwidth.push_back(writeBandwidth(dir, kBandwidthBytes));
    state.ResumeTiming();
  }
  // Each dumped step writes its payload twice: the Ascend file and the tensor_dumps row.
  const double written = 2.0 * static_cast<double>(bytes);
  using npuscope::bench::medianOf;
  const double none = medianOf(t_none), none_synced = medianOf(t_none_synced), stats = medianOf(t_stats),
               tensor = medianOf(t_tensor), disk = medianOf(bandwidth);
  const double extra = std::max(tensor - none_synced, 1e-9);
  state.counters["fraction_of_write_bandwidth"] = written / extra / disk;
  state.counters["dump_MBps"] = written / extra / 1e6;
  state.counters["write_bandwidth_MBps"] = disk / 1e6;
  state.counters["write_bandwidth_min_MBps"] = *std::min_element(bandwidth.begin(), bandwidth.end()) / 1e6;
  state.counters["write_bandwidth_max_MBps"] = *std::max_element(bandwidth.begin(), bandwidth.end()) / 1e6;
  state.counters["stats_mode_ratio_vs_none"] = stats / none;
  state.counters["payload_MB_per_step"] = static_cast<double>(bytes) / 1e6;
  state.counters["shared_payload_fraction"] = bytes ? static_cast<double>(shared) / static_cast<double>(bytes) : 0;
  state.counters["step_none_ms"] = none * 1e3;
  state.counters["step_none_synced_ms"] = none_synced * 1e3;
  state.counters["step_stats_ms"] = stats * 1e3;
  state.counters["step_tensor_ms"] = tensor * 1e3;
  d.attach(nullptr);
  (void)(*writer)->endRun("completed");
  writer->reset();
  fs::remove_all(dir);
}
BENCHMARK(BM_DumpCnnStep)->Iterations(8)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
