#include "runtime/split.h"

#include <algorithm>
#include <functional>

#include "cl/errors.h"
#include "common/error.h"
#include "runtime/chunk_search.h"

namespace clgpu {
namespace {

// Elements per unit of each axis (row-major strides).
std::vector<size_t> Strides(const Shape& s) {
  std::vector<size_t> st(s.size(), 1);
  for (int a = static_cast<int>(s.size()) - 2; a >= 0; --a) st[a] = st[a + 1] * size_t(s[a + 1]);
  return st;
}

size_t Flat(const Shape& view, const std::vector<int>& index) {
  const std::vector<size_t> st = Strides(view);
  size_t f = 0;
  for (size_t a = 0; a < view.size(); ++a) f += size_t(index[a]) * st[a];
  return f;
}

// Boxes covering [lo, hi), which lies inside one unit of axis a - 1 (a = 0: anywhere).
void RangeBoxesFrom(const Shape& view, const std::vector<size_t>& st, size_t lo, size_t hi,
                    size_t a, std::vector<Box>* out) {
  if (lo >= hi) return;
  const size_t unit = st[a];
  auto box = [&](size_t b, size_t e) {
    // Axes before a: the index of b; axis a: whole units [b, e); after: everything.
    Box x;
    const size_t rank = view.size();
    x.begin.assign(rank, 0);
    x.size.assign(view.begin(), view.end());
    for (size_t i = 0; i < a; ++i) {
      x.begin[i] = static_cast<int>((b / st[i]) % size_t(view[i]));
      x.size[i] = 1;
    }
    x.begin[a] = static_cast<int>((b / unit) % size_t(view[a]));
    x.size[a] = static_cast<int>((e - b) / unit);
    out->push_back(std::move(x));
  };
  if (lo % unit == 0 && hi % unit == 0) return box(lo, hi);
  const size_t first = (lo + unit - 1) / unit * unit, last = hi / unit * unit;
  if (first > last) return RangeBoxesFrom(view, st, lo, hi, a + 1, out);  // inside one unit
  RangeBoxesFrom(view, st, lo, first, a + 1, out);
  if (first < last) box(first, last);
  RangeBoxesFrom(view, st, last, hi, a + 1, out);
}

bool Intersect(const Box& a, const Box& b, Box* out) {
  out->begin.resize(a.begin.size());
  out->size.resize(a.begin.size());
  for (size_t i = 0; i < a.begin.size(); ++i) {
    const int lo = std::max(a.begin[i], b.begin[i]);
    const int hi = std::min(a.begin[i] + a.size[i], b.begin[i] + b.size[i]);
    if (hi <= lo) return false;
    out->begin[i] = lo;
    out->size[i] = hi - lo;
  }
  return true;
}

// Where flat element `base` of a piece sits: its buffer and byte offset there.
struct At {
  cl_mem mem;
  size_t base, byte_offset;
};

At PieceAt(const Storage& s, size_t i) {
  return {s.mems[i], s.pieces[i].begin, s.offsets.empty() ? 0 : s.offsets[i]};
}

// Box `from` of piece `src` (of src_view) to box `to` of piece `dst` (of dst_view).
void AppendOne(const At& src, const Shape& src_view, const Box& from, const At& dst,
               const Shape& dst_view, const Box& to, size_t eb, std::vector<CopyCommand>* out) {
  const std::vector<size_t> ss = Strides(src_view), ds = Strides(dst_view);
  struct Dim {
    size_t n, s, d;
  };
  std::vector<Dim> dims;  // innermost first; axes that are contiguous in both merge
  for (int a = static_cast<int>(from.size.size()) - 1; a >= 0; --a) {
    if (from.size[a] == 1) continue;
    const Dim x{size_t(from.size[a]), ss[a], ds[a]};
    if (!dims.empty() && dims.back().n * dims.back().s == x.s &&
        dims.back().n * dims.back().d == x.d) {
      dims.back().n *= x.n;
    } else {
      dims.push_back(x);
    }
  }
  size_t run = eb;
  if (!dims.empty() && dims[0].s == 1 && dims[0].d == 1) {
    run = dims[0].n * eb;
    dims.erase(dims.begin());
  }
  const size_t so = Flat(src_view, from.begin) - src.base,
               dof = Flat(dst_view, to.begin) - dst.base;
  // Up to two dimensions go into one rectangular copy; any further ones are a loop.
  const size_t in_rect = std::min<size_t>(dims.size(), 2);
  std::vector<size_t> idx(dims.size(), 0);
  for (;;) {
    size_t s_off = so, d_off = dof;
    for (size_t i = in_rect; i < dims.size(); ++i)
      s_off += idx[i] * dims[i].s, d_off += idx[i] * dims[i].d;
    CopyCommand c;
    c.src = src.mem;
    c.dst = dst.mem;
    c.region[0] = run;
    const size_t s_bytes = s_off * eb + src.byte_offset, d_bytes = d_off * eb + dst.byte_offset;
    if (in_rect == 0) {
      c.src_origin[0] = s_bytes;
      c.dst_origin[0] = d_bytes;
    } else {
      c.rect = true;
      c.region[1] = dims[0].n;
      c.region[2] = in_rect > 1 ? dims[1].n : 1;
      c.src_row_pitch = dims[0].s * eb;
      c.dst_row_pitch = dims[0].d * eb;
      c.src_slice_pitch = in_rect > 1 ? dims[1].s * eb : c.region[1] * c.src_row_pitch;
      c.dst_slice_pitch = in_rect > 1 ? dims[1].d * eb : c.region[1] * c.dst_row_pitch;
      // The offset split into (x bytes, row, slice), as drivers expect origins.
      auto origin = [](size_t off, size_t row, size_t slice, size_t* o) {
        o[2] = off / slice;
        o[1] = (off % slice) / row;
        o[0] = off % row;
      };
      origin(s_bytes, c.src_row_pitch, c.src_slice_pitch, c.src_origin);
      origin(d_bytes, c.dst_row_pitch, c.dst_slice_pitch, c.dst_origin);
    }
    out->push_back(c);
    size_t i = in_rect;
    for (; i < dims.size(); ++i) {
      if (++idx[i] < dims[i].n) break;
      idx[i] = 0;
    }
    if (i >= dims.size()) break;
  }
}

}  // namespace

int64_t BoxElements(const Box& b) {
  int64_t n = 1;
  for (int s : b.size) n *= s;
  return n;
}

Box WholeBox(const Shape& view) {
  Box b;
  b.begin.assign(view.size(), 0);
  b.size.assign(view.begin(), view.end());
  return b;
}

bool SameBox(const Box& a, const Box& b) { return a.begin == b.begin && a.size == b.size; }

std::vector<Box> RangeBoxes(const Shape& view, size_t begin, size_t end) {
  std::vector<Box> out;
  if (view.empty()) {
    if (begin < end) out.push_back(Box{});
    return out;
  }
  RangeBoxesFrom(view, Strides(view), begin, end, 0, &out);
  return out;
}

std::vector<Piece> PlanPieces(const Shape& shape, size_t max_elems, std::string* why) {
  const size_t total = static_cast<size_t>(NumElements(shape));
  if (total <= max_elems) return {Piece{0, total}};
  if (max_elems == 0) {
    *why = "not even one element fits the largest allocation";
    return {};
  }
  // The outermost axis whose units fit; pieces take as many units as fit, balanced.
  const std::vector<size_t> st = Strides(shape);
  size_t a = 0;
  while (st[a] > max_elems) ++a;
  const size_t dim = shape[a], fit = std::min(dim, max_elems / st[a]);
  const size_t per_outer = (dim + fit - 1) / fit, units = (dim + per_outer - 1) / per_outer;
  size_t outer = 1;
  for (size_t i = 0; i < a; ++i) outer *= size_t(shape[i]);
  if (outer * per_outer > kMaxPieces) {
    *why = "it would need " + std::to_string(outer * per_outer) + " buffers (at most " +
           std::to_string(kMaxPieces) + ")";
    return {};
  }
  std::vector<Piece> pieces;
  for (size_t o = 0; o < outer; ++o)
    for (size_t s = 0; s < dim; s += units) {
      const size_t b = (o * dim + s) * st[a];
      pieces.push_back({b, b + std::min(units, dim - s) * st[a]});
    }
  return pieces;
}

namespace {

// Tries chunks whose every buffer fits `limit`: shrinks the spec's axes one by one
// to the largest extent that fits. false + *why if even the smallest does not.
bool TryChunks(const OpContext& ctx, const Op& op, const std::vector<Shape>& in,
               const ChunkSpec& spec, size_t limit, ChunkPlan* plan, std::string* why) {
  const ChunkSearch search(ctx, *op.chunker(), in, spec);  // PlanOpChunks checked it has one
  const Shape& ov = search.output();
  auto weights_fit = [&](const std::vector<int>& e) { return search.WeightsFit(e, limit); };
  auto all_fit = [&](const std::vector<int>& e) { return search.AllFit(e, limit); };
  std::vector<int> ext(ov.begin(), ov.end());
  for (int a : spec.weight_axes) {
    if (weights_fit(ext)) break;
    search.Shrink(ext, size_t(a), weights_fit);
  }
  for (int a : spec.axes) {
    if (all_fit(ext)) break;
    search.Shrink(ext, size_t(a), all_fit);
  }
  if (search.Count(ext) > kMaxChunks) {
    *why = std::string(op.type_name()) + " would need more than " + std::to_string(kMaxChunks) +
           " chunks";
    return false;
  }
  size_t worst = 0;
  Box worst_box;
  search.Each(ext, [&](const Box& b) {
    const size_t p = search.Peak(b);
    if (p > worst) worst = p, worst_box = b;
    return true;
  });
  if (worst > limit) {
    *why = std::string(op.type_name()) + " cannot run in chunks that fit: its smallest chunk (" +
           ShapeString(worst_box.size) + " of output " + ShapeString(ov) + ") needs a " +
           std::to_string(worst) + "-byte buffer";
    return false;
  }
  plan->spec = spec;
  search.Each(ext, [&](const Box& b) {
    plan->out.push_back(b);
    plan->in.push_back(op.chunker()->ChunkInputs(in, b));
    return true;
  });
  return true;
}

}  // namespace

std::string PlanOpChunks(const OpContext& ctx, const Op& op, const std::vector<Shape>& in,
                         const std::vector<Shape>& out, size_t chunk_bytes, ChunkPlan* plan) {
  *plan = ChunkPlan{};
  std::vector<size_t> first;
  if (op.FlatRanges(in, &first)) return "";  // its copies address the tensors' pieces directly
  const size_t limit = ctx.max_alloc, eb = ctx.storage_bytes;
  auto over = [&](const Shape& s) { return size_t(NumElements(s)) * eb > limit; };
  bool need = std::any_of(in.begin(), in.end(), over) || std::any_of(out.begin(), out.end(), over);
  ChunkSpec spec;
  const Chunker* chunker = op.chunker();
  const bool can =
      out.size() == 1 && chunker && chunker->GetChunkSpec(in, &spec) && !spec.views.empty();
  if (can && !need) {
    // Whole, but its own weights or scratch may still be too large for one buffer.
    size_t own = chunker->ChunkWeightBytes(ctx, in, WholeBox(spec.views.back()));
    for (size_t s : op.ScratchBytes(ctx, in)) own = std::max(own, s);
    need = own > limit;
  }
  if (!need) return "";
  if (!can) return std::string(op.type_name()) + " cannot run in chunks";
  if (NumElements(out[0]) == 0) return "";  // nothing runs
  std::string why;
  if (chunk_bytes < limit && TryChunks(ctx, op, in, spec, chunk_bytes, plan, &why)) return "";
  *plan = ChunkPlan{};
  if (TryChunks(ctx, op, in, spec, limit, plan, &why)) return "";
  *plan = ChunkPlan{};
  return why;
}

void AppendBoxCopies(const Storage& src, const Shape& src_view, const Box& from, const Storage& dst,
                     const Shape& dst_view, const Box& to, size_t elem_bytes,
                     std::vector<CopyCommand>* out) {
  if (BoxElements(from) == 0) return;
  for (size_t i = 0; i < src.mems.size(); ++i) {
    for (const Box& p : RangeBoxes(src_view, src.pieces[i].begin, src.pieces[i].end)) {
      Box s;
      if (!Intersect(from, p, &s)) continue;
      Box d = s;  // where s lands in dst
      for (size_t a = 0; a < d.begin.size(); ++a)
        d.begin[a] = to.begin[a] + s.begin[a] - from.begin[a];
      for (size_t j = 0; j < dst.mems.size(); ++j) {
        for (const Box& q : RangeBoxes(dst_view, dst.pieces[j].begin, dst.pieces[j].end)) {
          Box dd;
          if (!Intersect(d, q, &dd)) continue;
          Box ss = dd;
          for (size_t a = 0; a < ss.begin.size(); ++a)
            ss.begin[a] = s.begin[a] + dd.begin[a] - d.begin[a];
          AppendOne(PieceAt(src, i), src_view, ss, PieceAt(dst, j), dst_view, dd, elem_bytes, out);
        }
      }
    }
  }
}

void EnqueueCopy(cl_command_queue q, const CopyCommand& c, cl_event* event) {
  if (!c.rect) {
    CheckCl(Cl().clEnqueueCopyBuffer(q, c.src, c.dst, c.src_origin[0], c.dst_origin[0], c.region[0],
                                     0, nullptr, event),
            "clEnqueueCopyBuffer");
    return;
  }
  CheckCl(Cl().clEnqueueCopyBufferRect(q, c.src, c.dst, c.src_origin, c.dst_origin, c.region,
                                       c.src_row_pitch, c.src_slice_pitch, c.dst_row_pitch,
                                       c.dst_slice_pitch, 0, nullptr, event),
          "clEnqueueCopyBufferRect");
}

}  // namespace clgpu
