#include "chrome_parser.h"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <functional>

#include "json_stream.h"
#include "text.h"
#include "trace_model.h"

namespace npuscope::import {

namespace od = simdjson::ondemand;

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
    int64_t i = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), i);
    if (ec == std::errc() && end == s.data() + s.size() && !s.empty()) return i;
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

// A string value as a view that outlives the parser's next document: into the event's own text
// when the string has no escapes (nearly all), else unescaped and copied into `arena`.
simdjson::error_code stringOf(od::value& v, std::string_view& out, StringArena& arena) {
  std::string_view raw = v.raw_json_token();
  while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\n' || raw.back() == '\r' || raw.back() == '\t')) {
    raw.remove_suffix(1);
  }
  if (raw.size() >= 2 && raw.front() == '"' && raw.back() == '"' &&
      std::memchr(raw.data(), '\\', raw.size()) == nullptr) {
    out = raw.substr(1, raw.size() - 2);
    return simdjson::SUCCESS;
  }
  std::string_view s;
  if (auto err = v.get_string().get(s)) return err;
  out = arena.copy(s);
  return simdjson::SUCCESS;
}

// A field's key as written, without a copy (keys with escapes, which no trace writes, unescaped).
// Keys are short: one loop finds the closing quote or a backslash before it (two memchr calls per
// key showed in profiles of real traces).
simdjson::error_code keyOf(od::field& f, const char* text_end, std::string_view& out) {
  const char* k = f.key().raw();
  for (const char* p = k; p < text_end; ++p) {
    if (*p == '"') {
      out = std::string_view(k, static_cast<size_t>(p - k));
      return simdjson::SUCCESS;
    }
    if (*p == '\\') break;
  }
  return f.unescaped_key().get(out);
}

}  // namespace

std::string_view StringArena::copy(std::string_view s) {
  if (s.empty()) return {};
  if (blocks_.empty() || used_ + s.size() > capacity_) {
    capacity_ = std::max(kBlock, s.size());
    blocks_.push_back(std::make_unique<char[]>(capacity_));
    used_ = 0;
  }
  char* at = blocks_.back().get() + used_;
  std::memcpy(at, s.data(), s.size());
  used_ += s.size();
  return {at, s.size()};
}

void StringArena::clear() {
  if (blocks_.size() > 1) blocks_.erase(blocks_.begin(), blocks_.end() - 1);
  used_ = 0;
}

struct ChromeEventParser::Impl {
  od::parser parser;
  StringArena scratch;  // parse()'s escaped strings, kept until the next call
};

ChromeEventParser::ChromeEventParser() : impl_(std::make_unique<Impl>()) {}
ChromeEventParser::~ChromeEventParser() = default;

namespace {
simdjson::error_code fieldsOf(od::object& obj, const char* text_end, EventFields* out, StringArena& arena);
}  // namespace

Status ChromeEventParser::parse(const char* text, size_t size, int64_t offset, const std::string& path,
                                TraceModel& model) {
  impl_->scratch.clear();
  EventFields e;
  RETURN_IF_ERROR(parseFields(text, size, offset, path, &e, impl_->scratch));
  addParsedEvent(e, model);
  return Status::ok();
}

void addParsedEvent(const EventFields& e, TraceModel& model) {
  if (e.ph.empty()) {
    model.skip("events without a phase (ph)");
    return;
  }
  model.addEvent(e);
}

Status ChromeEventParser::parseFields(const char* text, size_t size, int64_t offset, const std::string& path,
                                      EventFields* out, StringArena& arena) {
  od::document doc;
  od::object obj;
  simdjson::error_code err = impl_->parser.iterate(text, size, size + JsonEventStream::kPadding).get(doc);
  if (!err) err = doc.get_object().get(obj);
  if (!err) err = fieldsOf(obj, text + size, out, arena);
  if (!err) return Status::ok();
  return invalidArgument(path + ": byte " + std::to_string(offset) + ": malformed event (" +
                         simdjson::error_message(err) + ")");
}

size_t ChromeEventParser::parseMany(const char* text, size_t size, const uint32_t* starts, size_t count,
                                    std::vector<EventFields>* out, StringArena& arena) {
  // One stage 1 over the whole text (a single batch: no thread of simdjson's own), then each
  // document as parseFields reads one. A document that does not start where the caller's event
  // does, or fails, ends it: the caller parses from there one event at a time.
  od::document_stream docs;
  if (impl_->parser.iterate_many(text, size, size + 1).get(docs)) return 0;
  size_t n = 0;
  for (auto it = docs.begin(); it != docs.end() && n < count; ++it, ++n) {
    if (it.current_index() != starts[n]) break;
    od::document_reference doc;
    od::object obj;
    if ((*it).get(doc) || doc.get_object().get(obj)) break;
    if (fieldsOf(obj, text + size, &out->emplace_back(), arena)) {
      out->pop_back();  // the failed document's fields
      break;
    }
  }
  return n;
}

