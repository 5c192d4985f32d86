#include "op_recorder.h"

#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "npuscope/store/clock.h"
#include "npuscope/store/collective_sink.h"
#include "npuscope/store/string_table.h"
#include "npuscope/store/trace_writer.h"
#include "npuscope/device/npu.h"

namespace npuscope::profiler::recorder {
namespace {

// An op in progress. Inputs are only valid during the start callback (the dispatcher boxes
// them for it and destroys them right after), so everything derived from them is taken there.
struct Frame {
  int64_t id;
  int64_t start_ns;
  int64_t modeled_ns;  // modeled device duration, -1: not a device op
  const char* name;    // valid while the op runs
  uint32_t name_id;    // the name interned (looked up once, at the start)
  uint32_t shapes_id;
  uint32_t dtypes_id;
  int32_t children;
  // Children that run on an npu themselves. Ops the CPU kernel calls inside the fallback (on CPU
  // aliases: mkldnn_convolution, empty, ...) are host work of this op, so an op whose children
  // are all such is still the device task.
  int32_t npu_children;
  int8_t device;
  bool backward;
  bool host_sync;  // a real host would wait for the device here (a blocking host<->device copy)
  // The op re-dispatched itself under the same name (a structured op's functional form calling
  // its out= form on npu): folded into the outer op, its children become the outer op's.
  bool merged;
};

struct ShapeIds {
  uint32_t shapes;
  uint32_t dtypes;
};

struct ThreadState;

// Session-wide state. g_writer is non-null while a session records.
std::atomic<TraceWriter*> g_writer{nullptr};
std::atomic<bool> g_keep{false};
std::atomic<bool> g_shapes{true};
std::atomic<bool> g_memory{true};
std::atomic<int64_t> g_step{0};
std::atomic<int64_t> g_next_id{1};
std::atomic<uint64_t> g_recorded{0};  // ops recorded by threads that have ended, ever
uint64_t g_recorded_base = 0;  // all ops recorded before this session began (under g_registry_mu)
at::CallbackHandle g_handle = 0;
std::mutex g_registry_mu;
std::unordered_set<ThreadState*>& registry() {
  static auto* r = new std::unordered_set<ThreadState*>();
  return *r;
}

// The training phase, for the categories of untagged blocks: g_epoch counts changes between
// forward work and backward work (ops of the autograd engine); g_after_backward tells whether
// the current step ran backward work already (what follows it is the optimizer's).
std::atomic<bool> g_phase_backward{false};
std::atomic<int64_t> g_epoch{0};
std::atomic<bool> g_after_backward{false};
std::atomic<bool> g_baseline{false};  // removeCallbacksForBaseline(): nothing recorded at all

struct ThreadState {
  std::unique_ptr<OpBuffer> buf;
  std::vector<MemoryRecord> memory;
  std::vector<MemoryBlockRecord> blocks;
  std::vector<Frame> stack;
  std::unordered_map<const char*, uint32_t> names;  // schema names: stable pointers
  // The names most recently found there, by pointer: one compare instead of a hash lookup.
  struct NameSlot {
    const char* name = nullptr;
    uint32_t id = 0;
  };
  std::array<NameSlot, 256> recent_names{};
  std::unordered_map<uint64_t, std::pair<std::string, uint32_t>> dynamic_names;  // by content hash
  std::unordered_map<uint64_t, ShapeIds> shapes;
  std::unordered_map<uint64_t, int64_t> cost;  // (name, shapes) -> modeled device ns
  int32_t depth = 0;  // frames on the stack that are recorded (merged frames do not count)
  // Watches (watchBegin): the stack size each waits at and the first op id started there (-1:
  // none yet); `waiting` counts those still without one, so onStart tests one integer.
  std::vector<std::pair<size_t, int64_t>> watches;
  int32_t waiting = 0;
  // Ops this thread recorded, ever; written by the thread only (recordedOps() sums).
  std::atomic<uint64_t> recorded{0};
  // Who may touch buf/memory: 0 nobody, 1 the owning thread (appending), 2 a flusher (step
  // boundary or stop). Uncontended, a claim is one compare-exchange.
  std::atomic<int> claim{0};
  // Non-zero while an npu op's CPU kernel runs on this thread: the ops it dispatches are the
  // emulator's, not recorded (npu::emulator_work_counter).
  const int* emulator_work = npu::emulator_work_counter();

