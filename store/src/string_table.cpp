#include "npuscope/store/string_table.h"

namespace npuscope {

StringTable& StringTable::global() {
  static auto* table = new StringTable();  // leaked: used by threads until process exit
  return *table;
}

uint32_t StringTable::intern(std::string_view s) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ids_.find(std::string(s));
  if (it != ids_.end()) return it->second;
  strings_.emplace_back(s);
  const auto id = static_cast<uint32_t>(strings_.size());
  ids_.emplace(strings_.back(), id);
  return id;
}

std::vector<std::string> StringTable::since(uint32_t from) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (from == 0) from = 1;
  if (from > strings_.size()) return {};
  return {strings_.begin() + (from - 1), strings_.end()};
}

uint32_t StringTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<uint32_t>(strings_.size());
}

std::string StringTable::value(uint32_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (id == 0 || id > strings_.size()) return {};
  return strings_[id - 1];
}

}  // namespace npuscope
