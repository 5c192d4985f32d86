#include "npuscope/import/acl_dump.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <tuple>

#include "acl_dump_import.h"
#include "files.h"
#include "json_text.h"
#include "text.h"
#include "npuscope/dumper/dump_file.h"
#include "npuscope/store/tensor_data.h"
#include "npuscope/store/trace_writer.h"

namespace npuscope::import {
namespace {

// At most 19 digits by default: every such number fits 64 bits (std::stoull throws beyond).
bool allDigits(const std::string& s, size_t max = 19) {
  return !s.empty() && s.size() <= max && s.find_first_not_of("0123456789") == std::string::npos;
}

std::vector<std::string> split(const std::string& s, char c) {
  std::vector<std::string> out(1);
  for (char ch : s) {
    if (ch == c) {
      out.emplace_back();
    } else {
      out.back() += ch;
    }
  }
  return out;
}

}  // namespace

bool parseAclDumpName(const std::string& file, const std::vector<std::string>& folders, AclDumpFile* out) {
  const std::vector<std::string> parts = split(baseName(file), '.');
  if (parts.size() < 5 || parts.front().empty()) return false;
  const size_t n = parts.size();
  for (size_t i = n - 3; i < n; ++i) {
    if (!allDigits(parts[i])) return false;
  }
  out->path = file;
  out->op_type = parts.front();
  out->task_id = std::stoull(parts[n - 3]);
  out->timestamp = std::stoull(parts[n - 1]);
  // The time folder (YYYYmmddHHMMSS), then the device; the real layout's step is the fourth
  // folder after the device ({model_name}/{model_id}/{step}).
  for (size_t i = 0; i < folders.size(); ++i) {
    if (folders[i].size() != 14 || !allDigits(folders[i])) continue;
    if (i + 1 < folders.size() && allDigits(folders[i + 1], 6)) out->device = std::stoll(folders[i + 1]);
    if (i + 4 < folders.size() && allDigits(folders[i + 4], 12)) out->step = std::stoll(folders[i + 4]);
  }
  return true;
}

namespace {

void walk(const std::string& dir, std::vector<std::string>& folders, int depth, std::vector<AclDumpFile>& out) {
  for (const std::string& name : listDir(dir)) {
    const std::string p = join(dir, name);
    AclDumpFile f;
    if (isFile(p)) {
      if (parseAclDumpName(p, folders, &f)) out.push_back(std::move(f));
    } else if (depth < 8 && isDir(p)) {
      folders.push_back(name);
      walk(p, folders, depth + 1, out);
      folders.pop_back();
    }
  }
}

}  // namespace

std::vector<AclDumpFile> aclDumpFiles(const std::string& path) {
  std::vector<AclDumpFile> out;
  std::vector<std::string> folders;
  if (isFile(path)) {
    AclDumpFile f;
    if (parseAclDumpName(path, folders, &f)) out.push_back(std::move(f));
  } else if (isDir(path)) {
    walk(path, folders, 0, out);
  }
  std::stable_sort(out.begin(), out.end(), [](const AclDumpFile& a, const AclDumpFile& b) {
    return std::tie(a.device, a.step, a.timestamp, a.task_id) < std::tie(b.device, b.step, b.timestamp, b.task_id);
  });
  return out;
}

StatusOr<Summary> importAclDump(const std::string& root, const std::vector<AclDumpFile>& files, const std::string& db,
                                const Options& options) {
  int64_t total = 0, done = 0;
  for (const AclDumpFile& f : files) total += fileSize(f.path);
  Summary summary;
  std::unique_ptr<TraceWriter> writer;
  std::map<int64_t, int64_t> devices;  // device -> files
  for (const AclDumpFile& f : files) ++devices[f.device];
  size_t at = 0;
  for (const auto& [device, count] : devices) {
    if (!writer) {
      ASSIGN_OR_RETURN(writer, openImportWriter(db));
    }
    RunInfo info;
    info.command = "import";
    info.source = "acl_dump";
    info.source_path = root;
    info.device = "npu:" + std::to_string(device);
    if (devices.size() > 1) {
      info.rank = device;
      info.world_size = static_cast<int64_t>(devices.size());
    }
    info.config_json = jsonText(nlohmann::json{{"source", {{"format", "acl_dump"}, {"files", count}}}});
    RunSummary run;
    run.source = "acl_dump";
    run.path = root;
    run.rank = info.rank;
    ASSIGN_OR_RETURN(run.run_id, writer->beginRun(info));
    // Without step folders, an op name's n-th file is its n-th dumped step (0, 1, ...).
    std::map<std::string, int64_t> seen;
    std::map<int64_t, bool> steps;
    const size_t end = at + static_cast<size_t>(count);
    for (; at < end; ++at) {
      const AclDumpFile& f = files[at];
      auto decoded = dumper::readDumpFile(f.path);
      if (!decoded.isOk()) {
        const Status failed = decoded.status();
        (void)writer->endRun("failed", jsonText(nlohmann::json{{"error", failed.message()}}));
        (void)writer->close();
        return failed;
      }
      const int64_t step = f.step >= 0 ? f.step : seen[decoded->op_name]++;
      steps[step] = true;
      std::vector<TensorDumpRecord> batch;
      for (auto* list : {&decoded->inputs, &decoded->outputs}) {
        const bool input = list == &decoded->inputs;
        for (size_t i = 0; i < list->size(); ++i) {
          dumper::DecodedTensor& t = (*list)[i];
          TensorDumpRecord r;
          r.step = step;
          r.op_name = decoded->op_name;
          r.op_type = f.op_type;
          r.io = input ? "input" : "output";
          r.idx = static_cast<int64_t>(i);
          r.dtype = tensor::dtypeName(t.dtype);
          r.shape = tensor::formatShape(t.shape);
          r.format = dumper::aclFormatName(t.format);
          const size_t size = tensor::dtypeSize(t.dtype);
          if (size > 0) {
            const tensor::TensorStats s = tensor::computeStats(t.data.data(), t.dtype, t.data.size() / size);
            r.has_stats = true;
            r.min = s.min, r.max = s.max, r.mean = s.mean, r.l2norm = s.l2norm;
            r.nan_count = s.nan_count, r.inf_count = s.inf_count;
          }
          r.data = std::move(t.data);
          batch.push_back(std::move(r));
          ++run.dump_tensors;
        }
      }
      ++run.dump_entries;
      writer->addTensorDumps(std::move(batch));
      done += fileSize(f.path);
      if (options.progress && !options.progress(done, total)) {
        (void)writer->endRun("failed", jsonText(nlohmann::json{{"error", "import cancelled"}}));
        (void)writer->close();
        return failedPrecondition(root + ": import cancelled");
      }
    }
    run.steps = static_cast<int64_t>(steps.size());
    RETURN_IF_ERROR(writer->endRun("completed", "", 0));
    summary.runs.push_back(std::move(run));
  }
  return finishImport(*writer, std::move(summary));
}

StatusOr<std::unique_ptr<TraceWriter>> openImportWriter(const std::string& db, const StringTable* strings) {
  TraceWriter::Options wo;
  wo.page_cache_kib = 8192;
  wo.strings = strings;
  wo.sync_new_file = false;  // a new file holds only what this import writes, and the source stays
  return TraceWriter::open(db, wo);
}

StatusOr<Summary> finishImport(TraceWriter& writer, Summary summary) {
  RETURN_IF_ERROR(writer.flush());
  tracePhase("flushed");
  const Status closed = writer.close();
  tracePhase("closed");
  if (!closed.isOk()) summary.warning = closed.message();
  return summary;
}

}  // namespace npuscope::import