  ThreadState() {
    stack.reserve(64);
    std::lock_guard<std::mutex> lock(g_registry_mu);
    registry().insert(this);
  }
  ~ThreadState();
};

ThreadState& threadState() {
  thread_local ThreadState state;
  return state;
}

// Every op recorded by any thread, ever (caller holds g_registry_mu).
uint64_t allRecordedLocked() {
  uint64_t n = g_recorded.load(std::memory_order_relaxed);
  for (const ThreadState* ts : registry()) n += ts->recorded.load(std::memory_order_relaxed);
  return n;
}

// Holds a thread state's buffers for `who` (1: owner, 2: flusher) while alive.
struct Claim {
  Claim(ThreadState& s, int who) : s_(s) {
    int expected = 0;
    while (!s_.claim.compare_exchange_weak(expected, who, std::memory_order_acquire)) expected = 0;
  }
  ~Claim() { s_.claim.store(0, std::memory_order_release); }
  ThreadState& s_;
};

// Hands a thread's partial buffers to the writer (caller holds the claim).
void flushLocked(ThreadState& ts, TraceWriter* w) {
  if (ts.buf && ts.buf->size > 0) w->submit(ts.buf);
  if (!ts.memory.empty()) {
    w->addMemory(std::move(ts.memory));
    ts.memory.clear();
  }
  if (!ts.blocks.empty()) {
    w->addMemoryBlocks(std::move(ts.blocks));
    ts.blocks.clear();
  }
}

ThreadState::~ThreadState() {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  registry().erase(this);
  g_recorded.fetch_add(recorded.load(std::memory_order_relaxed), std::memory_order_relaxed);
  if (TraceWriter* w = g_writer.load()) flushLocked(*this, w);  // a thread ending mid-session
}

inline uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

const char* dtypeName(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat: return "float";
    case c10::kHalf: return "c10::Half";
    case c10::kBFloat16: return "c10::BFloat16";
    case c10::kDouble: return "double";
    case c10::kLong: return "long int";
    case c10::kInt: return "int";
    case c10::kBool: return "bool";
    case c10::kByte: return "unsigned char";
    default: return c10::toString(t);
  }
}

// `aten::_copy_from(src, dst, non_blocking)` between host and npu memory without non_blocking:
// torch_npu synchronises the stream for it, so a real host waits for the device there (the
// predicted timeline's sync points; names like aten::_local_scalar_dense are judged in core).
// `name_id`: the op's interned name (compared as an id: this runs for every npu op).
bool isBlockingHostDeviceCopy(uint32_t name_id, c10::ArrayRef<const c10::IValue> inputs) {
  static const uint32_t copy_from = StringTable::global().intern("aten::_copy_from");
  static const uint32_t copy_from_and_resize = StringTable::global().intern("aten::_copy_from_and_resize");
  if (name_id != copy_from && name_id != copy_from_and_resize) return false;
  if (inputs.size() < 2 || !inputs[0].isTensor() || !inputs[1].isTensor()) return false;
  const bool src_npu = inputs[0].toTensor().device().type() == npu::kDeviceType;
  const bool dst_npu = inputs[1].toTensor().device().type() == npu::kDeviceType;
  const bool non_blocking = inputs.size() > 2 && inputs[2].isBool() && inputs[2].toBool();
  return src_npu != dst_npu && !non_blocking;
}

// A hash of the inputs' dtypes and sizes (the key of the shape and cost caches), and the npu the
// first npu tensor among them is on (-1: none).
uint64_t inputsHash(c10::ArrayRef<const c10::IValue> inputs, int* device_out) {
  uint64_t h = inputs.size();
  int device = -1;
  for (const auto& v : inputs) {
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (!t.defined()) {
        h = mix(h, 1);
        continue;
      }
      h = mix(h, static_cast<uint64_t>(t.scalar_type()) + 16);
      for (int64_t s : t.sizes()) h = mix(h, static_cast<uint64_t>(s));
      h = mix(h, 0xfeed);
      if (device < 0 && t.device().type() == npu::kDeviceType) device = t.device().index();
    } else if (v.isList() && v.isTensorList()) {  // isList() is inline, isTensorList() a call
      h = mix(h, 2);
      for (const at::Tensor& t : v.toTensorList()) {
        h = mix(h, static_cast<uint64_t>(t.scalar_type()));
        for (int64_t s : t.sizes()) h = mix(h, static_cast<uint64_t>(s));
      }
    } else {
      h = mix(h, v.isScalar() ? 3 : 4);
    }
  }
  *device_out = device;
  return h;
}

