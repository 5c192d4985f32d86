#include "npuscope/analysis/memory_breakdown.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <map>

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

// Replays the allocations and frees of `device` in event order, calling visit(seq, ts,
// allocated after it) once per event number; change(category, delta) sees every block's part.
template <typename Visit, typename Change>
void replay(const std::vector<MemoryBlockRecord>& blocks, int device, Visit visit, Change change) {
  struct Event {
    int64_t seq, ts, delta;
    uint8_t category;
  };
  std::vector<Event> events;
  for (const MemoryBlockRecord& b : blocks) {
    if (b.device != device) continue;
    events.push_back({b.alloc_seq, b.alloc_ns, b.size, b.category});
    if (b.free_seq >= 0) events.push_back({b.free_seq, b.free_ns, -b.size, b.category});
  }
  // Blocks older than the recording share its first event number: their allocations first.
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return a.seq != b.seq ? a.seq < b.seq : a.delta > b.delta;
  });
  int64_t total = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    total += events[i].delta;
    change(events[i].category, events[i].delta);
    if (i + 1 < events.size() && events[i + 1].seq == events[i].seq) continue;  // settle the event first
    visit(events[i].seq, events[i].ts, total);
  }
}

template <typename Visit>
void replay(const std::vector<MemoryBlockRecord>& blocks, int device, Visit visit) {
  replay(blocks, device, visit, [](uint8_t, int64_t) {});
}

SeqPeak sweepPeak(const std::vector<MemoryBlockRecord>& blocks, int device, int64_t from_ns, int64_t to_ns) {
  SeqPeak peak;
  replay(blocks, device, [&](int64_t seq, int64_t ts, int64_t total) {
    if (ts < from_ns || ts > to_ns) return;
    if (peak.seq < 0 || total > peak.allocated) peak = {seq, ts, total};
  });
  return peak;
}

std::vector<StepPeak> stepPeaks(const std::vector<MemoryBlockRecord>& blocks, int device, const std::vector<StepRow>& steps) {
  std::vector<size_t> order(steps.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return steps[a].start_ns < steps[b].start_ns; });
  std::vector<SeqPeak> peaks(steps.size());
  replay(blocks, device, [&](int64_t seq, int64_t ts, int64_t total) {
    // The step whose window holds ts: the last one starting at or before it.
    auto it = std::upper_bound(order.begin(), order.end(), ts,
                               [&](int64_t t, size_t k) { return t < steps[k].start_ns; });
    if (it == order.begin()) return;
    const size_t k = *(it - 1);
    if (ts > steps[k].start_ns + steps[k].dur_ns) return;
    if (peaks[k].seq < 0 || total > peaks[k].allocated) peaks[k] = {seq, ts, total};
  });
  std::vector<StepPeak> out;
  for (size_t k = 0; k < steps.size(); ++k) {
    if (peaks[k].seq < 0) continue;
    StepPeak p;
    p.step = steps[k].step;
    p.seq = peaks[k].seq;
    const LiveSet live = liveAtSeq(blocks, device, p.seq);
    p.allocated = live.allocated;
    std::copy(std::begin(live.bytes), std::end(live.bytes), std::begin(p.bytes));
    out.push_back(p);
  }
  return out;
}

std::vector<CategorySample> categorySeries(const std::vector<MemoryBlockRecord>& blocks, int device, size_t max_points) {
  int64_t first = INT64_MAX, last = INT64_MIN;
  for (const MemoryBlockRecord& b : blocks) {
    if (b.device != device) continue;
    first = std::min(first, b.alloc_ns);
    last = std::max(last, b.free_seq >= 0 ? b.free_ns : b.alloc_ns);
  }
  std::vector<CategorySample> out;
  if (first > last) return out;
  const double bucket = max_points > 0 ? std::max(1.0, static_cast<double>(last - first + 1) / static_cast<double>(max_points)) : 0;
  int64_t current_bucket = -1;
  CategorySample now;
  replay(
      blocks, device,
      [&](int64_t, int64_t ts, int64_t total) {
        now.ts_ns = ts;
        now.allocated = total;
        const int64_t k = bucket > 0 ? static_cast<int64_t>(static_cast<double>(ts - first) / bucket) : -2;
        if (k >= 0 && k == current_bucket && !out.empty()) {
          if (total > out.back().allocated) out.back() = now;
          return;
        }
        current_bucket = k;
        out.push_back(now);
      },
      [&](uint8_t category, int64_t delta) { now.bytes[category < kMemoryCategoryCount ? category : 0] += delta; });
  return out;
}

