// npuscope_dumper: ACL_DUMP_DATA op dumps, overflow localisation and run comparison.
// Filled by the dumper issue; this header names the component.
#pragma once
namespace npuscope::dumper {
const char* componentName();
}