// Input shapes and dtypes as PyTorch's profiler prints them ("[[2, 3], [], ...]",
// "float, Scalar, ..."), interned and cached by inputsHash.
ShapeIds shapeIds(ThreadState& ts, c10::ArrayRef<const c10::IValue> inputs, uint64_t h) {
  auto it = ts.shapes.find(h);
  if (it != ts.shapes.end()) return it->second;
  std::string shapes = "[", dtypes;
  bool first = true;
  for (const auto& v : inputs) {
    shapes += first ? "" : ", ";
    dtypes += first ? "" : ", ";
    first = false;
    if (v.isTensor() && v.toTensor().defined()) {
      const at::Tensor& t = v.toTensor();
      shapes += "[";
      for (int64_t i = 0; i < t.dim(); ++i) shapes += (i ? ", " : "") + std::to_string(t.size(i));
      shapes += "]";
      dtypes += dtypeName(t.scalar_type());
    } else if (v.isTensorList()) {
      shapes += "[";
      bool f2 = true;
      for (const at::Tensor& t : v.toTensorList()) {
        shapes += f2 ? "[" : ", [";
        f2 = false;
        for (int64_t i = 0; i < t.dim(); ++i) shapes += (i ? ", " : "") + std::to_string(t.size(i));
        shapes += "]";
      }
      shapes += "]";
      dtypes += "TensorList";
    } else {
      shapes += "[]";
      dtypes += v.isScalar() ? "Scalar" : "";
    }
  }
  shapes += "]";
  ShapeIds ids{StringTable::global().intern(shapes), StringTable::global().intern(dtypes)};
  ts.shapes.emplace(h, ids);
  return ids;
}

// Op names from schemas live as long as the operator: cached by pointer. Names of autograd
// nodes and user scopes are strings owned by each RecordFunction (pointers get reused): cached
// by content. The cache holds schema names only, so a pointer found there is one: the test for
// a schema (operator_name(), which copies the name's strings) runs once per operator, not per op.
uint32_t nameId(ThreadState& ts, const at::RecordFunction& fn) {
  const char* name = fn.name();
  if (fn.scope() == at::RecordScope::FUNCTION) {
    ThreadState::NameSlot& slot = ts.recent_names[(reinterpret_cast<uintptr_t>(name) >> 3) % ts.recent_names.size()];
    if (slot.name == name) return slot.id;
    auto it = ts.names.find(name);
    if (it == ts.names.end() && fn.operator_name().has_value()) {
      it = ts.names.emplace(name, StringTable::global().intern(name)).first;
    }
    if (it != ts.names.end()) {
      slot = {name, it->second};
      return it->second;
    }
  }
  // Keyed by the length and two 8-byte words, the last and one from the middle: such names differ
  // near their end ("autograd::engine::evaluate_function: AddBackward0" / "...: MulBackward0"),
  // and the full compare below decides. Hashing every character was most of a backward op's cost.
  const size_t n = std::strlen(name);
  uint64_t h = n;
  if (n >= 8) {
    uint64_t last, middle;
    std::memcpy(&last, name + n - 8, 8);
    std::memcpy(&middle, name + (n - 8) / 2, 8);
    h = mix(mix(h, last), middle);
  } else {
    for (size_t i = 0; i < n; ++i) h = mix(h, static_cast<unsigned char>(name[i]));
  }
  auto it = ts.dynamic_names.find(h);
  if (it != ts.dynamic_names.end() && it->second.first.size() == n && std::memcmp(it->second.first.data(), name, n) == 0) {
    return it->second.second;
  }
  const uint32_t id = StringTable::global().intern(name);
  ts.dynamic_names[h] = {name, id};
  return id;
}

