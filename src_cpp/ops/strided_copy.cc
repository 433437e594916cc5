#include "ops/strided_copy.h"

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "common/error.h"

namespace clgpu {
namespace {

// The map in flat input elements: output axis d adds c_d * strides[d] (the table axis adds
// table[c_d]) to base. Axes of extent 1 are dropped and neighbours that step through the input
// as one axis are merged, so a map is as few axes as it really has.
struct FlatMap {
  std::vector<int> dims;
  std::vector<int64_t> strides;
  int64_t base = 0;
  int table_axis = -1;
  std::vector<int64_t> table;
  int64_t total = 1;
};

FlatMap Flatten(const AxisMap& m) {
  const size_t in_rank = m.in.size();
  std::vector<int64_t> ist(in_rank, 1);
  for (size_t a = in_rank; a-- > 1;) ist[a - 1] = ist[a] * m.in[a];
  FlatMap f;
  const int table_src = m.table_axis >= 0 ? m.src[m.table_axis] : -1;
  for (size_t a = 0; a < in_rank; ++a)
    if (static_cast<int>(a) != table_src) f.base += int64_t(m.first[a]) * ist[a];
  for (size_t d = 0; d < m.out.size(); ++d) {
    const int n = m.out[d];
    f.total *= n;
    const bool is_table = static_cast<int>(d) == m.table_axis;
    if (n == 1) {
      if (is_table) f.base += int64_t(m.table[0]) * ist[table_src];
      continue;
    }
    const int64_t stride = m.src[d] < 0 || is_table ? 0 : int64_t(m.step[d]) * ist[m.src[d]];
    if (!is_table && !f.dims.empty() && static_cast<int>(f.dims.size()) - 1 != f.table_axis &&
        f.strides.back() == stride * n) {
      f.dims.back() *= n;  // the previous axis steps over whole runs of this one
      f.strides.back() = stride;
      continue;
    }
    if (is_table) {
      f.table_axis = static_cast<int>(f.dims.size());
      for (int v : m.table) f.table.push_back(int64_t(v) * ist[table_src]);
    }
    f.dims.push_back(n);
    f.strides.push_back(stride);
  }
  return f;
}

// A fixed map between staging buffers: one chunk of a StridedCopyOp.
class MapChunkOp : public StridedCopyOp {
 public:
  MapChunkOp(int node_index, AxisMap m, const char* name)
      : StridedCopyOp(node_index), map_(std::move(m)), name_(name) {}
  const char* type_name() const override { return name_; }
  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    if (in.size() != 1 || NumElements(in[0]) != NumElements(map_.in))
      throw Error(std::string(name_) + " chunk got an input box of another size");
    return {map_.out};
  }
  std::vector<AxisMap> Maps(const std::vector<Shape>&) const override { return {map_}; }

 private:
  AxisMap map_;
  const char* name_;
};

}  // namespace

std::string CheckAxisMap(const AxisMap& m) {
  const size_t in_rank = m.in.size(), out_rank = m.out.size();
  if (m.src.size() != out_rank || m.step.size() != out_rank || m.first.size() != in_rank)
    return "index map fields of mismatched lengths";
  if (NumElements(m.in) > INT_MAX || NumElements(m.out) > INT_MAX)
    return "tensor has more than 2^31 - 1 elements";
  if (NumElements(m.out) == 0) return "";
  std::vector<bool> walked(in_rank, false);
  for (size_t d = 0; d < out_rank; ++d) {
    const int a = m.src[d];
    if (a < 0) {
      if (m.out[d] != 1 || static_cast<int>(d) == m.table_axis)
        return "an output axis of extent above 1 reads no input axis";
      continue;
    }
    if (a >= static_cast<int>(in_rank) || walked[a]) return "index map walks an input axis twice";
    walked[a] = true;
    if (static_cast<int>(d) == m.table_axis) {
      if (m.table.size() != static_cast<size_t>(m.out[d])) return "index table of the wrong size";
      for (int v : m.table)
        if (v < 0 || v >= m.in[a]) return "index " + std::to_string(v) + " is out of range";
      continue;
    }
    const int64_t last = int64_t(m.first[a]) + int64_t(m.out[d] - 1) * m.step[d];
    if (m.first[a] < 0 || m.first[a] >= m.in[a] || last < 0 || last >= m.in[a])
      return "slice reads outside the input";
  }
  for (size_t a = 0; a < in_rank; ++a)
    if (!walked[a] && (m.first[a] < 0 || m.first[a] >= m.in[a]))
      return "slice reads outside the input";
  return "";
}

