// Builtin operator codes and the builtin params we read. Params structs are read
// field by field through these prefix views: the runtimes append fields (Conv +4 B,
// FC +20 B in L2.3), so only the prefix common to both may be touched.
#pragma once

#include <cstdint>

namespace clgpu::tfl {

enum BuiltinOp : int32_t {
  kAdd = 0,
  kAveragePool2d = 1,
  kConcatenation = 2,
  kConv2d = 3,
  kDepthwiseConv2d = 4,
  kDequantize = 6,
  kFullyConnected = 9,
  kL2Normalization = 11,
  kMaxPool2d = 17,
  kMaximum = 55,
  kMinimum = 57,
  kRelu = 19,
  kReluN1To1 = 20,
  kRelu6 = 21,
  kReshape = 22,
  kResizeBilinear = 23,
  kTranspose = 39,
  kTransposeConv = 67,
  kBatchMatMul = 126,
  kCustom = 32,
  kSqueeze = 43,
  kSplit = 49,
  kDelegate = 51,
  kExpandDims = 70,
  kResizeNearestNeighbor = 97,
  kSplitV = 102,
  kRelu0To1 = 152,
  kDepthToSpace = 5,
  kEmbeddingLookup = 7,
  kSpaceToDepth = 26,
  kGather = 36,
  kStridedSlice = 45,
  kSlice = 65,
  kPack = 83,
  kUnpack = 88,
  kDensify = 124,
  kSoftmax = 25,
  kPad = 34,
  kLogSoftmax = 50,
  kCast = 53,
  kPadV2 = 60,
  kTile = 69,
  kShape = 77,
  kMirrorPad = 100,
  kQuantize = 114,
  kLogistic = 14,
  kMul = 18,
  kTanh = 28,
  kMean = 40,
  kSub = 41,
  kDiv = 42,
  kExp = 47,
  kPrelu = 54,
  kNeg = 59,
  kLog = 73,
  kSum = 74,
  kSqrt = 75,
  kRsqrt = 76,
  kPow = 78,
  kReduceProd = 81,
  kReduceMax = 82,
  kReduceMin = 89,
  kSquare = 92,
  kLeakyRelu = 98,
  kSquaredDifference = 99,
  kAbs = 101,
  kElu = 111,
  kHardSwish = 117,
  kGelu = 150,
  kLess = 58,
  kGreater = 61,
  kGreaterEqual = 62,
  kLessEqual = 63,
  kSelect = 64,
  kSin = 66,
  kEqual = 71,
  kNotEqual = 72,
  kLogicalOr = 84,
  kLogicalAnd = 86,
  kLogicalNot = 87,
  kCos = 108,
  kSelectV2 = 123,
  kReverseV2 = 105,
  kRfft2d = 131,
  kImag = 133,
  kReal = 134,
  kComplexAbs = 135,
  // Ops whose output is not a function of their inputs alone (PureFunctionOfInputs below).
  kIf = 118,
  kWhile = 119,
  kCallOnce = 129,
  kHashtable = 136,
  kHashtableFind = 137,
  kHashtableImport = 138,
  kHashtableSize = 139,
  kVarHandle = 142,
  kReadVariable = 143,
  kAssignVariable = 144,
  kRandomStandardNormal = 146,
  kRandomUniform = 148,
  kMultinomial = 149,
  kStablehloRngBitGenerator = 204,
};

enum Padding : int { kPaddingUnknown = 0, kPaddingSame = 1, kPaddingValid = 2 };

enum FusedActivation : int {
  kActNone = 0,
  kActRelu = 1,
  kActReluN1To1 = 2,
  kActRelu6 = 3,
  kActTanh = 4,
  kActSignBit = 5,
  kActSigmoid = 6,
};

// Common prefix of TfLiteConvParams (24 B in 2.14, 28 B in L2.3).
struct ConvParams {
  int padding, stride_width, stride_height, activation, dilation_width, dilation_height;
};
static_assert(sizeof(ConvParams) == 24, "conv params prefix");

struct DepthwiseConvParams {
  int padding, stride_width, stride_height, depth_multiplier, activation, dilation_width,
      dilation_height;
};
static_assert(sizeof(DepthwiseConvParams) == 28, "depthwise params");

// Common prefix of TfLiteFullyConnectedParams: bytes 0..9 only.
struct FullyConnectedParams {
  int activation;
  int weights_format;
  bool keep_num_dims;
  bool asymmetric_quantize_inputs;
};

struct AddParams {
  int activation;
  bool pot_scale_int16;
};

// Common prefix of TfLitePoolParams (the computed padding that follows is the CPU kernel's).
struct PoolParams {
  int padding, stride_width, stride_height, filter_width, filter_height, activation;
};
static_assert(sizeof(PoolParams) == 24, "pool params prefix");

struct ConcatenationParams {
  int axis;
  int activation;
};

// TfLiteResizeBilinearParams and TfLiteResizeNearestNeighborParams share this layout.
struct ResizeParams {
  bool align_corners;
  bool half_pixel_centers;
};

// TfLiteReshapeParams and TfLiteSqueezeParams (same in both runtimes): up to 8 dims.
constexpr int kMaxParamDims = 8;
struct ReshapeParams {
  int shape[kMaxParamDims];
  int num_dimensions;
};
static_assert(sizeof(ReshapeParams) == 36, "reshape params");
struct SqueezeParams {
  int squeeze_dims[kMaxParamDims];
  int num_squeeze_dims;
};
static_assert(sizeof(SqueezeParams) == 36, "squeeze params");

// TfLiteStridedSliceParams (24 B in both runtimes; `offset`, op version 8, is honoured by both).
struct StridedSliceParams {
  int begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask;
  bool offset;
};
static_assert(sizeof(StridedSliceParams) == 24, "strided slice params");

struct GatherParams {
  int axis, batch_dims;
};
struct PackParams {
  int values_count, axis;
};
struct UnpackParams {
  int num, axis;
};
// TfLiteDepthToSpaceParams and TfLiteSpaceToDepthParams.
struct BlockSizeParams {
  int block_size;
};

// Ops whose CPU kernel writes its output in its input's type whatever the model declares
// (EXPAND_DIMS copies bytes): graph/validate.cc infers the output's type from it.
inline bool OutputTakesInputType(int32_t op) { return op == kExpandDims; }

// Whether a node's outputs are a function of its inputs alone, so that one over constants can be
// evaluated once (delegate/constant_folding.h): not with state, randomness, other subgraphs or
// code the runtime resolves elsewhere (custom ops, delegates' kernels).
inline bool PureFunctionOfInputs(int32_t op) {
  switch (op) {
    case kCustom:
    case kDelegate:
    case kIf:
    case kWhile:
    case kCallOnce:
    case kHashtable:
    case kHashtableFind:
    case kHashtableImport:
    case kHashtableSize:
    case kVarHandle:
    case kReadVariable:
    case kAssignVariable:
    case kRandomStandardNormal:
    case kRandomUniform:
    case kMultinomial:
    case kStablehloRngBitGenerator:
      return false;
    default:
      return true;
  }
}

// Whether the delegate's kernel of this op converts a run-time int32 input as values, not as
// positions that the partition checks on the host before the kernels run (GATHER's,
// EMBEDDING_LOOKUP's: delegate/claim.h). The flat copies (OpHandler::flat_copy) read any type as
// values too.
inline bool ConvertsInt32Values(int32_t op) { return op == kCast; }

}  // namespace clgpu::tfl
