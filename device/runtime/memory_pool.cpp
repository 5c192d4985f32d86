// Per-device memory pools: host memory with a device's accounting, a capacity and a cache of
// freed blocks (as the CANN and CUDA caching allocators keep one), so `reserved` means what it
// means on a real device.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "npuscope/store/format.h"
#include "npuscope/device/device_log.h"
#include "npuscope/device/runtime.h"

namespace npuscope::npu {
namespace {

constexpr size_t kAlign = 64;                  // every block's data is 64-byte aligned
constexpr size_t kHeader = 128;                // block header in front of the data
constexpr size_t kSmallRound = 512;            // blocks up to 1 MiB round to 512 B
constexpr size_t kSmallLimit = 1 << 20;
constexpr size_t kLargeRound = 2 << 20;        // larger blocks round to 2 MiB

struct BlockHeader {
  int32_t device;     // -1: host memory outside any pool
  MemoryCategory category;
  uint64_t size;      // rounded size of the data part
  // The rest is kept for device blocks only.
  uint64_t requested;
  uint64_t id;        // the pool's event number at allocation
  BlockHeader* prev;  // the pool's live blocks, in allocation order
  BlockHeader* next;
  const char* owner;
  int64_t words[4];   // the block observer's
};

BlockHeader* headerOf(void* data) {
  return reinterpret_cast<BlockHeader*>(static_cast<char*>(data) - kHeader);
}
static_assert(sizeof(BlockHeader) <= kHeader, "header must fit");

size_t roundSize(size_t bytes) {
  if (bytes == 0) bytes = 1;
  size_t r = bytes <= kSmallLimit ? kSmallRound : kLargeRound;
  return (bytes + r - 1) / r * r;
}

struct Pool {
  std::mutex mu;
  int device = 0;
  MemoryStats stats;
  uint64_t cached = 0;
  uint64_t cache_limit = 1ull << 30;
  std::unordered_map<uint64_t, std::vector<void*>> free_blocks;  // size -> data pointers
  uint64_t events = 0;            // allocations and frees so far
  BlockHeader* live_head = nullptr;
  BlockHeader* live_tail = nullptr;

  void link(BlockHeader* h) {
    h->prev = live_tail;
    h->next = nullptr;
    (live_tail ? live_tail->next : live_head) = h;
    live_tail = h;
  }
  void unlink(BlockHeader* h) {
    (h->prev ? h->prev->next : live_head) = h->next;
    (h->next ? h->next->prev : live_tail) = h->prev;
  }