Box AxisMapInputBox(const AxisMap& m, const Box& out_box) {
  Box b;
  b.begin = m.first;
  b.size.assign(m.in.size(), 1);
  for (size_t d = 0; d < m.out.size(); ++d) {
    const int a = m.src[d];
    if (a < 0) continue;
    const int lo_i = out_box.begin[d], hi_i = out_box.begin[d] + out_box.size[d] - 1;
    if (static_cast<int>(d) == m.table_axis) {
      const auto [lo, hi] = std::minmax_element(m.table.begin() + lo_i, m.table.begin() + hi_i + 1);
      b.begin[a] = *lo;
      b.size[a] = *hi - *lo + 1;
      continue;
    }
    const int x = m.first[a] + lo_i * m.step[d], y = m.first[a] + hi_i * m.step[d];
    b.begin[a] = std::min(x, y);
    b.size[a] = std::abs(y - x) + 1;
  }
  return b;
}

AxisMap AxisMapChunk(const AxisMap& m, const Box& out_box) {
  const Box in_box = AxisMapInputBox(m, out_box);
  AxisMap c = m;
  c.in = in_box.size;
  c.out = out_box.size;
  c.table.clear();
  for (size_t a = 0; a < m.in.size(); ++a) c.first[a] = m.first[a] - in_box.begin[a];
  for (size_t d = 0; d < m.out.size(); ++d) {
    const int a = m.src[d];
    if (a < 0) continue;
    if (static_cast<int>(d) == m.table_axis) {
      for (int i = 0; i < out_box.size[d]; ++i)
        c.table.push_back(m.table[out_box.begin[d] + i] - in_box.begin[a]);
      c.first[a] = 0;
    } else {
      c.first[a] = m.first[a] + out_box.begin[d] * m.step[d] - in_box.begin[a];
    }
  }
  return c;
}

bool AxisMapFlatRange(const AxisMap& m, size_t* first) {
  const FlatMap f = Flatten(m);
  *first = f.total == 0 ? 0 : static_cast<size_t>(f.base);
  return f.total == 0 || f.dims.empty() ||
         (f.dims.size() == 1 && f.table_axis < 0 && f.strides[0] == 1);
}

bool StridedCopyOp::FlatRanges(const std::vector<Shape>& in, std::vector<size_t>* first) const {
  if (chained()) return false;  // its input is a chain's: one gather
  const std::vector<AxisMap> maps = Maps(in);
  first->assign(maps.size(), 0);
  for (size_t j = 0; j < maps.size(); ++j)
    if (!AxisMapFlatRange(maps[j], &(*first)[j])) return false;
  return true;
}

bool StridedCopyOp::IndexStageOf(const Shape& in, const Shape& out, IndexStage* stage) const {
  std::vector<AxisMap> maps;
  try {
    maps = Maps({in});
  } catch (const Error&) {
    return false;  // shapes the node does not take: no stage (the op's own check says why)
  }
  if (maps.size() != 1 || maps[0].table_axis >= 0 || NumElements(maps[0].out) != NumElements(out))
    return false;
  const FlatMap f = Flatten(maps[0]);
  *stage = IndexStage{};
  stage->out.assign(f.dims.begin(), f.dims.end());
  if (stage->out.empty()) stage->out = {1};
  for (int64_t st : f.strides) {
    if (st < INT_MIN || st > INT_MAX) return false;
    stage->coef.push_back(static_cast<int>(st));
  }
  if (stage->coef.empty()) stage->coef = {0};
  stage->off.assign(stage->out.size(), 0);
  stage->bound.assign(stage->out.size(), 0);
  stage->base = f.base;
  return true;
}

