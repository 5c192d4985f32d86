#include "npuscope/store/collective_sink.h"

#include <mutex>

namespace npuscope {
namespace {
std::mutex g_mu;
std::shared_ptr<CollectiveSink>& slot() {
  static auto* s = new std::shared_ptr<CollectiveSink>();
  return *s;
}
}  // namespace

void setCollectiveSink(std::shared_ptr<CollectiveSink> sink) {
  std::lock_guard<std::mutex> lock(g_mu);
  slot() = std::move(sink);
}

std::shared_ptr<CollectiveSink> collectiveSink() {
  std::lock_guard<std::mutex> lock(g_mu);
  return slot();
}

}  // namespace npuscope