std::unique_ptr<at::ObserverContext> onStart(const at::RecordFunction& fn) {
  // The running thread's state, not the one fn.threadId() names: a RecordFunction may be made on
  // one thread and started on another (c10d's Gloo work).
  ThreadState& ts = threadState();
  if (*ts.emulator_work != 0) return nullptr;
  Frame f;
  f.name = fn.name();
  f.children = 0;
  f.npu_children = 0;
  f.merged = false;
  const bool keep = g_keep.load(std::memory_order_relaxed);
  f.name_id = keep ? nameId(ts, fn) : 0;  // 0: not looked up (recording was off at the start)
  if (!ts.stack.empty()) {
    Frame& parent = ts.stack.back();
    // Interned ids compare as the names do (most names share "aten::": strcmp reads on past it).
    if (fn.scope() == at::RecordScope::FUNCTION &&
        (f.name_id != 0 && parent.name_id != 0 ? parent.name_id == f.name_id : std::strcmp(parent.name, f.name) == 0)) {
      f = parent;
      f.merged = true;
      f.children = 0;
      f.npu_children = 0;
      ts.stack.push_back(f);
      return nullptr;
    }
  }
  f.id = g_next_id.fetch_add(1, std::memory_order_relaxed);
  f.backward = fn.scope() == at::RecordScope::BACKWARD_FUNCTION || (!ts.stack.empty() && ts.stack.back().backward) ||
               std::strncmp(f.name, "autograd::engine::evaluate_function", 35) == 0;
  if (f.backward != g_phase_backward.load(std::memory_order_relaxed)) {
    g_phase_backward.store(f.backward, std::memory_order_relaxed);
    g_epoch.fetch_add(1, std::memory_order_relaxed);
    if (f.backward) g_after_backward.store(true, std::memory_order_relaxed);
  }
  f.shapes_id = f.dtypes_id = 0;
  f.device = -1;
  f.modeled_ns = -1;
  f.host_sync = false;
  // The inputs say which npu an op runs on and what the cost model charges for it, whether or not
  // the session keeps their shapes (torch_npu's record_shapes=False still has its kernels).
  if (keep && fn.needsInputs()) {
    int device = -1;
    const uint64_t h = inputsHash(fn.inputs(), &device);
    if (g_shapes.load(std::memory_order_relaxed)) {
      const ShapeIds ids = shapeIds(ts, fn.inputs(), h);
      f.shapes_id = ids.shapes;
      f.dtypes_id = ids.dtypes;
    }
    f.device = static_cast<int8_t>(device);
    f.host_sync = device >= 0 && isBlockingHostDeviceCopy(f.name_id, fn.inputs());
    if (device >= 0 && fn.scope() == at::RecordScope::FUNCTION) {
      const uint64_t key = mix(h, f.name_id);
      auto cit = ts.cost.find(key);
      if (cit != ts.cost.end()) {
        f.modeled_ns = cit->second;
      } else {
        f.modeled_ns = npu::modeled_duration_ns(npu::estimate_op_work(fn.name(), fn.inputs()));
        ts.cost.emplace(key, f.modeled_ns);
      }
    }
  }
  if (!ts.stack.empty()) {
    ++ts.stack.back().children;
    if (f.device >= 0) ++ts.stack.back().npu_children;
  }
  ++ts.depth;
  if (ts.waiting > 0) {
    for (auto& w : ts.watches) {
      if (w.second < 0 && w.first == ts.stack.size()) {
        w.second = f.id;
        --ts.waiting;
      }
    }
  }
  f.start_ns = nowNs();
  ts.stack.push_back(f);
  return nullptr;
}

void onEnd(const at::RecordFunction& fn, at::ObserverContext*) {
  const int64_t end = nowNs();
  ThreadState& ts = threadState();
  if (*ts.emulator_work != 0 || ts.stack.empty()) return;
  const Frame f = ts.stack.back();
  ts.stack.pop_back();
  if (f.merged) {
    if (!ts.stack.empty()) {
      ts.stack.back().children += f.children;
      ts.stack.back().npu_children += f.npu_children;
    }
    return;
  }
  --ts.depth;
  if (!g_keep.load(std::memory_order_relaxed)) return;
  Claim claim(ts, 1);
  TraceWriter* w = g_writer.load();
  if (!w) return;
  if (!ts.buf) ts.buf = w->takeBuffer();

  // The stream slot before the record's stores: a locked instruction (the slot's compare-exchange)
  // waits until earlier stores have drained, and the count below is a plain store, not a locked
  // add. Together about 30 ns of a recorded op (added_ns_per_op, eight alternated runs).
  npu::StreamSlot slot{-1, -1};
  const bool task = f.modeled_ns >= 0 && f.npu_children == 0;
  if (task) slot = npu::submit_to_stream(f.device, end, f.modeled_ns);  // launched as its host part ends
  OpRecord& r = ts.buf->records[ts.buf->size];
  r.id = f.id;
  r.parent_id = ts.stack.empty() ? -1 : ts.stack.back().id;
  r.start_ns = f.start_ns;
  r.dur_ns = end - f.start_ns;
  r.seq_nr = fn.seqNr();
  r.thread_id = fn.threadId();
  r.step = static_cast<int32_t>(g_step.load(std::memory_order_relaxed));
  r.depth = static_cast<int16_t>(ts.depth);
  r.is_backward = f.backward ? 1 : 0;
  r.name_id = f.name_id != 0 ? f.name_id : nameId(ts, fn);
  r.shapes_id = f.shapes_id;
  r.dtypes_id = f.dtypes_id;
  r.device = f.device;
  r.host_sync = f.host_sync ? 1 : 0;
  // The innermost op on an npu is a device task.
  r.device_start_ns = task ? slot.start_ns : -1;
  r.device_dur_ns = task ? f.modeled_ns : -1;
  ++ts.buf->size;
  ts.recorded.store(ts.recorded.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);  // no locked add
  if (ts.buf->full()) w->submit(ts.buf);
}

