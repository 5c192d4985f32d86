#include "npuscope/analysis/overflow_text.h"

#include <cstdio>
#include <nlohmann/json.hpp>

namespace npuscope {
namespace {

// A first_op event's detail JSON as its phase and the sentence about result and inputs; false
// when the detail is not such JSON.
bool firstOpParts(const OverflowEventRow& e, std::string* phase, std::string* result) {
  const nlohmann::json d = nlohmann::json::parse(e.detail, nullptr, false);
  if (!d.is_object()) return false;
  auto num = [&](const char* k) { return d.contains(k) && d[k].is_number() ? d[k].get<double>() : 0.0; };
  *phase = d.value("phase", std::string("?"));
  char buf[400];
  std::snprintf(buf, sizeof(buf), "%s result of %.0f, %.0f overflowed, %.0f NaN (max finite |x| %.3g%s)",
                d.value("dtype", std::string("?")).c_str(), num("numel"), num("out_inf"), num("out_nan"),
                num("out_max_abs"), d.value("rounding", false) ? " before rounding" : "");
  *result = buf;
  if (num("in_max_abs") < 0) {
    *result += "; inputs not measured";
  } else if (num("in_inf") + num("in_nan") > 0) {
    std::snprintf(buf, sizeof(buf), "; inputs already had %.0f inf and %.0f NaN (max finite |x| %.3g)", num("in_inf"),
                  num("in_nan"), num("in_max_abs"));
    *result += buf;
  } else {
    std::snprintf(buf, sizeof(buf), "; inputs finite, max |x| %.3g", num("in_max_abs"));
    *result += buf;
  }
  return true;
}

}  // namespace

std::string describeOverflowEvent(const OverflowEventRow& e) {
  if (e.source != "first_op") return e.op_name + (e.detail.empty() || e.op_name.empty() ? "" : "  ") + e.detail;
  // No op name: the op was not being recorded (a step the schedule skips, or outside any op).
  std::string text = e.op_name.empty() ? std::string("(op not recorded)") : e.op_name;
  if (e.op_id >= 0) text += " #" + std::to_string(e.op_id);
  std::string phase, result;
  if (firstOpParts(e, &phase, &result)) text += " (" + phase + "): " + result;
  return text;
}

std::string describeOverflowResult(const OverflowEventRow& e) {
  if (e.source != "first_op") return e.detail;
  std::string phase, result;
  return firstOpParts(e, &phase, &result) ? phase + ": " + result : e.detail;
}

}  // namespace npuscope
