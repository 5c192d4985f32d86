// A trace file's bytes (start: real recorded files, mutated) opened and read as npuscope report
// and the GUI read it (the predicted timeline and the cluster report too): every call returns data or an error; none
// crashes or hangs.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "npuscope/analysis/cluster.h"
#include "npuscope/analysis/predicted_timeline.h"
#include "npuscope/store/trace_reader.h"
#include "scratch.h"


extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = npuscope_fuzz::scratchPath("trace") + ".db";
  for (const char* suffix : {"-wal", "-shm"}) std::remove((path + suffix).c_str());
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  auto reader = npuscope::TraceReader::open(path);
  if (!reader.isOk()) return 0;
  auto runs = (*reader)->runs();
  if (!runs.isOk()) return 0;
  for (const auto& run : *runs) {
    (void)(*reader)->steps(run.id);
    (void)(*reader)->overflowEvents(run.id);
    (void)(*reader)->threads(run.id);
    (void)(*reader)->stepDeviceTimes(run.id);
    (void)(*reader)->memoryPeaks(run.id);
    (void)(*reader)->deviceTasks(run.id, {}, 100);
    (void)(*reader)->deviceTaskAggregates(run.id);
    npuscope::OpAggregateQuery q;
    q.run_id = run.id;
    (void)(*reader)->opAggregates(q);
    (void)(*reader)->collectives(run.id);
    (void)npuscope::predictRun(**reader, run.id, npuscope::hostModelParamsFor(run));  // every step's ops
    auto dumps = (*reader)->tensorDumps(run.id);
    if (dumps.isOk() && !dumps->empty()) (void)(*reader)->tensorDumpData(dumps->front().id);
  }
  reader->reset();
  (void)npuscope::cluster::analyze({path});  // the ranks' step breakdown, slow rank, collectives
  return 0;
}
