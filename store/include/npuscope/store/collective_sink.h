// Where a process group reports its collectives while a recording session runs: the session
// installs a sink, the `hccl` process group (distributed/) asks it at each collective. Neither
// library knows the other; both know this.
#pragma once

#include <cstdint>
#include <memory>

#include "npuscope/store/records.h"

namespace npuscope {

class CollectiveSink {
 public:
  virtual ~CollectiveSink() = default;
  // On the thread that enqueues a collective: whether it is to be recorded (a kept step), and
  // then the op being recorded there (-1: none) and the step (-1: none).
  virtual bool context(int64_t* op_id, int64_t* step) = 0;
  // From any thread (a collective completes on the backend's own); after the session stopped,
  // a late completion is dropped.
  virtual void add(const CollectiveRecord& r) = 0;
};

// Installs `sink` (null: none). Thread-safe.
void setCollectiveSink(std::shared_ptr<CollectiveSink> sink);
std::shared_ptr<CollectiveSink> collectiveSink();

}  // namespace npuscope
