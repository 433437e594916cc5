#include "graph/sparse.h"

#include <cstdint>
#include <cstring>

#include "common/half.h"

namespace clgpu {
namespace {

std::vector<int> Ints(const TfLiteIntArray* a) {
  return a ? std::vector<int>(a->data, a->data + a->size) : std::vector<int>{};
}

// The format, read: levels in traversal order, each dense (an extent) or CSR (segments per
// position of the level above, then the indices they delimit).
struct Level {
  bool csr = false;
  int extent = 0;  // the expanded dimension the level walks
  std::vector<int> segments, indices;
};

struct Walk {
  int rank = 0;  // of the dense tensor
  std::vector<int> order, block_map, block_size;
  std::vector<Level> levels;
  std::vector<int64_t> strides;  // of the dense tensor
  const unsigned char* values = nullptr;
  bool half = false;
  size_t count = 0, next = 0;  // stored values, and the next one to place
  std::vector<float>* out = nullptr;
  std::vector<int> index;  // per level
};

float ValueAt(const Walk& w, size_t i) {
  if (w.half) {
    uint16_t h;
    std::memcpy(&h, w.values + 2 * i, 2);
    return HalfToFloat(h);
  }
  float f;
  std::memcpy(&f, w.values + 4 * i, 4);
  return f;
}

// Level `level` below position `pos` of the level above; false if the values run out.
bool Place(Walk& w, size_t level, int pos) {
  if (level == w.levels.size()) {
    if (w.next >= w.count) return false;
    // Dense coordinates: the block levels refine the blocked ones (TFLite's order).
    std::vector<int64_t> coord(w.rank, 0);
    for (int i = 0; i < w.rank; ++i) coord[w.order[i]] = w.index[i];
    for (size_t i = w.rank; i < w.levels.size(); ++i) {
      const int b = w.order[i] - w.rank;
      const int d = w.block_map[b];
      coord[d] = coord[d] * w.block_size[b] + w.index[i];
    }
    int64_t flat = 0;
    for (int d = 0; d < w.rank; ++d) flat += coord[d] * w.strides[d];
    (*w.out)[flat] = ValueAt(w, w.next++);
    return true;
  }
  const Level& l = w.levels[level];
  if (!l.csr) {
    for (int i = 0; i < l.extent; ++i) {
      w.index[level] = i;
      if (!Place(w, level + 1, pos * l.extent + i)) return false;
    }
    return true;
  }
  for (int k = l.segments[pos]; k < l.segments[pos + 1]; ++k) {
    w.index[level] = l.indices[k];
    if (!Place(w, level + 1, k)) return false;
  }
  return true;
}

}  // namespace

std::string DensifyConstant(const TfLiteTensor& t, std::vector<float>* dense) {
  const TfLiteSparsity* sp = t.sparsity;
  if (!sp) return "the tensor is not sparse";
  if (t.type != kTfLiteFloat32 && t.type != kTfLiteFloat16) return "sparse values are not float";
  if (!t.data.raw_const || !t.dims) return "the sparse tensor has no data";
  Walk w;
  w.rank = t.dims->size;
  w.order = Ints(sp->traversal_order);
  w.block_map = Ints(sp->block_map);
  const int k = static_cast<int>(w.block_map.size()), levels = w.rank + k;
  if (w.rank < 1 || static_cast<int>(w.order.size()) != levels || sp->dim_metadata_size != levels ||
      !sp->dim_metadata)
    return "sparsity metadata does not match the tensor's rank";
  // The first `rank` levels walk the dense (blocked) axes in some order, the rest the blocks in
  // order; blocked axes ascend (TFLite pairs them with the blocks in that order).
  std::vector<bool> seen(w.rank, false);
  for (int i = 0; i < w.rank; ++i) {
    if (w.order[i] < 0 || w.order[i] >= w.rank || seen[w.order[i]])
      return "traversal order is not a permutation of the axes";
    seen[w.order[i]] = true;
  }
  for (int b = 0; b < k; ++b) {
    if (w.order[w.rank + b] != w.rank + b) return "block levels out of order";
    if (w.block_map[b] < 0 || w.block_map[b] >= w.rank ||
        (b && w.block_map[b] <= w.block_map[b - 1]))
      return "block map is not ascending axes";
  }
  std::vector<int> blocked(t.dims->data, t.dims->data + w.rank);
  int64_t total = 1;
  for (int d : blocked) {
    if (d < 0) return "negative extent";
    total *= d;
    if (total > INT32_MAX) return "sparse tensor too large";
  }
  for (int b = 0; b < k; ++b) {
    const int size = sp->dim_metadata[w.rank + b].dense_size;
    const int d = w.block_map[b];
    if (size < 1 || blocked[d] % size) return "block size does not divide its axis";
    w.block_size.push_back(size);
    blocked[d] /= size;
  }
  // Each level: its extent, and for CSR arrays that stay inside the level above and below.
  int64_t positions = 1;  // of the level above
  for (int i = 0; i < levels; ++i) {
    const TfLiteDimensionMetadata& md = sp->dim_metadata[i];
    Level l;
    l.extent = i < w.rank ? blocked[w.order[i]] : w.block_size[i - w.rank];
    if (md.format == kTfLiteDimDense) {
      if (md.dense_size != l.extent) return "a dense level's size does not match its axis";
      positions *= l.extent;
    } else if (md.format == kTfLiteDimSparseCSR) {
      l.csr = true;
      l.segments = Ints(md.array_segments);
      l.indices = Ints(md.array_indices);
      if (static_cast<int64_t>(l.segments.size()) != positions + 1 || l.segments[0] != 0)
        return "CSR segments do not match the level above";
      for (size_t s = 1; s < l.segments.size(); ++s)
        if (l.segments[s] < l.segments[s - 1]) return "CSR segments decrease";
      if (static_cast<size_t>(l.segments.back()) > l.indices.size())
        return "CSR segments run past the indices";
      for (int x : l.indices)
        if (x < 0 || x >= l.extent) return "a CSR index is out of range";
      positions = l.segments.back();
    } else {
      return "unknown level format " + std::to_string(static_cast<int>(md.format));
    }
    if (positions > total) return "sparsity metadata describes more than the tensor";
    w.levels.push_back(std::move(l));
  }
  w.strides.assign(w.rank, 1);
  for (int d = w.rank - 1; d > 0; --d) w.strides[d - 1] = w.strides[d] * t.dims->data[d];
  w.values = static_cast<const unsigned char*>(t.data.raw_const);
  w.half = t.type == kTfLiteFloat16;
  w.count = t.bytes / (w.half ? 2 : 4);
  dense->assign(static_cast<size_t>(total), 0.0f);
  w.out = dense;
  w.index.assign(levels, 0);
  if (!Place(w, 0, 0)) return "the metadata addresses more values than the tensor stores";
  return "";
}

}  // namespace clgpu
