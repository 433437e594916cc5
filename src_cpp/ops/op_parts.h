// The plain records an op deals in (ops/op.h): boxes and chunk specs of its work, strided views
// of its operands, a folded PAD's and ADD's parameters, and its kernel launches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cl/environment.h"
#include "graph/graph.h"

namespace clgpu {

// A box of a tensor seen as some shape (its "view": the same elements in the same
// order, e.g. FULLY_CONNECTED sees its input as [M, K]): per axis, first index and extent.
struct Box {
  std::vector<int> begin, size;
};

// How an op cuts its work into chunks when a tensor it touches, its weights or its
// scratch exceed the largest allocation (runtime/split.h plans them). A chunk is a
// box of output 0; its extents shrink axis by axis until every buffer fits.
struct ChunkSpec {
  std::vector<Shape> views;      // each input, then output 0, as the boxes address them
  std::vector<int> weight_axes;  // output axes shrunk first, until a chunk's weights fit
  std::vector<int> axes;         // then these, in order, until all of a chunk's buffers fit
  std::vector<int> step;         // extents (and starts) per output axis are multiples of this
};

// A tensor of `shape` seen in a buffer that holds it elsewhere: element (i0, i1, ...) sits at
// sum(i[a] * strides[a]) (a transposed, broadcast or reshaped view of another tensor).
struct StridedView {
  Shape shape;
  std::vector<int64_t> strides;
};
// The row-major strides of a tensor of this shape laid out as it is.
StridedView ContiguousView(const Shape& s);

// A PAD folded into the convolution reading its output (AttachPad, fusion/pad.cc): its zeros
// (int8: zero points) on each side of H and W, which the convolution takes as more padding.
struct InputPad {
  int top = 0, bottom = 0, left = 0, right = 0;
};

// One enqueue of one kernel.
// EpilogueFusion::kind / Attachments::Epilogue::kind of an int8 table (AttachTable); the others are
// kernels/common.cl's CLGPU_EPILOGUE numbers.
constexpr int kTableEpilogue = 100;
// Attachments::Epilogue::kind of a PRELU with a slope per output channel (AttachSlopes): the
// slopes a constant input of the op, its kernels built with -DCHANNEL_SLOPES.
constexpr int kSlopeEpilogue = 101;

// Which of a partition's two forms runs a launch (runtime/launch_forms.h). Some ops offer a form
// with fewer launches and more device time (split-K summed in the split kernel): it wins where
// the host's enqueue bounds the invoke and loses where the device does, which the partition
// measures.
enum class LaunchForm : uint8_t {
  kBoth,
  kFewerLaunches,  // only in the form with fewer launches
  kShorterDevice,  // only in the form with the shorter device time
};

struct Launch {
  Kernel kernel;
  std::string name;  // kernel function name, for profiles
  int dims = 1;
  size_t global[3] = {1, 1, 1};
  size_t local[3] = {0, 0, 0};  // all zero = let the driver choose
  Buffer consts;                // its packed constants (PackConstants), if the op keeps none
  Buffer state;  // what its own groups hand each other between launches (split-K's tile counters)
  LaunchForm form = LaunchForm::kBoth;
};

// What a residual ADD folded into the op producing one of its operands applies (FoldSource::
// IsResidualAdd): on float tensors its activation's clamp bounds; on int8 tensors its integer
// arithmetic (quant_add in kernels/quant.cl), the parameters ordered with the producer's operand
// first.
struct ResidualAdd {
  float act_min = 0, act_max = 0;
  std::vector<int> quant;
};

}  // namespace clgpu
