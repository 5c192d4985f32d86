#include "chunk_plan.h"

#include <algorithm>
#include <stdexcept>

namespace npuscope::optim::detail {

int64_t ChunkPlan::grain() const {
  const auto n = static_cast<int64_t>(chunks.size());
  if (realNumel <= kMinParallelElements) return std::max<int64_t>(n, 1);
  // Chunks hold up to kChunkElements each, so this many keep a task above the threshold.
  return std::max<int64_t>(1, n * kMinParallelElements / realNumel);
}

ChunkPlan buildChunkPlan(const std::vector<int64_t>& offsets, const std::vector<int64_t>& numels,
                         const std::vector<int64_t>& rowLens, int64_t chunkElements) {
  if (offsets.size() != numels.size() || numels.size() != rowLens.size() || chunkElements <= 0) {
    throw std::invalid_argument("buildChunkPlan: inconsistent arguments");
  }
  ChunkPlan plan;
  int64_t rows = 0;
  int64_t stats = 0;
  for (size_t t = 0; t < numels.size(); ++t) {
    const int64_t n = numels[t];
    const int64_t len = rowLens[t];
    const int64_t off = offsets[t];
    const auto tensor = static_cast<int32_t>(t);
    plan.tensorFirstRow.push_back(rows);
    plan.realNumel += n;
    if (n == 0) {  // one empty row, so every tensor has a result slot
      plan.rowStatBegin.push_back(stats++);
      ++rows;
      continue;
    }
    if (len <= 0 || n % len != 0) throw std::invalid_argument("buildChunkPlan: row length must divide numel");
    const int64_t nRows = n / len;
    if (len <= chunkElements) {
      const int64_t rowsPerChunk = chunkElements / len;
      for (int64_t r0 = 0; r0 < nRows; r0 += rowsPerChunk) {
        const int64_t r1 = std::min(nRows, r0 + rowsPerChunk);
        plan.chunks.push_back(Chunk{off + r0 * len, off + r1 * len, len, stats, rows + r0, tensor});
        for (int64_t r = r0; r < r1; ++r) plan.rowStatBegin.push_back(stats++);
      }
    } else {
      // Even pieces, so no piece is a sliver.
      const int64_t pieces = (len + chunkElements - 1) / chunkElements;
      const int64_t pieceLen = (len + pieces - 1) / pieces;
      for (int64_t r = 0; r < nRows; ++r) {
        plan.rowStatBegin.push_back(stats);
        for (int64_t b = 0; b < len; b += pieceLen) {
          plan.chunks.push_back(Chunk{off + r * len + b, off + r * len + std::min(len, b + pieceLen), len, stats++,
                                      rows + r, tensor});
        }
      }
    }
    rows += nRows;
  }
  plan.tensorFirstRow.push_back(rows);
  plan.rowStatBegin.push_back(stats);
  return plan;
}

void reduceRows(const ChunkPlan& plan, const double* partials, int width, double* rowTotals) {
  const int64_t rows = plan.numRows();
  for (int64_t r = 0; r < rows; ++r) {
    for (int j = 0; j < width; ++j) {
      double sum = 0.0;
      for (int64_t s = plan.rowStatBegin[r]; s < plan.rowStatBegin[r + 1]; ++s) sum += partials[s * width + j];
      rowTotals[r * width + j] = sum;
    }
  }
}

}  // namespace npuscope::optim::detail
