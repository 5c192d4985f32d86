// bench_import: importing a generated Kineto-shaped chrome trace of >= 1 GB (written by the
// benchmark into $TMPDIR, removed after). Each import runs in a child process, so its peak
// resident memory is the child's own (getrusage RUSAGE_CHILDREN after the child, not this
// process's). Counters:
//   import_MBps                        file bytes per second of `npuscope import`'s library call
//                                      (target >= 200)
//   import_peak_rss_fraction_of_file   the child's peak RSS over the file size (target <= 0.3)
//   ratio_import_vs_read               the import's time over a plain read of the file in the same
//                                      run (the baseline: what the disk and page cache allow)
//   import_real_MBps                   unpacked bytes per second of the same call on a real trace,
//                                      HTA's df_index_resolver.json.gz (benchmarks/data; 51 MiB
//                                      unpacked): gzip, and the per-event work a real profile has
//                                      (target >= 150; the median of 5 imports)
// NPUSCOPE_IMPORT_BENCH_MB sets the generated size (default 1100); NPUSCOPE_IMPORT_BENCH_KEEP=1
// keeps the generated file.
#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "npuscope/import/import.h"

namespace {

// A GPU training profile as torch.profiler writes it with record_shapes: per step a
// ProfilerStep annotation; per op a cpu_op with shapes, types and ids, nested view ops, a
// cudaLaunchKernel with its correlation, the kernel with Kineto's occupancy args, an ac2g flow
// pair, and now and then a [memory] event and a memcpy.
std::string generate(size_t target_bytes) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string path = std::string(tmp ? tmp : "/tmp") + "/npuscope_bench_import.pt.trace.json";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return {};
  std::vector<char> buf(size_t{8} << 20);
  std::setvbuf(f, buf.data(), _IOFBF, buf.size());
  std::fprintf(f, "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [{\"id\": 0, \"name\": \"NVIDIA A100\", "
                  "\"totalGlobalMem\": 85899345920}],\n  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 0, "
                  "\"world_size\": 1},\n  \"baseTimeNanoseconds\": 1700000000000000000,\n  \"traceEvents\": [\n");
  const char* names[] = {"aten::linear", "aten::addmm", "aten::relu", "aten::add", "aten::mul", "aten::layer_norm",
                         "aten::softmax", "aten::matmul", "aten::conv2d", "aten::batch_norm"};
  const char* kernels[] = {"ampere_sgemm_128x64_tn", "void at::native::vectorized_elementwise_kernel<4, "
                           "at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, "
                           "at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
                           "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, "
                           "float, float const*, float const*, float const*, float*, float*, float*)"};
  long long ts = 1000, ext = 1, corr = 1, seq = 1;
  size_t written = 0;
  bool first = true;
  for (long long step = 0; written < target_bytes; ++step) {
    const long long step_start = ts;
    const long long ops_per_step = 2000;
    const long long step_dur = ops_per_step * 40 + 100;
    written += static_cast<size_t>(std::fprintf(
        f, "%s    {\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#%lld\", \"pid\": 4242, "
           "\"tid\": 4242, \"ts\": %lld.000, \"dur\": %lld.000, \"args\": {\"External id\": %lld, \"Record function id\": 0, "
           "\"Ev Idx\": 0}}",
        first ? "" : ",\n", step, step_start, step_dur, ext++));
    first = false;
    ts += 50;
    for (long long i = 0; i < ops_per_step && written < target_bytes; ++i) {
      const char* name = names[(i * 7 + step) % 10];
      const long long e = ext++, c = corr++;
      written += static_cast<size_t>(std::fprintf(
          f, ",\n    {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"%s\", \"pid\": 4242, \"tid\": 4242, \"ts\": %lld.%03lld, "
             "\"dur\": 30.%03lld, \"args\": {\"External id\": %lld, \"Record function id\": 0, \"Ev Idx\": %lld, "
             "\"Sequence number\": %lld, \"Fwd thread id\": 0, \"Input Dims\": [[64, 1024], [1024, 1024], []], "
             "\"Input type\": [\"float\", \"float\", \"Scalar\"], \"Input Strides\": [[1024, 1], [1024, 1], []]}}",
          name, ts, i % 1000, (i * 37) % 1000, e, e, seq++));
      written += static_cast<size_t>(std::fprintf(
          f, ",\n    {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::view\", \"pid\": 4242, \"tid\": 4242, "
             "\"ts\": %lld.500, \"dur\": 2.250, \"args\": {\"External id\": %lld, \"Record function id\": 0, \"Ev Idx\": %lld, "
             "\"Input Dims\": [[64, 1024], [2]], \"Input type\": [\"float\", \"ScalarList\"]}}",
          ts + 1, ext, ext));
      ++ext;
      written += static_cast<size_t>(std::fprintf(
          f, ",\n    {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 4242, \"tid\": 4242, "
             "\"ts\": %lld.000, \"dur\": 6.125, \"args\": {\"External id\": %lld, \"cbid\": 211, \"correlation\": %lld}}",
          ts + 20, e, c));
      written += static_cast<size_t>(std::fprintf(
          f, ",\n    {\"ph\": \"s\", \"id\": %lld, \"pid\": 4242, \"tid\": 4242, \"ts\": %lld.000, \"cat\": \"ac2g\", "
             "\"name\": \"ac2g\"}",
          c, ts + 20));
      written += static_cast<size_t>(std::fprintf(
          f, ",\n    {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"%s\", \"pid\": 0, \"tid\": 7, \"ts\": %lld.250, "
             "\"dur\": 25.500, \"args\": {\"External id\": %lld, \"queued\": 0, \"device\": 0, \"context\": 1, "
             "\"stream\": 7, \"correlation\": %lld, \"registers per thread\": 128, \"shared memory\": 49152, "
             "\"blocks per SM\": 1.969697, \"warps per SM\": 7.878788, \"grid\": [260, 1, 1], \"block\": [128, 1, 1], "
             "\"est. achieved occupancy %%\": 25}}",
          kernels[i % 3], ts + 28, e, c));
      written += static_cast<size_t>(std::fprintf(
          f, ",\n    {\"ph\": \"f\", \"id\": %lld, \"pid\": 0, \"tid\": 7, \"ts\": %lld.250, \"cat\": \"ac2g\", "
             "\"name\": \"ac2g\", \"bp\": \"e\"}",
          c, ts + 28));
      if (i % 50 == 0) {
        written += static_cast<size_t>(std::fprintf(
            f, ",\n    {\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\", \"pid\": 4242, "
               "\"tid\": 4242, \"ts\": %lld.000, \"args\": {\"Total Reserved\": 4194304000, \"Total Allocated\": %lld, "
               "\"Bytes\": 262144, \"Addr\": 140000000000, \"Device Id\": 0, \"Device Type\": 1}}",
            ts + 3, 1000000000 + (i % 1000) * 262144));
      }
      ts += 40;
    }
    ts = step_start + step_dur + 10;
  }
  std::fprintf(f, "\n  ],\n  \"traceName\": \"bench\"\n}\n");
  // On disk before it is timed, as a user's trace is: else the kernel writes the gigabyte back
  // while the import runs (it starts as soon as the dirty pages pass the background threshold)
  // and the figure measures that too.
  const bool synced = std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
  if (std::fclose(f) != 0 || !synced) return {};
  return path;
}