void onMemory(int device, uint64_t allocated, uint64_t reserved) {
  if (!g_keep.load(std::memory_order_relaxed) || !g_memory.load(std::memory_order_relaxed)) return;
  ThreadState& ts = threadState();
  Claim claim(ts, 1);
  TraceWriter* w = g_writer.load();
  if (!w) return;
  ts.memory.push_back(MemoryRecord{nowNs(), device, allocated, reserved});
  if (ts.memory.size() >= 1024) {
    w->addMemory(std::move(ts.memory));
    ts.memory.clear();
  }
}

// ---- memory blocks ----------------------------------------------------------------------
// What the recorder keeps in a block's observer words (npu::BlockInfo::words), at allocation:
//   words[0] the time; words[1] the allocating op's id (-1: none recorded); words[2] the step;
//   words[3] the phase epoch << 8 | flags.
constexpr int64_t kSeen = 1;            // allocated while this session recorded
constexpr int64_t kInOp = 2;            // inside an op
constexpr int64_t kBackwardOp = 4;      // the op was backward work
constexpr int64_t kAfterBackward = 8;   // the step had run backward work before
constexpr int64_t kWrittenLive = 16;    // its row was written while it was live (writeLiveEarly)

// Per device: read by the allocating threads, written at the session's start and stop (and
// `rec` under g_peak_mu).
struct DevicePeak {
  std::atomic<bool> active{false};  // the device saw an event in this session
  std::atomic<int64_t> start_seq{0};
  MemoryDeviceRecord rec;
};
std::mutex g_peak_mu;
DevicePeak g_devices[npu::kMaxDevices];
std::atomic<uint64_t> g_peak_allocated[npu::kMaxDevices];
std::atomic<int64_t> g_session_start_ns{0};
std::atomic<bool> g_live_written{false};      // writeLiveEarly ran this session
std::atomic<int64_t> g_first_kept_step{-1};  // the step that began kept, -1: none yet

// The category of an untagged block `now` (the current epoch: at a free, or of a snapshot of
// live blocks). Documented in docs/memory.md.
npu::MemoryCategory inferCategory(const int64_t* words, bool live) {
  using C = npu::MemoryCategory;
  const int64_t flags = words[3] & 0xff;
  if (!(flags & kSeen) || !(flags & kInOp)) return C::kOther;
  const bool same_phase = !live && (words[3] >> 8) == g_epoch.load(std::memory_order_relaxed);
  if (flags & kBackwardOp) return same_phase ? C::kTemporary : C::kGradient;
  if (same_phase) return C::kTemporary;
  return (flags & kAfterBackward) ? C::kOptimizerState : C::kActivation;
}

MemoryBlockRecord blockRecord(const npu::BlockInfo& b, bool live) {
  MemoryBlockRecord r;
  r.device = b.device;
  r.size = static_cast<int64_t>(b.size);
  r.requested = static_cast<int64_t>(b.requested);
  r.address = b.address;
  const bool seen = (b.words[3] & kSeen) != 0;
  const int64_t start = g_devices[b.device].start_seq.load(std::memory_order_relaxed);
  r.alloc_seq = seen ? static_cast<int64_t>(b.id) : start;
  r.alloc_ns = seen ? b.words[0] : g_session_start_ns.load(std::memory_order_relaxed);
  r.op_id = seen ? b.words[1] : -1;
  r.step = seen ? b.words[2] : -1;
  r.category = static_cast<uint8_t>(b.category != npu::MemoryCategory::kUntagged ? b.category
                                                                                   : inferCategory(b.words, live));
  if (b.owner) r.owner = b.owner;
  return r;
}

