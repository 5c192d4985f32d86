#include "npuscope/analysis/memory_breakdown.h"

#include <algorithm>
#include <climits>
#include <cstdio>

#include "npuscope/store/format.h"

namespace npuscope {
namespace {

template <typename Live>
LiveSet collect(const std::vector<MemoryBlockRecord>& blocks, int device, Live live) {
  LiveSet out;
  out.device = device;
  for (const MemoryBlockRecord& b : blocks) {
    if (b.device != device || !live(b)) continue;
    out.allocated += b.size;
    out.bytes[b.category < kMemoryCategoryCount ? b.category : 0] += b.size;
    out.blocks.push_back(b);
  }
  std::stable_sort(out.blocks.begin(), out.blocks.end(),
                   [](const MemoryBlockRecord& a, const MemoryBlockRecord& b) { return a.size > b.size; });
  return out;
}

std::string opText(TraceReader& reader, int64_t op_id) {
  if (op_id < 0) return "";
  auto op = reader.opById(op_id);
  if (!op.isOk()) return "";
  return std::string(op->name) + " #" + std::to_string(op_id);
}

}  // namespace

LiveSet liveAtSeq(const std::vector<MemoryBlockRecord>& blocks, int device, int64_t seq) {
  LiveSet s = collect(blocks, device, [seq](const MemoryBlockRecord& b) {
    return b.alloc_seq <= seq && (b.free_seq < 0 || b.free_seq > seq);
  });
  s.seq = seq;
  return s;
}

LiveSet liveAtTime(const std::vector<MemoryBlockRecord>& blocks, int device, int64_t ts_ns) {
  LiveSet s = collect(blocks, device, [ts_ns](const MemoryBlockRecord& b) {
    return b.alloc_ns <= ts_ns && (b.free_seq < 0 || b.free_ns > ts_ns);
  });
  s.ts_ns = ts_ns;
  return s;
}

SeqPeak sweepPeak(const std::vector<MemoryBlockRecord>& blocks, int device, int64_t from_ns, int64_t to_ns) {
  struct Event {
    int64_t seq, ts, delta;
  };
  std::vector<Event> events;
  for (const MemoryBlockRecord& b : blocks) {
    if (b.device != device) continue;
    events.push_back({b.alloc_seq, b.alloc_ns, b.size});
    if (b.free_seq >= 0) events.push_back({b.free_seq, b.free_ns, -b.size});
  }
  // Blocks older than the recording share its first event number: their allocations first.
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return a.seq != b.seq ? a.seq < b.seq : a.delta > b.delta;
  });
  SeqPeak peak;
  int64_t total = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    total += events[i].delta;
    if (i + 1 < events.size() && events[i + 1].seq == events[i].seq) continue;  // settle the event first
    if (events[i].ts < from_ns || events[i].ts > to_ns) continue;
    if (peak.seq < 0 || total > peak.allocated) peak = {events[i].seq, events[i].ts, total};
  }
  return peak;
}

std::string blockOwnerText(const MemoryBlockRecord& block, TraceReader& reader) {
  if (!block.owner.empty()) return block.owner;
  std::string op = opText(reader, block.op_id);
  return op.empty() ? "-" : op;
}

std::string categorySummary(const LiveSet& live, int top) {
  int order[kMemoryCategoryCount];
  for (int i = 0; i < kMemoryCategoryCount; ++i) order[i] = i;
  std::stable_sort(order, order + kMemoryCategoryCount, [&](int a, int b) { return live.bytes[a] > live.bytes[b]; });
  std::string out;
  for (int k = 0; k < top && k < kMemoryCategoryCount && live.bytes[order[k]] > 0; ++k) {
    char share[32];
    std::snprintf(share, sizeof(share), " (%.0f%%)",
                  live.allocated > 0 ? 100.0 * static_cast<double>(live.bytes[order[k]]) / static_cast<double>(live.allocated) : 0.0);
    if (!out.empty()) out += ", ";
    out += std::string(memoryCategoryName(order[k])) + " " + formatBytes(static_cast<uint64_t>(live.bytes[order[k]])) + share;
  }
  return out;
}

StatusOr<std::vector<DeviceMemory>> memoryByDevice(TraceReader& reader, int64_t run_id, std::optional<int64_t> step) {
  ASSIGN_OR_RETURN(std::vector<MemoryBlockRecord> blocks, reader.memoryBlocks(run_id));
  std::vector<DeviceMemory> out;
  if (blocks.empty()) return out;
  ASSIGN_OR_RETURN(std::vector<MemoryDeviceRecord> devices, reader.memoryDevices(run_id));
  ASSIGN_OR_RETURN(std::vector<MemoryOomRecord> ooms, reader.memoryOoms(run_id));
  ASSIGN_OR_RETURN(std::vector<MemoryPeak> samples, reader.memoryPeaks(run_id));
  ASSIGN_OR_RETURN(std::vector<StepRow> steps, reader.steps(run_id));
  std::vector<int> ids;
  for (const MemoryBlockRecord& b : blocks) {
    if (ids.empty() || ids.back() != b.device) ids.push_back(b.device);  // blocks come by device
  }
  for (int device : ids) {
    DeviceMemory d;
    d.device = device;
    const MemoryDeviceRecord* rec = nullptr;
    for (const auto& r : devices) {
      if (r.device == device) rec = &r;
    }
    for (const auto& p : samples) {
      if (p.device == device) d.peak_reserved = p.reserved;
    }
    if (rec) d.capacity = rec->capacity;
    if (!step && rec && rec->peak_seq >= 0) {
      d.at_peak = liveAtSeq(blocks, device, rec->peak_seq);
      d.at_peak.ts_ns = rec->peak_ns;
      d.reserved_at_peak = rec->peak_reserved;
      d.largest_cached = rec->largest_cached;
      d.peak_step = rec->peak_step;
      d.peak_op_id = rec->peak_op_id;
    } else {
      int64_t from = INT64_MIN, to = INT64_MAX;
      if (step) {
        from = to = -1;
        for (const StepRow& s : steps) {
          if (s.step == *step) from = s.start_ns, to = s.start_ns + s.dur_ns;
        }
        if (from < 0) continue;
      }
      const SeqPeak p = sweepPeak(blocks, device, from, to);
      if (p.seq < 0) continue;
      d.at_peak = liveAtSeq(blocks, device, p.seq);
      d.at_peak.ts_ns = p.ts_ns;
      // The op and step of the block allocated at the peak event, if it was an allocation.
      for (const MemoryBlockRecord& b : blocks) {
        if (b.device == device && b.alloc_seq == p.seq) d.peak_op_id = b.op_id, d.peak_step = b.step;
      }
      if (step) d.peak_step = *step;
    }
    d.peak_allocated = d.at_peak.allocated;
    d.peak_op = opText(reader, d.peak_op_id);
    for (const StepRow& s : steps) {
      d.step_start_allocated.emplace_back(s.step, liveAtTime(blocks, device, s.start_ns).allocated);
    }
    for (const MemoryOomRecord& o : ooms) {
      if (o.device != device) continue;
      DeviceMemory::Oom oom;
      oom.record = o;
      oom.op = opText(reader, o.op_id);
      oom.live = liveAtSeq(blocks, device, o.seq);
      oom.live.ts_ns = o.ts_ns;
      d.ooms.push_back(std::move(oom));
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace npuscope
