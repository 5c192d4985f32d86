#include "chrome_parser.h"

#include <simdjson.h>

#include <functional>

#include "json_stream.h"
#include "text.h"
#include "trace_model.h"

namespace npuscope::import {

namespace od = simdjson::ondemand;

int64_t linkKey(std::string_view t) {
  while (!t.empty() && (t.front() == '"' || t.front() == ' ')) t.remove_prefix(1);
  while (!t.empty() && (t.back() == '"' || t.back() == ' ')) t.remove_suffix(1);
  if (t.empty()) return -1;
  int64_t v = 0;
  bool digits = true;
  for (char c : t) {
    if (c < '0' || c > '9' || v > (INT64_MAX - 9) / 10) {
      digits = false;
      break;
    }
    v = v * 10 + (c - '0');
  }
  if (digits) return v;
  return static_cast<int64_t>(std::hash<std::string_view>()(t) >> 1);
}

namespace {

// A number or a numeric string as int64 (ids, sizes), none otherwise.
std::optional<int64_t> intOf(od::value& v) {
  od::json_type type;
  if (v.type().get(type)) return std::nullopt;
  if (type == od::json_type::number) {
    int64_t i;
    if (!v.get_int64().get(i)) return i;
    double d;
    if (!v.get_double().get(d) && d >= -9.2e18 && d <= 9.2e18) return static_cast<int64_t>(d);
    return std::nullopt;
  }
  if (type == od::json_type::string) {
    std::string_view s;
    if (v.get_string().get(s)) return std::nullopt;
    char* end = nullptr;
    const std::string text(s);
    const long long i = std::strtoll(text.c_str(), &end, 10);
    if (end != text.c_str() && *end == '\0') return i;
  }
  return std::nullopt;
}

std::optional<int64_t> linkOf(od::value& v) {
  std::string_view raw;
  od::json_type type;
  if (v.type().get(type)) return std::nullopt;
  if (type == od::json_type::string) {
    if (v.get_string().get(raw)) return std::nullopt;
  } else if (type == od::json_type::number) {
    raw = v.raw_json_token();
  } else {
    return std::nullopt;
  }
  const int64_t k = linkKey(raw);
  return k < 0 ? std::nullopt : std::optional<int64_t>(k);
}

std::optional<int64_t> timeOf(od::value& v) {
  od::json_type type;
  if (v.type().get(type)) return std::nullopt;
  if (type == od::json_type::number) return microsToNs(v.raw_json_token());
  if (type == od::json_type::string) {
    std::string_view s;
    if (v.get_string().get(s)) return std::nullopt;
    return microsToNs(s);
  }
  return std::nullopt;
}

}  // namespace

struct ChromeEventParser::Impl {
  od::parser parser;
};

ChromeEventParser::ChromeEventParser() : impl_(std::make_unique<Impl>()) {}
ChromeEventParser::~ChromeEventParser() = default;

Status ChromeEventParser::parse(const char* text, size_t size, int64_t offset, const std::string& path,
                                TraceModel& model) {
  auto bad = [&](simdjson::error_code code) {
    return invalidArgument(path + ": byte " + std::to_string(offset) + ": malformed event (" +
                           simdjson::error_message(code) + ")");
  };
  od::document doc;
  if (auto err = impl_->parser.iterate(text, size, size + JsonEventStream::kPadding).get(doc)) return bad(err);
  od::object obj;
  if (auto err = doc.get_object().get(obj)) return bad(err);
  EventFields e;
  for (auto field : obj) {
    std::string_view key;
    if (auto err = field.unescaped_key().get(key)) return bad(err);
    od::value v;
    if (auto err = field.value().get(v)) return bad(err);
    if (key == "ph") {
      if (auto err = v.get_string().get(e.ph)) return bad(err);
    } else if (key == "cat") {
      if (v.get_string().get(e.cat)) {}
    } else if (key == "name") {
      if (v.get_string().get(e.name)) {}
    } else if (key == "ts") {
      e.ts_ns = timeOf(v);
    } else if (key == "dur") {
      e.dur_ns = timeOf(v);
    } else if (key == "pid" || key == "tid") {
      const bool is_pid = key == "pid";
      od::json_type type;
      if (auto err = v.type().get(type)) return bad(err);
      std::optional<int64_t> n;
      if (type == od::json_type::number) n = intOf(v);
      if (n) {
        (is_pid ? e.pid : e.tid) = *n;
      } else {
        std::string_view s;
        if (type == od::json_type::string) {
          if (v.get_string().get(s)) {}
        } else if (type == od::json_type::number) {
          s = v.raw_json_token();
        }
        (is_pid ? e.pid_text : e.tid_text) = s;
        (is_pid ? e.pid_is_number : e.tid_is_number) = false;
      }
    } else if (key == "id") {
      od::json_type type;
      if (auto err = v.type().get(type)) return bad(err);
      if (type == od::json_type::string) {
        if (v.get_string().get(e.id)) {}
      } else {
        e.id = v.raw_json_token();
        while (!e.id.empty() && (e.id.back() == ' ' || e.id.back() == '\n' || e.id.back() == ',')) e.id.remove_suffix(1);
      }
    } else if (key == "bp") {
      if (v.get_string().get(e.bp)) {}
    } else if (key == "args") {
      od::object args;
      if (v.get_object().get(args)) continue;  // args that are not an object carry nothing we read
      for (auto a : args) {
        std::string_view k;
        if (auto err = a.unescaped_key().get(k)) return bad(err);
        od::value av;
        if (auto err = a.value().get(av)) return bad(err);
        od::json_type type;
        if (auto err = av.type().get(type)) return bad(err);
        if (k == "Input Dims" || k == "Input type") {
          const bool dims = k == "Input Dims";
          std::string_view& out = dims ? e.input_dims : e.input_types;
          if (type == od::json_type::array) {
            od::array arr;
            if (auto err = av.get_array().get(arr)) return bad(err);
            if (auto err = arr.raw_json().get(out)) return bad(err);
            (dims ? e.dims_are_json : e.types_are_json) = true;
          } else if (type == od::json_type::string) {
            if (av.get_string().get(out)) {}
          }
        } else if (k == "Sequence number") {
          e.seq = intOf(av);
        } else if (k == "correlation") {
          e.correlation = linkOf(av);
        } else if (k == "connection_id") {
          e.connection = linkOf(av);
        } else if (k == "External id") {
          e.external = intOf(av);
        } else if (k == "group") {
          if (av.get_string().get(e.group)) {}
        } else if (k == "correlation_id") {
          e.queue_correlation = linkOf(av);
        } else if (k == "device") {
          e.device = intOf(av);
        } else if (k == "stream") {
          e.stream = intOf(av);
        } else if (k == "Physic Stream Id") {
          e.physic_stream = intOf(av);
        } else if (k == "Device Type") {
          e.device_type = intOf(av);
        } else if (k == "Device Id") {
          e.device_id = intOf(av);
        } else if (k == "Total Allocated") {
          e.total_allocated = intOf(av);
        } else if (k == "Total Reserved") {
          e.total_reserved = intOf(av);
        } else if (k == "allocated") {
          e.allocated = intOf(av);
        } else if (k == "reserved") {
          e.reserved = intOf(av);
        } else if (k == "bytes") {
          e.bytes = intOf(av);
        } else if (k == "count") {
          e.count = intOf(av);
        } else if (k == "Task Type") {
          if (av.get_string().get(e.task_type)) {}
        } else if (k == "data_type") {
          if (av.get_string().get(e.data_type)) {}
        } else if (k == "name") {
          if (av.get_string().get(e.arg_name)) {}
        }
      }
    }
  }
  if (e.ph.empty()) {
    model.skip("events without a phase (ph)");
    return Status::ok();
  }
  model.addEvent(e);
  return Status::ok();
}

}  // namespace npuscope::import
