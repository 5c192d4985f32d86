// JSON text of values that carry strings from outside files: bytes that are not UTF-8 (a CSV or
// database field, an error message quoting one) are replaced, never thrown over.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace npuscope::import {

inline std::string jsonText(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace npuscope::import
