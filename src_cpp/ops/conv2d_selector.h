// Convolution algorithms: which apply to a shape ("can"), which one to run on
// this device ("should"), and their weight preparation and launches.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ops/conv_geometry.h"
#include "ops/op.h"

namespace clgpu {

enum class ConvAlgorithm { kDirect, kGemm1x1, kImplicitGemm, kWinograd, kWinograd4 };

std::string ConvAlgorithmName(ConvAlgorithm a);

// Correct for this geometry on this device (max allocation included)?
bool ConvAlgorithmApplies(ConvAlgorithm a, const ConvGeometry& g, const DeviceInfo& dev);

// The option's forced algorithm if it applies, else the fastest-expected one.
ConvAlgorithm SelectConvAlgorithm(const ConvGeometry& g, const DeviceInfo& dev,
                                  const Options& options);

// Device-side weights in the layout the algorithm wants (transformed once).
struct ConvWeights {
  Buffer filter;
};

std::shared_ptr<ConvWeights> PrepareConvWeights(OpContext& ctx, ConvAlgorithm a,
                                                const ConvGeometry& g,
                                                const std::vector<float>& filter_ohwi,
                                                const Shape& filter_shape);

std::vector<Launch> EncodeConv(OpContext& ctx, ConvAlgorithm a, const ConvGeometry& g, cl_mem in,
                               const std::shared_ptr<ConvWeights>& w, cl_mem bias, cl_mem out,
                               float act_min, float act_max);

}  // namespace clgpu