namespace {

// An event's fields from its object; `text_end` bounds the scan for a key's closing quote.
simdjson::error_code fieldsOf(od::object& obj, const char* text_end, EventFields* out, StringArena& arena) {
  auto bad = [](simdjson::error_code code) { return code; };
  EventFields& e = *out;
  for (auto field_or : obj) {
    od::field field;
    if (auto err = std::move(field_or).get(field)) return bad(err);
    std::string_view key;
    if (auto err = keyOf(field, text_end, key)) return bad(err);
    od::value& v = field.value();
    if (is(key, "ph")) {
      if (auto err = stringOf(v, e.ph, arena)) return bad(err);
    } else if (is(key, "cat")) {
      if (stringOf(v, e.cat, arena)) {}
    } else if (is(key, "name")) {
      if (stringOf(v, e.name, arena)) {}
    } else if (is(key, "ts")) {
      e.ts_ns = timeOf(v);
    } else if (is(key, "dur")) {
      e.dur_ns = timeOf(v);
    } else if (is(key, "pid") || is(key, "tid")) {
      const bool is_pid = is(key, "pid");
      od::json_type type;
      if (auto err = v.type().get(type)) return bad(err);
      std::optional<int64_t> n;
      if (type == od::json_type::number) n = intOf(v);
      if (n) {
        (is_pid ? e.pid : e.tid) = *n;
      } else {
        std::string_view s;
        if (type == od::json_type::string) {
          if (stringOf(v, s, arena)) {}
        } else if (type == od::json_type::number) {
          s = v.raw_json_token();
        }
        (is_pid ? e.pid_text : e.tid_text) = s;
        (is_pid ? e.pid_is_number : e.tid_is_number) = false;
      }
    } else if (is(key, "id")) {
      od::json_type type;
      if (auto err = v.type().get(type)) return bad(err);
      if (type == od::json_type::string) {
        if (stringOf(v, e.id, arena)) {}
      } else {
        e.id = v.raw_json_token();
        while (!e.id.empty() && (e.id.back() == ' ' || e.id.back() == '\n' || e.id.back() == ',')) e.id.remove_suffix(1);
      }
    } else if (is(key, "bp")) {
      if (stringOf(v, e.bp, arena)) {}
    } else if (is(key, "args")) {
      od::object args;
      if (v.get_object().get(args)) continue;  // args that are not an object carry nothing we read
      for (auto a_or : args) {
        od::field a;
        if (auto err = std::move(a_or).get(a)) return bad(err);
        std::string_view k;
        if (auto err = keyOf(a, text_end, k)) return bad(err);
        od::value& av = a.value();
        od::json_type type;
        if (auto err = av.type().get(type)) return bad(err);
        if (is(k, "Input Dims") || is(k, "Input type")) {
          const bool dims = is(k, "Input Dims");
          std::string_view& out = dims ? e.input_dims : e.input_types;
          if (type == od::json_type::array) {
            od::array arr;
            if (auto err = av.get_array().get(arr)) return bad(err);
            if (auto err = arr.raw_json().get(out)) return bad(err);
            (dims ? e.dims_are_json : e.types_are_json) = true;
          } else if (type == od::json_type::string) {
            if (stringOf(av, out, arena)) {}
          }
        } else if (is(k, "Sequence number")) {
          e.seq = intOf(av);
        } else if (is(k, "correlation")) {
          e.correlation = linkOf(av);
        } else if (is(k, "connection_id")) {
          e.connection = linkOf(av);
        } else if (is(k, "External id")) {
          e.external = intOf(av);
        } else if (is(k, "group")) {
          if (stringOf(av, e.group, arena)) {}
        } else if (is(k, "correlation_id")) {
          e.queue_correlation = linkOf(av);
        } else if (is(k, "device")) {
          e.device = intOf(av);
        } else if (is(k, "stream")) {
          e.stream = intOf(av);
        } else if (is(k, "Physic Stream Id")) {
          e.physic_stream = intOf(av);
        } else if (is(k, "Device Type")) {
          e.device_type = intOf(av);
        } else if (is(k, "Device Id")) {
          e.device_id = intOf(av);
        } else if (is(k, "Total Allocated")) {
          e.total_allocated = intOf(av);
        } else if (is(k, "Total Reserved")) {
          e.total_reserved = intOf(av);
        } else if (is(k, "allocated")) {
          e.allocated = intOf(av);
        } else if (is(k, "reserved")) {
          e.reserved = intOf(av);
        } else if (is(k, "bytes")) {
          e.bytes = intOf(av);
        } else if (is(k, "count")) {
          e.count = intOf(av);
        } else if (is(k, "Task Type")) {
          if (stringOf(av, e.task_type, arena)) {}
        } else if (is(k, "data_type")) {
          if (stringOf(av, e.data_type, arena)) {}
        } else if (is(k, "name")) {
          if (stringOf(av, e.arg_name, arena)) {}
        }
      }
    }
  }
  return simdjson::SUCCESS;
}

}  // namespace

}  // namespace npuscope::import
