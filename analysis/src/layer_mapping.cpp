#include "npuscope/analysis/layer_mapping.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <unordered_map>

namespace npuscope::compare {
namespace {

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t at = 0;
  while (true) {
    const size_t next = s.find(sep, at);
    out.emplace_back(s.substr(at, next == std::string_view::npos ? std::string_view::npos : next - at));
    if (next == std::string_view::npos) return out;
    at = next + 1;
  }
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// A YAML scalar as written: quotes removed; a comment after it dropped.
std::string scalar(std::string_view s) {
  s = trim(s);
  if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front()) {
    return std::string(s.substr(1, s.size() - 2));
  }
  return std::string(s);
}

// The text before a comment (a '#' at the start or after a blank, outside quotes).
std::string_view uncomment(std::string_view line) {
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) {
      return line.substr(0, i);
    }
  }
  return line;
}

// "key: value" split at the first ": " (or a trailing ':') outside quotes; false without one.
bool keyValue(std::string_view s, std::string* key, std::string_view* value) {
  char quote = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == ':' && (i + 1 == s.size() || s[i + 1] == ' ' || s[i + 1] == '\t')) {
      *key = scalar(s.substr(0, i));
      *value = trim(s.substr(i + 1));
      return !key->empty();
    }
  }
  return false;
}

Status addRule(LayerMapping* m, const std::string& cls, const std::string& key, std::string value,
               const std::string& where) {
  const size_t paren = value.find('(');
  if (paren != std::string::npos) value = std::string(trim(std::string_view(value).substr(0, paren)));
  if (value.empty()) return invalidArgument(where + ": '" + key + "' has no golden name (expected `" + key + ": name`)");
  LayerMapping::Rule r{split(key, '.'), split(value, '.')};
  for (const auto* segs : {&r.from, &r.to}) {
    for (const std::string& s : *segs) {
      if (s.empty()) return invalidArgument(where + ": '" + key + ": " + value + "' has an empty name between dots");
    }
  }
  m->by_class[cls == "Cell" ? "TopLayer" : cls].push_back(std::move(r));
  return Status::ok();
}

// ---- the two sides' scope trees ----------------------------------------------------------------

struct Item {
  std::vector<std::string> scope;  // path from the root
  std::string type;                // a module's class, an API's name
  std::string state;               // forward | backward
  bool module = false;
};

// The scope of a module entry `Module.a.b.Cls.forward.0` (or Cell.): path a.b, class Cls.
std::optional<Item> moduleItem(const std::vector<std::string>& parts) {
  if (parts.size() < 5 || (parts[0] != "Module" && parts[0] != "Cell")) return std::nullopt;
  const std::string& state = parts[parts.size() - 2];
  if (state != "forward" && state != "backward") return std::nullopt;
  Item it;
  it.module = true;
  it.state = state;
  it.type = parts[parts.size() - 3];
  it.scope.assign(parts.begin() + 1, parts.end() - 3);
  return it;
}

std::optional<Item> parseItem(const DumpEntryRow& e) {
  const std::vector<std::string> parts = split(e.name, '.');
  if (parts.size() < 4) return std::nullopt;
  if (parts[0] == "Module" || parts[0] == "Cell") return moduleItem(parts);
  const std::string& state = parts.back();
  if (state != "forward" && state != "backward") return std::nullopt;
  Item it;
  it.state = state;
  it.type = parts[parts.size() - 3];
  if (!e.parent.empty()) {
    if (auto parent = moduleItem(split(e.parent, '.'))) it.scope = parent->scope;
  }
  it.scope.push_back(it.type);
  return it;
}

struct Node {
  std::string type;
  std::map<std::string, std::unique_ptr<Node>> children;
  std::map<std::string, std::vector<std::string>> items;  // state -> entries, in dump order
  const Node* find(const std::string& name) const {
    const auto it = children.find(name);
    return it == children.end() ? nullptr : it->second.get();
  }
  Node* child(const std::string& name) {
    auto it = children.find(name);
    if (it != children.end()) return it->second.get();
    auto n = std::make_unique<Node>();
    n->type = name;  // a level no entry names keeps its attribute name
    return (children[name] = std::move(n)).get();
  }
};

struct Tree {
  Node root;
  std::unordered_map<std::string, std::pair<Node*, size_t>> where;  // entry -> its node, its index there
  std::unordered_map<std::string, Item> items;

