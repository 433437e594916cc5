// The table of op families the delegate can claim.
#include "ops/op.h"

namespace clgpu {

extern const OpHandler kAddHandler;
extern const OpHandler kAveragePool2dHandler;
extern const OpHandler kConcatenationHandler;
extern const OpHandler kConv2dHandler;
extern const OpHandler kDepthwiseConv2dHandler;
extern const OpHandler kExpandDimsHandler;
extern const OpHandler kFullyConnectedHandler;
extern const OpHandler kMaxPool2dHandler;
extern const OpHandler kReshapeHandler;
extern const OpHandler kResizeBilinearHandler;
extern const OpHandler kResizeNearestNeighborHandler;
extern const OpHandler kSplitHandler;
extern const OpHandler kSplitVHandler;
extern const OpHandler kSqueezeHandler;
extern const OpHandler kTransposeHandler;

const OpHandler* FindOpHandler(int32_t op) {
  static const OpHandler* const kHandlers[] = {&kAddHandler,
                                               &kAveragePool2dHandler,
                                               &kConcatenationHandler,
                                               &kConv2dHandler,
                                               &kDepthwiseConv2dHandler,
                                               &kExpandDimsHandler,
                                               &kFullyConnectedHandler,
                                               &kMaxPool2dHandler,
                                               &kReshapeHandler,
                                               &kResizeBilinearHandler,
                                               &kResizeNearestNeighborHandler,
                                               &kSplitHandler,
                                               &kSplitVHandler,
                                               &kSqueezeHandler,
                                               &kTransposeHandler};
  for (const OpHandler* h : kHandlers)
    if (h->op == op) return h;
  return nullptr;
}

}  // namespace clgpu
