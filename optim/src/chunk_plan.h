// How a pass over a combined buffer is cut into work items (library internal).
//
// A plan splits the real elements of every tensor into chunks of at most kChunkElements, never
// spanning two tensors and never touching padding. For reductions each tensor is also cut into
// rows of a fixed length (the whole tensor for per-tensor norms; numel/size(0) for AdamP's
// channel view): a chunk holds either whole rows or a piece of one row, and owns one partial-sum
// slot ("stat") per row it touches. Adding a row's stats in slot order gives a result that does
// not depend on how many threads ran the chunks.
#pragma once

#include <cstdint>
#include <vector>

namespace npuscope::optim::detail {

// Large enough to amortise the per-chunk bookkeeping, small enough (256 KiB of fp32) that the
// chunks of a 10M-element buffer balance well over the threads.
constexpr int64_t kChunkElements = int64_t{1} << 16;
// Below this many elements a pass runs on the calling thread: waking the pool costs more.
constexpr int64_t kMinParallelElements = int64_t{1} << 15;

struct Chunk {
  int64_t begin;      // offset of the first element in the flat buffer
  int64_t end;        // one past the last
  int64_t rowLen;     // row length of this chunk's tensor in this plan
  int64_t firstStat;  // stat slot of the row containing `begin`; following rows take the next slots
  int64_t firstRow;   // index of the row containing `begin`; following rows are consecutive
  int32_t tensor;     // index of the tensor in the layout
};

struct ChunkPlan {
  std::vector<Chunk> chunks;
  std::vector<int64_t> tensorFirstRow;  // per tensor, its first row; one extra entry at the end
  std::vector<int64_t> rowStatBegin;    // per row, its first stat slot; one extra entry at the end
  int64_t realNumel = 0;

  int64_t numRows() const { return static_cast<int64_t>(rowStatBegin.size()) - 1; }
  int64_t numStats() const { return rowStatBegin.back(); }
  // How many chunks one parallel task should take at least, so that small passes stay serial.
  int64_t grain() const;
};

// `rowLens[t]` must divide `numels[t]`; a tensor with no elements gets one empty row.
ChunkPlan buildChunkPlan(const std::vector<int64_t>& offsets, const std::vector<int64_t>& numels,
                         const std::vector<int64_t>& rowLens, int64_t chunkElements = kChunkElements);

// rowTotals[r * width + j] = sum of partials[s * width + j] over the stats s of row r, in order.
void reduceRows(const ChunkPlan& plan, const double* partials, int width, double* rowTotals);

}  // namespace npuscope::optim::detail
