// msprobe's layer mapping: compare two dumps whose modules were renamed or regrouped (a model
// refactored between two runs, Megatron against its port, MindSpore cells against PyTorch
// modules), as msprobe compare's `-lm layer_mapping.yaml` does.
//
// Each side's entries become a tree of scopes: a module entry (`Module.a.b.Linear.forward.0`)
// sits at its path (a, b) with its class as the node's type; an API entry
// (`Functional.linear.0.forward`) at its module's path (dump_entries.parent, construct.json)
// plus its API name (a, b, linear); a backward entry at its forward twin's place. The mapping
// file's rules rewrite run A's paths into run B's, keyed by the class of the parent node on A's
// side:
//
//   TopLayer:                          # the root (msprobe's older files: Cell)
//     network_with_loss: module
//   ParallelAttention:
//     qkv_proj: query_key_value        # a renamed submodule
//     flash_attention_score: core_attention_flash.npu_fusion_attention   # an API, one level deeper
//   GPTModel:
//     language_model.embedding: embedding   # two levels of A collapsed into one of B
//
// A name with no rule keeps its name; the longest rule wins; anything from a value's first "("
// on is dropped. An entry of A then pairs with the entry of B at the rewritten path with the same
// direction (forward / backward) and the same position among that node's calls — call counters
// in the names are not compared. Entries that are no msprobe name (npuscope's own op dumps)
// pair by name.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "npuscope/store/status.h"
#include "npuscope/store/trace_reader.h"

namespace npuscope::compare {

struct LayerMapping {
  struct Rule {
    std::vector<std::string> from, to;  // path segments on A's side, and B's replacement
  };
  // A's parent class ("TopLayer" for the root) -> its rules, longest `from` first.
  std::map<std::string, std::vector<Rule>> by_class;
};

// Parses msprobe's layer_mapping.yaml: top-level `Class:` keys with indented `name: golden`
// pairs (or `Class: {name: golden, ...}`), comments and quotes as YAML has them. `file` names it
// in errors ("FILE: line N: ..."). Empty text: no rules (structure alone pairs the entries).
StatusOr<LayerMapping> parseLayerMapping(std::string_view text, const std::string& file);

// A's entries (one step's) -> their partners among B's (the same step's), by `mapping`; an entry
// without a partner maps to "". Entries whose names are not msprobe's are left out.
std::map<std::string, std::string> mapEntries(const std::vector<DumpEntryRow>& a, const std::vector<DumpEntryRow>& b,
                                              const LayerMapping& mapping);

}  // namespace npuscope::compare