void StridedCopyOp::Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes,
                            const std::vector<Shape>& out_shapes, const std::vector<cl_mem>& in,
                            const std::vector<cl_mem>& out) {
  if (PrepareChain(ctx, out_shapes.at(0), in, out)) return;
  constexpr size_t kGroup = 64;
  const std::vector<AxisMap> maps = Maps(in_shapes);
  launches_.clear();
  meta_.clear();
  bool all_vec4 = true;
  for (size_t j = 0; j < maps.size(); ++j) {
    const FlatMap f = Flatten(maps[j]);
    if (f.total == 0) continue;
    const int rank = static_cast<int>(f.dims.size());
    // float4 units: the innermost axis is a unit-stride run and every offset a multiple of 4.
    bool vec = rank > 0 && f.table_axis != rank - 1 && f.strides.back() == 1 &&
               f.dims.back() % 4 == 0 && f.base % 4 == 0;
    for (int d = 0; vec && d < rank - 1; ++d) vec = f.strides[d] % 4 == 0;
    for (int64_t v : f.table) vec = vec && v % 4 == 0;
    all_vec4 = all_vec4 && vec;
    const int div = vec ? 4 : 1;
    std::vector<int> meta(f.dims.begin(), f.dims.end());
    if (vec) meta.back() /= 4;
    for (int64_t s : f.strides) meta.push_back(static_cast<int>(s / div));
    if (vec) meta.back() = 1;  // the innermost run, in units of 4
    if (meta.empty()) meta.push_back(0);
    meta_.push_back(UploadInts(ctx, meta));
    const cl_mem meta_mem = meta_.back().get();
    cl_mem table = meta_mem;  // any buffer when there is no table
    if (f.table_axis >= 0) {
      std::vector<int> t;
      for (int64_t v : f.table) t.push_back(static_cast<int>(v / div));
      meta_.push_back(UploadInts(ctx, t));
      table = meta_.back().get();
    }
    const int total = static_cast<int>(f.total / div), base = static_cast<int>(f.base / div);
    Launch l;
    l.name = vec ? "strided_copy4" : "strided_copy";
    l.kernel = CreateKernel(*ctx.GetProgram("strided_copy"), l.name);
    SetArgs(l.kernel, in[0], out[j], total, rank, base, meta_mem, table, f.table_axis);
    l.global[0] = RoundUp(static_cast<size_t>(total), kGroup);
    l.local[0] = kGroup;
    launches_.push_back(std::move(l));
  }
  algorithm_ = all_vec4 && !launches_.empty() ? "strided_copy4" : "strided_copy";
}

bool StridedCopyOp::GetChunkSpec(const std::vector<Shape>& in, ChunkSpec* spec) const {
  const std::vector<AxisMap> maps = Maps(in);
  if (maps.size() != 1) return false;
  spec->views = {maps[0].in, maps[0].out};
  for (size_t d = 0; d < maps[0].out.size(); ++d) spec->axes.push_back(static_cast<int>(d));
  return true;
}

std::vector<Box> StridedCopyOp::ChunkInputs(const std::vector<Shape>& in, const Box& out) const {
  return {AxisMapInputBox(Maps(in).at(0), out)};
}

std::unique_ptr<Op> StridedCopyOp::MakeChunk(const std::vector<Shape>& in, const Box& out) const {
  return std::make_unique<MapChunkOp>(node_index(), AxisMapChunk(Maps(in).at(0), out), type_name());
}

double OutputsWork(const GraphView& g, const NodeInfo& n) {
  double all = 0;
  for (int t : n.outputs)
    if (g.valid_tensor(t)) all += static_cast<double>(NumElements(g.shape(t)));
  return all;
}

}  // namespace clgpu