// Runs `fn` in a child; returns its wall seconds and peak RSS (bytes), or -1 on failure.
std::pair<double, long> inChild(const std::function<bool()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) _exit(fn() ? 0 : 1);
  int status = 0;
  struct rusage ru {};
  if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return {-1, -1};
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {secs, ru.ru_maxrss * 1024L};
}

void BM_ImportKineto(benchmark::State& state) {
  const char* mb = std::getenv("NPUSCOPE_IMPORT_BENCH_MB");
  const size_t target = static_cast<size_t>(mb ? std::atol(mb) : 1100) << 20;
  const std::string path = generate(target);
  if (path.empty()) {
    state.SkipWithError("cannot write the generated trace");
    return;
  }
  std::ifstream probe(path, std::ios::binary | std::ios::ate);
  const double file_bytes = static_cast<double>(probe.tellg());
  const std::string db = path + ".npuscope.db";
  double import_s = 0, read_s = 0;
  long rss = 0;
  for (auto _ : state) {
    // Baseline: read the whole file in 8 MB chunks (warms the page cache for both).
    auto [r_s, r_rss] = inChild([&] {
      std::FILE* f = std::fopen(path.c_str(), "rb");
      std::vector<char> b(size_t{8} << 20);
      size_t n, sum = 0;
      while ((n = std::fread(b.data(), 1, b.size(), f)) > 0) sum += static_cast<unsigned char>(b[n / 2]);
      std::fclose(f);
      return sum != 1;  // keep the read
    });
    std::remove(db.c_str());
    std::remove((db + "-wal").c_str());
    auto [i_s, i_rss] = inChild([&] { return npuscope::import::importPath(path, db).isOk(); });
    if (i_s < 0) {
      state.SkipWithError("import failed");
      break;
    }
    import_s = i_s, read_s = r_s, rss = i_rss;
  }
  state.counters["file_MB"] = file_bytes / (1 << 20);
  state.counters["import_MBps"] = file_bytes / (1 << 20) / import_s;
  state.counters["import_peak_rss_fraction_of_file"] = static_cast<double>(rss) / file_bytes;
  state.counters["ratio_import_vs_read"] = import_s / read_s;
  if (std::getenv("NPUSCOPE_IMPORT_BENCH_KEEP") == nullptr) std::remove(path.c_str());  // kept for profiling
  std::remove(db.c_str());
  std::remove((db + "-wal").c_str());
}
BENCHMARK(BM_ImportKineto)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

// The unpacked size of a gzip file, by reading it through zlib.
double unpackedBytes(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return 0;
  std::vector<char> b(size_t{1} << 20);
  double n = 0;
  for (int got; (got = gzread(f, b.data(), static_cast<unsigned>(b.size()))) > 0;) n += got;
  gzclose(f);
  return n;
}

void BM_ImportRealKineto(benchmark::State& state) {
  const std::string path = std::string(NPUSCOPE_BENCH_DATA) + "/hta_df_index_resolver.json.gz";
  const double bytes = unpackedBytes(path);
  if (bytes <= 0) {
    state.SkipWithError("cannot read benchmarks/data/hta_df_index_resolver.json.gz");
    return;
  }
  const char* tmp = std::getenv("TMPDIR");
  const std::string db = std::string(tmp ? tmp : "/tmp") + "/npuscope_bench_import_real.npuscope.db";
  std::vector<double> secs;
  for (auto _ : state) {
    std::remove(db.c_str());
    std::remove((db + "-wal").c_str());
    auto [s, rss] = inChild([&] { return npuscope::import::importPath(path, db).isOk(); });
    if (s < 0) {
      state.SkipWithError("import failed");
      break;
    }
    secs.push_back(s);
  }
  std::sort(secs.begin(), secs.end());
  if (!secs.empty()) state.counters["import_real_MBps"] = bytes / (1 << 20) / secs[secs.size() / 2];
  std::remove(db.c_str());
  std::remove((db + "-wal").c_str());
}
BENCHMARK(BM_ImportRealKineto)->Iterations(5)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
