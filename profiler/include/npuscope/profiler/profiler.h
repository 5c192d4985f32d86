// npuscope_profiler: RecordFunction-based per-op recording and the recording session.
// Filled by the recording issue; this header names the component.
#pragma once
namespace npuscope::profiler {
const char* componentName();
}