  explicit Tree(const std::vector<DumpEntryRow>& entries) {
    root.type = "TopLayer";
    for (const DumpEntryRow& e : entries) {
      if (auto it = parseItem(e)) items.emplace(e.name, std::move(*it));
    }
    // A backward entry sits where its forward twin does (its module may be named differently).
    for (auto& [name, it] : items) {
      if (it.state != "backward") continue;
      std::string twin = name;
      const size_t at = it.module ? twin.rfind(".backward.") : twin.rfind(".backward");
      if (at == std::string::npos) continue;
      twin.replace(at, 9, ".forward");
      const auto f = items.find(twin);
      if (f != items.end()) it.scope = f->second.scope;
    }
    for (const DumpEntryRow& e : entries) {
      const auto f = items.find(e.name);
      if (f == items.end() || where.count(e.name)) continue;
      Node* n = &root;
      for (const std::string& s : f->second.scope) n = n->child(s);
      if (f->second.module || n->children.empty()) n->type = f->second.type;
      auto& list = n->items[f->second.state];
      where.emplace(e.name, std::make_pair(n, list.size()));
      list.push_back(e.name);
    }
  }
};

// A's scope rewritten into B's terms, walking A's tree for each parent's class.
std::vector<std::string> convert(const std::vector<std::string>& scope, const Tree& a, const LayerMapping& m) {
  std::vector<std::string> out;
  const Node* cur = &a.root;
  size_t i = 0;
  while (i < scope.size()) {
    const LayerMapping::Rule* hit = nullptr;
    const auto rules = cur ? m.by_class.find(cur->type) : m.by_class.end();
    if (rules != m.by_class.end()) {
      for (const LayerMapping::Rule& r : rules->second) {
        if (i + r.from.size() <= scope.size() && std::equal(r.from.begin(), r.from.end(), scope.begin() + i)) {
          hit = &r;
          break;
        }
      }
    }
    const size_t n = hit ? hit->from.size() : 1;
    if (hit) {
      out.insert(out.end(), hit->to.begin(), hit->to.end());
    } else {
      out.push_back(scope[i]);
    }
    for (size_t k = 0; k < n && cur; ++k) cur = cur->find(scope[i + k]);
    i += n;
  }
  return out;
}

}  // namespace

StatusOr<LayerMapping> parseLayerMapping(std::string_view text, const std::string& file) {
  LayerMapping m;
  std::string cls;
  size_t line_no = 0;
  for (const std::string& raw : split(text, '\n')) {
    ++line_no;
    const std::string where = file + ": line " + std::to_string(line_no);
    const std::string_view line = uncomment(raw);
    if (trim(line).empty() || trim(line) == "---" || trim(line) == "{}") continue;  // {}: an empty mapping
    const bool indented = line.front() == ' ' || line.front() == '\t';
    std::string key;
    std::string_view value;
    if (!keyValue(trim(line), &key, &value)) {
      return invalidArgument(where + ": expected `Class:` or an indented `name: golden_name` (msprobe's layer_mapping.yaml)");
    }
    if (!indented) {
      cls = key;
      if (value.empty()) continue;
      // Flow style: Class: {a: b, c: d}
      if (value.front() != '{' || value.back() != '}') {
        return invalidArgument(where + ": '" + key + "' holds no mapping (expected `" + key +
                               ":` and indented `name: golden_name` lines)");
      }
      for (const std::string& pair : split(value.substr(1, value.size() - 2), ',')) {
        if (trim(pair).empty()) continue;
        std::string k;
        std::string_view v;
        if (!keyValue(trim(pair), &k, &v)) return invalidArgument(where + ": '" + pair + "' is not `name: golden_name`");
        RETURN_IF_ERROR(addRule(&m, cls, k, scalar(v), where));
      }
      cls.clear();
      continue;
    }
    if (cls.empty()) return invalidArgument(where + ": '" + key + "' is outside any `Class:` key");
    RETURN_IF_ERROR(addRule(&m, cls, key, scalar(value), where));
  }
  for (auto& [c, rules] : m.by_class) {
    std::stable_sort(rules.begin(), rules.end(),
                     [](const LayerMapping::Rule& x, const LayerMapping::Rule& y) { return x.from.size() > y.from.size(); });
  }
  return m;
}

std::map<std::string, std::string> mapEntries(const std::vector<DumpEntryRow>& a, const std::vector<DumpEntryRow>& b,
                                              const LayerMapping& mapping) {
  const Tree ta(a), tb(b);
  std::map<std::string, std::string> out;
  for (const auto& [name, place] : ta.where) {
    const Item& it = ta.items.at(name);
    const Node* n = &tb.root;
    for (const std::string& s : convert(it.scope, ta, mapping)) {
      if (!(n = n->find(s))) break;
    }
    std::string partner;
    if (n) {
      const auto list = n->items.find(it.state);
      if (list != n->items.end() && place.second < list->second.size()) partner = list->second[place.second];
    }
    out.emplace(name, partner);
  }
  return out;
}

}  // namespace npuscope::compare