  void freeCachedLocked() {
    for (auto& [size, blocks] : free_blocks) {
      for (void* d : blocks) std::free(headerOf(d));
      stats.reserved -= size * blocks.size();
    }
    free_blocks.clear();
    cached = 0;
  }
};

std::atomic<MemoryObserver> g_observer{nullptr};
std::atomic<BlockObserver> g_block_observer{nullptr};
std::atomic<BlockClassifier> g_classifier{nullptr};
std::atomic<OomObserver> g_oom_observer{nullptr};

BlockInfo infoOf(const BlockHeader* h) {
  BlockInfo b;
  b.device = h->device;
  b.id = h->id;
  b.address = reinterpret_cast<uint64_t>(h) + kHeader;
  b.size = h->size;
  b.requested = h->requested;
  b.category = h->category;
  b.owner = h->owner;
  return b;
}

// Owners are few (parameters, optimizer buffers) and tagged once: interned for the process.
const char* internOwner(const char* owner) {
  static std::mutex mu;
  static auto* names = new std::set<std::string>();  // leaked on purpose: outlives statics
  std::lock_guard<std::mutex> lock(mu);
  return names->insert(owner).first->c_str();
}

// The out-of-memory message's tail: the two categories holding most and the largest block with
// its owner (pool locked).
std::string describeLiveLocked(const Pool& pool) {
  uint64_t bytes[kMemoryCategoryCount] = {};
  const BlockHeader* largest = nullptr;
  BlockClassifier classify = g_classifier.load();
  MemoryCategory largest_category = MemoryCategory::kUntagged;
  for (const BlockHeader* h = pool.live_head; h; h = h->next) {
    MemoryCategory c = h->category;
    if (c == MemoryCategory::kUntagged && classify) {
      BlockInfo b = infoOf(h);
      b.words = const_cast<int64_t*>(h->words);
      c = classify(b);
    }
    bytes[static_cast<int>(c)] += h->size;
    if (!largest || h->size > largest->size) largest = h, largest_category = c;
  }
  if (!largest) return "";
  int order[kMemoryCategoryCount];
  for (int i = 0; i < kMemoryCategoryCount; ++i) order[i] = i;
  std::stable_sort(order, order + kMemoryCategoryCount, [&](int a, int b) { return bytes[a] > bytes[b]; });
  std::string out = "; most held by ";
  for (int k = 0; k < 2 && bytes[order[k]] > 0; ++k) {
    if (k) out += ", ";
    out += std::string(memoryCategoryName(order[k])) + " " + formatBytes(bytes[order[k]]);
  }
  out += "; largest block " + formatBytes(largest->size) + " (" + memoryCategoryName(largest_category);
  if (largest->owner) out += std::string(" ") + largest->owner;
  out += ")";
  return out;
}

std::array<Pool, kMaxDevices>& pools() {
  static std::array<Pool, kMaxDevices>* p = [] {
    auto* arr = new std::array<Pool, kMaxDevices>();  // leaked on purpose: outlives statics
    uint64_t capacity = parseBytes(std::getenv("NPUSCOPE_NPU_MEMORY"), 32ull << 30);
    uint64_t cache = parseBytes(std::getenv("NPUSCOPE_NPU_CACHE_LIMIT"), 1ull << 30);
    for (int i = 0; i < kMaxDevices; ++i) {
      (*arr)[i].device = i;
      (*arr)[i].stats.capacity = capacity;
      (*arr)[i].cache_limit = cache;
    }
    return arr;
  }();
  return *p;
}

void notify(int device, uint64_t allocated, uint64_t reserved) {
  if (auto obs = g_observer.load(std::memory_order_relaxed)) obs(device, allocated, reserved);
}

}  // namespace

StatusOr<void*> allocate(int device, size_t bytes) {
  if (device < 0 || device >= kMaxDevices) {
    return invalidArgument("npu:" + std::to_string(device) + " does not exist");
  }
  Pool& pool = pools()[device];
  const uint64_t size = roundSize(bytes);
  void* data = nullptr;
  BlockHeader* h = nullptr;
  uint64_t allocated, reserved;
  {
    std::lock_guard<std::mutex> lock(pool.mu);
    auto it = pool.free_blocks.find(size);
    if (it != pool.free_blocks.end() && !it->second.empty()) {
      data = it->second.back();
      it->second.pop_back();
      pool.cached -= size;
    } else {
      if (pool.stats.reserved + size > pool.stats.capacity && pool.cached > 0) {
        pool.freeCachedLocked();
      }
      if (pool.stats.reserved + size > pool.stats.capacity) {
        ++pool.stats.num_ooms;
        NPU_LOG(kWarning) << device_name(device) << ": allocation of " << formatBytes(bytes)
                          << " refused, capacity " << formatBytes(pool.stats.capacity) << " reached";
        const std::string message = device_name(device) + " out of memory: tried to allocate " + formatBytes(bytes) +
                                    " with " + formatBytes(pool.stats.allocated) + " in use and " +
                                    formatBytes(pool.stats.reserved) + " reserved of a capacity of " +
                                    formatBytes(pool.stats.capacity) + describeLiveLocked(pool);
        if (auto obs = g_oom_observer.load()) obs(device, bytes, pool.events, message);
        return outOfMemory(message);
      }
      void* base = std::aligned_alloc(kAlign, kHeader + size);
      if (!base) {
        ++pool.stats.num_ooms;
        return outOfMemory(device_name(device) + ": the host could not provide " + formatBytes(size) +
                           " for this device's pool");
      }
      auto* fresh = static_cast<BlockHeader*>(base);
      fresh->device = device;
      fresh->size = size;
      data = static_cast<char*>(base) + kHeader;
      pool.stats.reserved += size;
      pool.stats.peak_reserved = std::max(pool.stats.peak_reserved, pool.stats.reserved);
    }
    h = headerOf(data);
    h->category = MemoryCategory::kUntagged;
    h->requested = bytes;
    h->id = ++pool.events;
    h->owner = nullptr;
    std::memset(h->words, 0, sizeof(h->words));
    pool.link(h);
    pool.stats.allocated += size;
    pool.stats.peak_allocated = std::max(pool.stats.peak_allocated, pool.stats.allocated);
    ++pool.stats.num_allocs;
    allocated = pool.stats.allocated;
    reserved = pool.stats.reserved;
  }
  notify(device, allocated, reserved);
  if (auto obs = g_block_observer.load(std::memory_order_relaxed)) {
    BlockInfo b = infoOf(h);  // the block is the caller's alone until it is returned
    b.words = h->words;
    obs(BlockEvent::kAlloc, b, b.id, allocated, reserved);
  }
  return data;
}

void* allocate_host(size_t bytes) {
  const size_t size = (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
  void* base = std::aligned_alloc(kAlign, kHeader + size);
  if (!base) return nullptr;
  auto* h = static_cast<BlockHeader*>(base);
  h->device = -1;
  h->size = size;
  return static_cast<char*>(base) + kHeader;
}

void release(void* data) {
  if (!data) return;
  BlockHeader* h = headerOf(data);
  if (h->device < 0) {
    std::free(h);
    return;
  }
  const int device = h->device;  // h may be freed below
  Pool& pool = pools()[device];
  uint64_t allocated, reserved, seq;
  BlockObserver obs = g_block_observer.load(std::memory_order_relaxed);
  BlockInfo b;
  int64_t words[4];
  if (obs) {  // read while the block is still the caller's
    b = infoOf(h);
    std::memcpy(words, h->words, sizeof(words));
    b.words = words;
  }
  {
    std::lock_guard<std::mutex> lock(pool.mu);
    pool.unlink(h);
    seq = ++pool.events;
    pool.stats.allocated -= h->size;
    if (pool.cached + h->size <= pool.cache_limit) {
      pool.free_blocks[h->size].push_back(data);
      pool.cached += h->size;
    } else {
      pool.stats.reserved -= h->size;
      std::free(h);
    }
    allocated = pool.stats.allocated;
    reserved = pool.stats.reserved;
  }
  notify(device, allocated, reserved);
  if (obs) obs(BlockEvent::kFree, b, seq, allocated, reserved);
}

MemoryStats memory_stats(int device) {
  if (device < 0 || device >= kMaxDevices) return {};
  Pool& pool = pools()[device];
  std::lock_guard<std::mutex> lock(pool.mu);
  return pool.stats;
}

void reset_peak_memory_stats(int device) {
  if (device < 0 || device >= kMaxDevices) return;
  Pool& pool = pools()[device];
  std::lock_guard<std::mutex> lock(pool.mu);
  pool.stats.peak_allocated = pool.stats.allocated;
  pool.stats.peak_reserved = pool.stats.reserved;
}

void set_memory_capacity(int device, uint64_t bytes) {
  if (device < 0 || device >= kMaxDevices) return;
  Pool& pool = pools()[device];
  std::lock_guard<std::mutex> lock(pool.mu);
  pool.stats.capacity = bytes;
}

void empty_cache(int device) {
  if (device < 0 || device >= kMaxDevices) return;
  Pool& pool = pools()[device];
  uint64_t allocated, reserved;
  {
    std::lock_guard<std::mutex> lock(pool.mu);
    pool.freeCachedLocked();
    allocated = pool.stats.allocated;
    reserved = pool.stats.reserved;
  }
  notify(device, allocated, reserved);
}

void set_memory_observer(MemoryObserver observer) { g_observer.store(observer); }

void tag_memory(const void* data, MemoryCategory category, const char* owner) {
  if (!data) return;
  BlockHeader* h = headerOf(const_cast<void*>(data));
  if (h->device < 0) return;
  h->category = category;  // the tagging thread holds the block (a live storage)
  if (owner) h->owner = internOwner(owner);
}

MemoryCategory memory_tag(const void* data) {
  if (!data) return MemoryCategory::kUntagged;
  const BlockHeader* h = headerOf(const_cast<void*>(data));
  return h->device < 0 ? MemoryCategory::kUntagged : h->category;
}

void set_block_observer(BlockObserver observer) { g_block_observer.store(observer); }
void set_block_classifier(BlockClassifier classifier) { g_classifier.store(classifier); }
void set_oom_observer(OomObserver observer) { g_oom_observer.store(observer); }

uint64_t memory_event_seq(int device) {
  if (device < 0 || device >= kMaxDevices) return 0;
  Pool& pool = pools()[device];
  std::lock_guard<std::mutex> lock(pool.mu);
  return pool.events;
}

void for_each_live_block(int device, void (*fn)(const BlockInfo& block, void* arg), void* arg) {
  if (device < 0 || device >= kMaxDevices) return;
  Pool& pool = pools()[device];
  std::lock_guard<std::mutex> lock(pool.mu);
  for (BlockHeader* h = pool.live_head; h; h = h->next) {
    BlockInfo b = infoOf(h);
    b.words = h->words;
    fn(b, arg);
  }
}

uint64_t largest_cached_block(int device) {
  if (device < 0 || device >= kMaxDevices) return 0;
  Pool& pool = pools()[device];
  std::lock_guard<std::mutex> lock(pool.mu);
  uint64_t largest = 0;
  for (const auto& [size, blocks] : pool.free_blocks) {
    if (!blocks.empty()) largest = std::max(largest, size);
  }
  return largest;
}

}  // namespace npuscope::npu
