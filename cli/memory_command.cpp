// `npuscope memory FILE`: the device blocks live at one moment of a run (the peak, a step's peak,
// the end of an op), by category, with owners and allocating ops; and the memory section of
// `npuscope report` (printMemoryBreakdown, memoryJson).
#include <cstdio>
#include <optional>

#include "cli/commands.h"
#include "cli/report.h"
#include "npuscope/analysis/memory_breakdown.h"
#include "npuscope/store/format.h"
#include "npuscope/store/trace_reader.h"

namespace npuscope::cli {
namespace {

std::string bytesText(int64_t b) { return formatBytes(static_cast<uint64_t>(b < 0 ? 0 : b)); }

void printBlocks(const LiveSet& live, TraceReader& r, int64_t top, const char* indent) {
  const size_t show = top > 0 ? std::min<size_t>(live.blocks.size(), static_cast<size_t>(top)) : live.blocks.size();
  std::printf("%s%12s %12s  %-16s %6s  %s\n", indent, "size", "requested", "category", "step", "owner / allocating op");
  for (size_t i = 0; i < show; ++i) {
    const MemoryBlockRecord& b = live.blocks[i];
    std::printf("%s%12s %12s  %-16s %6s  %s\n", indent, bytesText(b.size).c_str(), bytesText(b.requested).c_str(),
                memoryCategoryName(b.category), b.step >= 0 ? std::to_string(b.step).c_str() : "-",
                blockOwnerText(b, r).c_str());
  }
  if (live.blocks.size() > show) std::printf("%s... %zu more blocks\n", indent, live.blocks.size() - show);
}

void printCategories(const LiveSet& live, const char* indent) {
  for (int c = 0; c < kMemoryCategoryCount; ++c) {
    if (live.bytes[c] == 0) continue;
    std::printf("%s%-16s %12s  %5.1f%%\n", indent, memoryCategoryName(c), bytesText(live.bytes[c]).c_str(),
                live.allocated > 0 ? 100.0 * static_cast<double>(live.bytes[c]) / static_cast<double>(live.allocated) : 0.0);
  }
}

nlohmann::json liveJson(const LiveSet& live, TraceReader& r, int64_t top) {
  nlohmann::json j;
  j["allocated"] = live.allocated;
  j["blocks"] = live.blocks.size();
  j["by_category"] = nlohmann::json::object();
  for (int c = 0; c < kMemoryCategoryCount; ++c) {
    if (live.bytes[c] > 0) j["by_category"][memoryCategoryName(c)] = live.bytes[c];
  }
  j["largest"] = nlohmann::json::array();
  const size_t show = top > 0 ? std::min<size_t>(live.blocks.size(), static_cast<size_t>(top)) : live.blocks.size();
  for (size_t i = 0; i < show; ++i) {
    const MemoryBlockRecord& b = live.blocks[i];
    j["largest"].push_back({{"size", b.size},
                            {"requested", b.requested},
                            {"category", memoryCategoryName(b.category)},
                            {"owner", blockOwnerText(b, r)},
                            {"op_id", b.op_id >= 0 ? nlohmann::json(b.op_id) : nlohmann::json()},
                            {"step", b.step >= 0 ? nlohmann::json(b.step) : nlohmann::json()}});
  }
  return j;
}

struct MemoryArgs {
  std::string file;
  int64_t run = -1;
  std::optional<int64_t> step;
  std::optional<int64_t> at_op;
  int device = -1;
  bool csv = false;
  int64_t top = 20;
};

Status runMemory(const MemoryArgs& a) {
  ASSIGN_OR_RETURN(auto reader, TraceReader::open(a.file));
  TraceReader& r = *reader;
  RETURN_IF_ERROR(r.beginSnapshot());
  ASSIGN_OR_RETURN(RunRow run, pickRun(r, a.run));
  std::vector<LiveSet> sets;
  std::vector<DeviceComponents> components;  // imported npu_module_mem, shown after the blocks
  std::string when;
  if (a.at_op) {
    auto op = r.opById(*a.at_op);
    if (!op.isOk()) return invalidArgument("--at-op: " + a.file + " has no op " + std::to_string(*a.at_op));
    ASSIGN_OR_RETURN(std::vector<MemoryBlockRecord> blocks, r.memoryBlocks(run.id, a.device));
    if (blocks.empty()) return notFound(a.file + ": run " + std::to_string(run.id) + " has no memory blocks (record with memory on)");
    const int64_t end = op->start_ns + op->dur_ns;
    std::vector<int> devices;
    for (const auto& b : blocks) {
      if (devices.empty() || devices.back() != b.device) devices.push_back(b.device);
    }
    for (int d : devices) sets.push_back(liveAtTime(blocks, d, end));
    when = "at the end of op " + std::string(op->name) + " #" + std::to_string(op->id) + " (step " +
           std::to_string(op->step) + ")";
  } else {
    ASSIGN_OR_RETURN(std::vector<DeviceMemory> mem, memoryByDevice(r, run.id, a.step));
    ASSIGN_OR_RETURN(std::vector<MemoryComponentRecord> rows, r.memoryComponents(run.id));
    components = componentPeaks(rows);
    if (mem.empty() && !components.empty() && !a.step && !a.csv) {
      std::printf("%s, run %lld: no memory blocks; device memory by component (npu_module_mem):\n", a.file.c_str(),
                  static_cast<long long>(run.id));
      for (const DeviceComponents& d : components) {
        if (a.device < 0 || d.device == a.device) printComponentPeaks(d, "  ");
      }
      return Status::ok();
    }
    if (mem.empty()) {
      if (a.step) return notFound(a.file + ": run " + std::to_string(run.id) + " has no memory blocks in step " + std::to_string(*a.step));
      return notFound(a.file + ": run " + std::to_string(run.id) + " has no memory blocks (record with memory on)");
    }
    for (const DeviceMemory& d : mem) {
      if (a.device >= 0 && d.device != a.device) continue;
      sets.push_back(d.at_peak);
      if (when.empty()) {
        when = a.step ? "at the peak of step " + std::to_string(*a.step) : "at the run's peak";
        if (!d.peak_op.empty()) when += " (" + d.peak_op + ")";
      }
    }
  }
  if (a.csv) {
    std::printf("device,size,requested,category,owner,op_id,step,alloc_ns,address\n");
    for (const LiveSet& s : sets) {
      for (const MemoryBlockRecord& b : s.blocks) {
        std::string owner = b.owner;
        for (char& c : owner) {
          if (c == ',' || c == '"' || c == '\n') c = ' ';
        }
        std::printf("npu:%d,%lld,%lld,%s,%s,%s,%s,%lld,0x%llx\n", b.device, static_cast<long long>(b.size),
                    static_cast<long long>(b.requested), memoryCategoryName(b.category), owner.c_str(),
                    b.op_id >= 0 ? std::to_string(b.op_id).c_str() : "", b.step >= 0 ? std::to_string(b.step).c_str() : "",
                    static_cast<long long>(b.alloc_ns), static_cast<unsigned long long>(b.address));
      }
    }
    return Status::ok();
  }
  std::printf("%s, run %lld: live device memory %s\n", a.file.c_str(), static_cast<long long>(run.id), when.c_str());
  for (const LiveSet& s : sets) {
    std::printf("\nnpu:%d  %s in %zu blocks\n", s.device, bytesText(s.allocated).c_str(), s.blocks.size());
    printCategories(s, "  ");
    std::printf("\n");
    printBlocks(s, r, a.top, "  ");
  }
  if (!components.empty() && !a.step) std::printf("\nDevice memory by component (npu_module_mem):\n");
  for (const DeviceComponents& d : components) {
    if (!a.step && (a.device < 0 || d.device == a.device)) printComponentPeaks(d, "  ");
  }
  return Status::ok();
}

}  // namespace

void printMemoryBreakdown(const DeviceMemory& d, TraceReader& r, int64_t top) {
  std::printf("  npu:%d at its peak: %s in %zu blocks", d.device, bytesText(d.peak_allocated).c_str(), d.at_peak.blocks.size());
  if (d.peak_step >= 0 && d.peak_in_step) std::printf(", step %lld", static_cast<long long>(d.peak_step));
  if (d.peak_step >= 0 && !d.peak_in_step) std::printf(", after the recorded steps");
  if (!d.peak_op.empty()) std::printf(", while %s allocated", d.peak_op.c_str());
  std::printf("\n");
  if (d.pool_peak_allocated > d.peak_allocated) {
    std::printf("    (the blocks listed; the allocator's own peak was %s allocated: what was allocated before profiling is not listed)\n",
                bytesText(d.pool_peak_allocated).c_str());
  }
  printCategories(d.at_peak, "    ");
  std::printf("    largest live tensors:\n");
  printBlocks(d.at_peak, r, top, "    ");
  if (d.reserved_at_peak >= 0) {
    std::printf("    fragmentation: %s reserved but free at the peak (reserved %s)", bytesText(d.reserved_at_peak - d.peak_allocated).c_str(),
                bytesText(d.reserved_at_peak).c_str());
    if (d.largest_cached >= 0) std::printf(", largest free cached block %s", bytesText(d.largest_cached).c_str());
    std::printf("\n");
  }
  for (const DeviceMemory::Oom& o : d.ooms) {
    std::printf("  npu:%d out of memory at step %lld%s%s: %s\n", d.device, static_cast<long long>(o.record.step),
                o.op.empty() ? "" : " in ", o.op.c_str(), o.record.message.c_str());
    std::printf("    live then: %s in %zu blocks: %s\n", bytesText(o.live.allocated).c_str(), o.live.blocks.size(),
                categorySummary(o.live).c_str());
    printBlocks(o.live, r, 5, "    ");
  }
}

nlohmann::json memoryJson(const DeviceMemory& d, TraceReader& r, int64_t top) {
  nlohmann::json j;
  j["device"] = "npu:" + std::to_string(d.device);
  j["peak_allocated"] = d.peak_allocated;
  j["peak_reserved"] = d.peak_reserved;
  if (d.pool_peak_allocated > 0) j["pool_peak_allocated"] = d.pool_peak_allocated;
  if (d.reserved_at_peak >= 0) j["reserved_at_peak"] = d.reserved_at_peak;
  if (d.largest_cached >= 0) j["largest_cached_block"] = d.largest_cached;
  j["capacity"] = d.capacity;
  j["peak_step"] = d.peak_step >= 0 && d.peak_in_step ? nlohmann::json(d.peak_step) : nlohmann::json();
  j["peak_op"] = d.peak_op;
  j["at_peak"] = liveJson(d.at_peak, r, top);
  j["out_of_memory"] = nlohmann::json::array();
  for (const DeviceMemory::Oom& o : d.ooms) {
    nlohmann::json oj = liveJson(o.live, r, 5);
    oj["step"] = o.record.step;
    oj["op"] = o.op;
    oj["requested"] = o.record.requested;
    oj["message"] = o.record.message;
    j["out_of_memory"].push_back(oj);
  }
  return j;
}

void printComponentPeaks(const DeviceComponents& d, const char* indent) {
  std::printf("%snpu:%d  %s reserved by the device software at its highest\n", indent, d.device, bytesText(d.total_peak).c_str());
  std::printf("%s  %-12s %12s %12s\n", indent, "component", "then", "own peak");
  for (const ComponentPeak& c : d.components) {
    std::printf("%s  %-12s %12s %12s\n", indent, c.component.c_str(), bytesText(c.at_total_peak).c_str(),
                bytesText(c.peak).c_str());
  }
}

nlohmann::json componentsJson(const DeviceComponents& d) {
  nlohmann::json j;
  j["device"] = "npu:" + std::to_string(d.device);
  j["total_peak"] = d.total_peak;
  j["total_peak_ns"] = d.total_peak_ns;
  j["components"] = nlohmann::json::array();
  for (const ComponentPeak& c : d.components) {
    j["components"].push_back(
        {{"component", c.component}, {"at_total_peak", c.at_total_peak}, {"peak", c.peak}, {"peak_ns", c.peak_ns}});
  }
  return j;
}

void addMemoryCommand(Commands& cli) {
  auto args = std::make_shared<MemoryArgs>();
  auto* cmd = cli.app().add_subcommand(
      "memory", "The device memory live at a moment of a run (default: its peak), by category and owner");
  cmd->add_option("FILE", args->file, "Trace file")->required();
  cmd->add_option("--run", args->run, "Run id (default: the latest)");
  cmd->add_option("--step", args->step, "The peak of this step instead of the run's");
  cmd->add_option("--at-op", args->at_op, "At the end of this op (an op id, as report and the GUI show them)");
  cmd->add_option("--device", args->device, "Only this npu index");
  cmd->add_flag("--csv", args->csv, "Every live block as CSV");
  cmd->add_option("--top", args->top, "Blocks listed (0: all)")->capture_default_str();
  cli.onParsed(cmd, [args] {
    if (args->step && args->at_op) return fail("--step and --at-op: give one of them");
    const Status s = runMemory(*args);
    return s.isOk() ? 0 : fail(s);
  });
}

}  // namespace npuscope::cli
