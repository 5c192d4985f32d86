#include "npuscope/core/overflow_text.h"

#include <cstdio>
#include <nlohmann/json.hpp>

namespace npuscope {

std::string describeOverflowEvent(const OverflowEventRow& e) {
  if (e.source != "first_op") return e.op_name + (e.detail.empty() || e.op_name.empty() ? "" : "  ") + e.detail;
  const nlohmann::json d = nlohmann::json::parse(e.detail, nullptr, false);
  // No op name: the op was not being recorded (a step the schedule skips, or outside any op).
  std::string text = e.op_name.empty() ? std::string("(op not recorded)") : e.op_name;
  if (e.op_id >= 0) text += " #" + std::to_string(e.op_id);
  if (!d.is_object()) return text;
  auto num = [&](const char* k) { return d.contains(k) && d[k].is_number() ? d[k].get<double>() : 0.0; };
  char buf[400];
  std::snprintf(buf, sizeof(buf), " (%s): %s result of %.0f, %.0f overflowed, %.0f NaN (max finite |x| %.3g%s)",
                d.value("phase", std::string("?")).c_str(), d.value("dtype", std::string("?")).c_str(), num("numel"),
                num("out_inf"), num("out_nan"), num("out_max_abs"), d.value("rounding", false) ? " before rounding" : "");
  text += buf;
  if (num("in_max_abs") < 0) {
    text += "; inputs not measured";
  } else if (num("in_inf") + num("in_nan") > 0) {
    std::snprintf(buf, sizeof(buf), "; inputs already had %.0f inf and %.0f NaN (max finite |x| %.3g)", num("in_inf"),
                  num("in_nan"), num("in_max_abs"));
    text += buf;
  } else {
    std::snprintf(buf, sizeof(buf), "; inputs finite, max |x| %.3g", num("in_max_abs"));
    text += buf;
  }
  return text;
}

}  // namespace npuscope