void activateDevice(int device) {
  DevicePeak& d = g_devices[device];
  if (d.active.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(g_peak_mu);
  if (d.active.load(std::memory_order_relaxed)) return;
  d.rec = MemoryDeviceRecord();
  d.rec.device = device;
  d.active.store(true, std::memory_order_release);
}

void notePeak(int device, uint64_t seq, uint64_t allocated, uint64_t reserved, int64_t op_id) {
  if (allocated <= g_peak_allocated[device].load(std::memory_order_relaxed)) return;
  const uint64_t cached = npu::largest_cached_block(device);
  std::lock_guard<std::mutex> lock(g_peak_mu);
  if (allocated <= g_peak_allocated[device].load(std::memory_order_relaxed)) return;
  g_peak_allocated[device].store(allocated, std::memory_order_relaxed);
  MemoryDeviceRecord& r = g_devices[device].rec;
  r.peak_seq = static_cast<int64_t>(seq);
  r.peak_ns = nowNs();
  r.peak_allocated = static_cast<int64_t>(allocated);
  r.peak_reserved = static_cast<int64_t>(reserved);
  r.largest_cached = static_cast<int64_t>(cached);
  r.peak_op_id = op_id;
  r.peak_step = g_step.load(std::memory_order_relaxed);
}

void onBlock(npu::BlockEvent event, const npu::BlockInfo& b, uint64_t seq, uint64_t allocated, uint64_t reserved) {
  if (!g_memory.load(std::memory_order_relaxed)) return;
  TraceWriter* w = g_writer.load(std::memory_order_relaxed);
  if (!w || b.device < 0 || b.device >= npu::kMaxDevices || g_baseline.load(std::memory_order_relaxed)) return;
  activateDevice(b.device);
  ThreadState& ts = threadState();
  const bool keep = g_keep.load(std::memory_order_relaxed);
  if (event == npu::BlockEvent::kAlloc) {
    int64_t flags = kSeen;
    int64_t op_id = -1;
    if (!ts.stack.empty()) {
      const Frame& f = ts.stack.back();
      flags |= kInOp | (f.backward ? kBackwardOp : 0);
      if (keep) op_id = f.id;
    }
    if (g_after_backward.load(std::memory_order_relaxed)) flags |= kAfterBackward;
    b.words[0] = nowNs();
    b.words[1] = op_id;
    b.words[2] = g_step.load(std::memory_order_relaxed);
    b.words[3] = (g_epoch.load(std::memory_order_relaxed) << 8) | flags;
    if (keep) notePeak(b.device, seq, allocated, reserved, op_id);
    return;
  }
  MemoryBlockRecord r = blockRecord(b, false);
  r.free_seq = static_cast<int64_t>(seq);
  r.free_ns = nowNs();
  r.update = (b.words[3] & kWrittenLive) != 0;
  Claim claim(ts, 1);
  ts.blocks.push_back(std::move(r));
  if (ts.blocks.size() >= 1024) {
    w->addMemoryBlocks(std::move(ts.blocks));
    ts.blocks.clear();
  }
}

npu::MemoryCategory classifyLive(const npu::BlockInfo& b) { return inferCategory(b.words, true); }

void onOom(int device, uint64_t requested, uint64_t seq, const std::string& message) {
  TraceWriter* w = g_writer.load();
  if (!w) return;
  // The refusal ends the phase: what was live keeps the category the message gave it when the
  // unwinding frees it.
  g_epoch.fetch_add(1, std::memory_order_relaxed);
  MemoryOomRecord r;
  r.device = device;
  r.seq = static_cast<int64_t>(seq);
  r.ts_ns = nowNs();
  r.requested = static_cast<int64_t>(requested);
  r.op_id = currentOpId();
  r.step = g_step.load(std::memory_order_relaxed);
  r.message = message;
  w->addMemoryOom(r);
}

// At the session's start: the devices' event numbers (blocks allocated before count from
// there) and peaks from zero.
void startMemory() {
  g_session_start_ns.store(nowNs());
  g_live_written.store(false);
  g_first_kept_step.store(-1);
  g_phase_backward.store(false);
  g_after_backward.store(false);
  for (int d = 0; d < npu::kMaxDevices; ++d) {
    g_devices[d].active.store(false);
    g_peak_allocated[d].store(0);
    const uint64_t seq = npu::memory_event_seq(d);
    g_devices[d].start_seq.store(static_cast<int64_t>(seq));
    if (seq != 0) activateDevice(d);  // a device never used is activated by its first event
  }
  npu::set_block_classifier(&classifyLive);
  npu::set_oom_observer(&onOom);
  npu::set_block_observer(&onBlock);
}

struct LiveBlocks {
  std::vector<MemoryBlockRecord>* out;
};
// A row for each live block not written yet, which is then marked written.
void collectLive(const npu::BlockInfo& b, void* arg) {
  if (b.words[3] & kWrittenLive) return;
  static_cast<LiveBlocks*>(arg)->out->push_back(blockRecord(b, true));
  b.words[3] |= kWrittenLive;
}

// Once a session, after its first kept step: a row for every block live then (parameters,
// master weights, optimizer state: what lives to the end), written while the disk has room, so
// that a run ended by a full disk keeps what filled its memory. A block freed later has its
// free set on that row (MemoryBlockRecord::update).
void writeLiveBlocks(TraceWriter* w, int device) {
  std::vector<MemoryBlockRecord> live;
  LiveBlocks arg{&live};
  npu::for_each_live_block(device, &collectLive, &arg);
  w->addMemoryBlocks(std::move(live));
}
void writeLiveEarly(TraceWriter* w) {
  if (g_live_written.exchange(true)) return;
  for (int d = 0; d < npu::kMaxDevices; ++d) {
    if (g_devices[d].active.load()) writeLiveBlocks(w, d);
  }
}

// At the session's end: a row for every block still live (those not written before), and each
// device's peak.
void stopMemory(TraceWriter* w) {
  npu::set_block_observer(nullptr);
  npu::set_oom_observer(nullptr);
  npu::set_block_classifier(nullptr);
  for (int d = 0; d < npu::kMaxDevices; ++d) {
    if (!g_devices[d].active.load()) continue;
    writeLiveBlocks(w, d);
    MemoryDeviceRecord r;
    {
      std::lock_guard<std::mutex> lock(g_peak_mu);
      r = g_devices[d].rec;
    }
    r.device = d;
    r.start_seq = g_devices[d].start_seq.load();
    r.end_seq = static_cast<int64_t>(npu::memory_event_seq(d));
    r.capacity = static_cast<int64_t>(npu::memory_stats(d).capacity);
    w->addMemoryDevice(r);
    g_devices[d].active.store(false);
  }
}

// The recorder's registration with libtorch: the scopes it records, inputs boxed (shapes, dtypes,
// the device an op runs on).
at::RecordFunctionCallback observing(at::RecordFunctionCallback::StartCallback start,
                                     at::RecordFunctionCallback::EndCallback end) {
  return at::RecordFunctionCallback(start, end)
      .needsInputs(true)
      .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION, at::RecordScope::USER_SCOPE});
}

