// Process-wide interning of strings (op names, shape and dtype lists) to small ids, so op
// records stay fixed-size. Ids start at 1 and never change; 0 means "no string".
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace npuscope {

class StringTable {
 public:
  static StringTable& global();

  // The id of `s`, adding it when new. Thread-safe; takes a lock (callers cache ids).
  uint32_t intern(std::string_view s);
  // Strings with ids in [from, from + result.size()) (a writer maps only the ids its rows use).
  std::vector<std::string> since(uint32_t from) const;
  // The string of `id` ("" for 0 or an unknown id).
  std::string value(uint32_t id) const;
  uint32_t size() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<std::string> strings_;  // strings_[id - 1]
};

}  // namespace npuscope