std::vector<int64_t> allocatedAtTimes(const std::vector<MemoryBlockRecord>& blocks, int device,
                                      const std::vector<int64_t>& times) {
  // (time, bytes) of every allocation and free, each sorted by time, with running sums.
  std::vector<std::pair<int64_t, int64_t>> allocs, frees;
  for (const MemoryBlockRecord& b : blocks) {
    if (b.device != device) continue;
    allocs.emplace_back(b.alloc_ns, b.size);
    if (b.free_seq >= 0) frees.emplace_back(b.free_ns, b.size);
  }
  auto prefix = [](std::vector<std::pair<int64_t, int64_t>>& v) {
    std::sort(v.begin(), v.end());
    for (size_t i = 1; i < v.size(); ++i) v[i].second += v[i - 1].second;
  };
  prefix(allocs);
  prefix(frees);
  // The running sum of the entries at or before t.
  auto upTo = [](const std::vector<std::pair<int64_t, int64_t>>& v, int64_t t) -> int64_t {
    auto it = std::upper_bound(v.begin(), v.end(), t, [](int64_t x, const std::pair<int64_t, int64_t>& e) { return x < e.first; });
    return it == v.begin() ? 0 : (it - 1)->second;
  };
  std::vector<int64_t> out;
  out.reserve(times.size());
  for (int64_t t : times) out.push_back(upTo(allocs, t) - upTo(frees, t));
  return out;
}

std::vector<DeviceComponents> componentPeaks(const std::vector<MemoryComponentRecord>& rows) {
  std::map<int32_t, std::vector<const MemoryComponentRecord*>> by_device;
  for (const MemoryComponentRecord& r : rows) by_device[r.device].push_back(&r);
  std::vector<DeviceComponents> out;
  for (auto& [device, list] : by_device) {
    std::stable_sort(list.begin(), list.end(),
                     [](const MemoryComponentRecord* a, const MemoryComponentRecord* b) { return a->ts_ns < b->ts_ns; });
    DeviceComponents d;
    d.device = device;
    std::map<std::string, ComponentPeak> peaks;
    std::map<std::string, int64_t> now;  // each component's latest reservation
    int64_t total = 0;
    bool any = false;
    for (size_t i = 0; i < list.size(); ++i) {
      const MemoryComponentRecord& r = *list[i];
      int64_t& current = now[r.component];
      total += r.reserved - current;
      current = r.reserved;
      ComponentPeak& p = peaks[r.component];
      p.component = r.component;
      if (r.reserved > p.peak) p.peak = r.reserved, p.peak_ns = r.ts_ns;
      if (i + 1 < list.size() && list[i + 1]->ts_ns == r.ts_ns) continue;  // the moment's other samples first
      if (!any || total > d.total_peak) {
        any = true;
        d.total_peak = total;
        d.total_peak_ns = r.ts_ns;
        for (auto& [name, bytes] : now) peaks[name].at_total_peak = bytes;
      }
    }
    for (auto& [name, p] : peaks) d.components.push_back(p);
    std::stable_sort(d.components.begin(), d.components.end(),
                     [](const ComponentPeak& a, const ComponentPeak& b) { return a.peak > b.peak; });
    out.push_back(std::move(d));
  }
  return out;
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
  return memoryByDevice(reader, run_id, blocks, step);
}

StatusOr<std::vector<DeviceMemory>> memoryByDevice(TraceReader& reader, int64_t run_id,
                                                   const std::vector<MemoryBlockRecord>& blocks, std::optional<int64_t> step) {
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
      if (p.device == device && !rec) d.pool_peak_allocated = p.allocated;
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
    for (const StepRow& s : steps) d.peak_in_step = d.peak_in_step || s.step == d.peak_step;
    d.peak_allocated = d.at_peak.allocated;
    d.peak_op = opText(reader, d.peak_op_id);
    std::vector<int64_t> starts;
    for (const StepRow& s : steps) starts.push_back(s.start_ns);
    const std::vector<int64_t> at_start = allocatedAtTimes(blocks, device, starts);
    for (size_t k = 0; k < steps.size(); ++k) d.step_start_allocated.emplace_back(steps[k].step, at_start[k]);
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
