// Overflow events in words, for the CLI report and the GUI.
#pragma once

#include <string>

#include "npuscope/store/trace_reader.h"

namespace npuscope {

// A first_op overflow event (docs/schema.md) in one line: the op, where it ran, what its result
// held and what went in, e.g. "aten::mul #1234 (backward): float16 result of 4096, 12 overflowed,
// 0 NaN (max finite |x| 7.1e+04 before rounding); inputs finite, max |x| 271". Other events: their
// op name and detail as recorded.
std::string describeOverflowEvent(const OverflowEventRow& e);
// The same without the op (for a table that shows the op in a column of its own): "backward:
// float16 result of 4096, ..."; other events: their detail as recorded.
std::string describeOverflowResult(const OverflowEventRow& e);

}  // namespace npuscope