void ensureCallback() {
  if (g_handle != 0) return;
  g_handle = at::addGlobalCallback(observing(&onStart, &onEnd));
  at::disableCallback(g_handle);
}

// The session's sink for the hccl process group's collectives: kept steps only, like the ops.
class RecorderCollectiveSink : public CollectiveSink {
 public:
  explicit RecorderCollectiveSink(TraceWriter* w) : writer_(w) {}
  bool context(int64_t* op_id, int64_t* step) override {
    if (!g_keep.load(std::memory_order_relaxed)) return false;
    *op_id = currentOpId();
    *step = g_step.load(std::memory_order_relaxed);
    return true;
  }
  void add(const CollectiveRecord& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (writer_ != nullptr) writer_->addCollective(r);
  }
  void detach() {
    std::lock_guard<std::mutex> lock(mu_);
    writer_ = nullptr;
  }

 private:
  std::mutex mu_;
  TraceWriter* writer_;
};
std::shared_ptr<RecorderCollectiveSink> g_collectives;

}  // namespace

void start(TraceWriter* writer, bool record_shapes, bool record_memory) {
  ensureCallback();
  g_shapes.store(record_shapes);
  g_memory.store(record_memory);
  g_baseline.store(false);
  {
    std::lock_guard<std::mutex> lock(g_registry_mu);
    g_recorded_base = allRecordedLocked();
  }
  npu::reset_streams();
  g_writer.store(writer);
  if (record_memory) {
    npu::set_memory_observer(&onMemory);
    startMemory();
  }
  g_collectives = std::make_shared<RecorderCollectiveSink>(writer);
  setCollectiveSink(g_collectives);
}

