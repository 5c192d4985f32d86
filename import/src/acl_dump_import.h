// importPath's part for Ascend ACL dump folders (acl_dump.h): each device's files as a run; and
// the end every import shares.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "npuscope/import/acl_dump.h"
#include "npuscope/import/import.h"
#include "npuscope/store/trace_writer.h"

namespace npuscope::import {

// The writer every import opens (once it has read something to write): an 8 MB page cache, the
// import's memory being its events (8 MB writes as fast here as more); `strings` shared with the
// reading when given.
StatusOr<std::unique_ptr<TraceWriter>> openImportWriter(const std::string& db, const StringTable* strings = nullptr);

// The end of every import: the writer flushed and closed; a last checkpoint that failed for
// lack of room becomes the summary's warning (the runs are in the file's WAL).
StatusOr<Summary> finishImport(TraceWriter& writer, Summary summary);

// Writes one run per device of `files` (aclDumpFiles of `root`) into `db`. A file that does not
// decode fails the import with its one-line reason (the run it was in is marked failed).
StatusOr<Summary> importAclDump(const std::string& root, const std::vector<AclDumpFile>& files, const std::string& db,
                                const Options& options);

}  // namespace npuscope::import