void setMode(bool callbacks_on, bool keep) {
  ensureCallback();
  g_baseline.store(false);
  g_keep.store(keep);
  if (callbacks_on) {
    at::reenableCallback(g_handle);
  } else {
    at::disableCallback(g_handle);
  }
}

void removeCallbacksForBaseline() {
  g_keep.store(false);  // memory events, which come from the allocator, not the callbacks
  g_baseline.store(true);
  if (g_handle == 0) return;
  at::removeCallback(g_handle);
  g_handle = 0;
}

void setFloorCallback(bool on) {
  static at::CallbackHandle floor = 0;
  if (on && floor == 0) {
    floor = at::addGlobalCallback(observing([](const at::RecordFunction&) -> std::unique_ptr<at::ObserverContext> {
      return nullptr;
    }, [](const at::RecordFunction&, at::ObserverContext*) {}));
  } else if (!on && floor != 0) {
    at::removeCallback(floor);
    floor = 0;
  }
}

void setStep(int64_t step) {
  // The session's first kept step has ended: the long-lived blocks are written now
  // (writeLiveEarly).
  if (g_memory.load(std::memory_order_relaxed) && g_keep.load(std::memory_order_relaxed) &&
      !g_live_written.load(std::memory_order_relaxed)) {
    const int64_t first = g_first_kept_step.load(std::memory_order_relaxed);
    if (first < 0) {
      g_first_kept_step.store(step, std::memory_order_relaxed);
    } else if (first != step) {
      if (TraceWriter* w = g_writer.load()) writeLiveEarly(w);
    }
  }
  g_step.store(step);
  g_after_backward.store(false, std::memory_order_relaxed);
}

void stop() {
  g_keep.store(false);
  if (g_handle != 0) at::disableCallback(g_handle);
  npu::set_memory_observer(nullptr);
  if (TraceWriter* w = g_writer.load(); w && g_memory.load()) stopMemory(w);
  if (g_collectives) {  // a collective completing later finds no writer
    setCollectiveSink(nullptr);
    g_collectives->detach();
    g_collectives.reset();
  }
  TraceWriter* w = g_writer.exchange(nullptr);
  if (!w) return;
  // Callbacks that saw the writer before it was cleared finish first; then every thread's
  // remaining records go to the writer.
  std::lock_guard<std::mutex> lock(g_registry_mu);
  for (ThreadState* ts : registry()) {
    Claim claim(*ts, 2);
    flushLocked(*ts, w);
    ts->buf.reset();
  }
}

void flushAll() {
  TraceWriter* w = g_writer.load();
  if (!w) return;
  std::lock_guard<std::mutex> lock(g_registry_mu);
  for (ThreadState* ts : registry()) {
    Claim claim(*ts, 2);
    flushLocked(*ts, w);
  }
}

uint64_t recordedOps() {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  return allRecordedLocked() - g_recorded_base;
}

int64_t currentOpId() {
  if (!g_keep.load(std::memory_order_relaxed)) return -1;
  const ThreadState& ts = threadState();
  return ts.stack.empty() ? -1 : ts.stack.back().id;
}

bool currentOp(CurrentOp* out) {
  const ThreadState& ts = threadState();
  if (ts.stack.empty()) return false;
  const Frame& f = ts.stack.back();
  out->id = g_keep.load(std::memory_order_relaxed) ? f.id : -1;
  out->name = f.name;
  out->backward = f.backward;
  return true;
}

size_t watchBegin() {
  ThreadState& ts = threadState();
  ts.watches.emplace_back(ts.stack.size(), -1);
  ++ts.waiting;
  return ts.watches.size() - 1;
}

int64_t watchEnd(size_t handle) {
  ThreadState& ts = threadState();
  if (handle >= ts.watches.size()) return -1;
  const int64_t id = ts.watches[handle].second;
  for (size_t i = handle; i < ts.watches.size(); ++i) {
    if (ts.watches[i].second < 0) --ts.waiting;
  }
  ts.watches.resize(handle);
  return g_keep.load(std::memory_order_relaxed) ? id : -1;
}

}  // namespace npuscope::profiler::recorder
