// Which nodes the delegate claims and how they group into partitions: the op checks'
// verdicts, then the partitions TFLite would form, thinned by the cost model and
// max_delegated_partitions, with folded FLOAT16 DEQUANTIZEs and DENSIFYs following their consumers.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "delegate/cost_model.h"
#include "delegate/delegate.h"
#include "graph/graph.h"

namespace clgpu {

// One partition as TFLite's partitioner would form it.
struct PartitionPreview {
  std::vector<int> nodes;            // execution-plan order
  std::vector<int> inputs, outputs;  // its boundary tensors
};

// TFLite's grouping of `nodes` (plan order); empty if the runtime cannot preview.
using PreviewFn = std::function<std::vector<PartitionPreview>(const std::vector<int>& nodes)>;
// "" to keep a partition, else why it stays on the CPU (the cost model).
using KeepFn = std::function<std::string(const PartitionPreview&, const std::vector<NodeInfo>&)>;

// The DEQUANTIZE nodes of constant FLOAT16 tensors (fp16-weight models) or int8 / uint8 ones
// (dynamic-range models' DEQUANTIZE form) to FLOAT32; each output is registered with `graph` as
// a constant read from the source (widened or dequantized).
std::vector<const NodeInfo*> FoldConstantDequantizes(GraphView& graph,
                                                     const std::vector<NodeInfo>& nodes);

// Unclaims the nodes that make an int32 value which a claimed op reads as positions (GATHER's,
// checked on the host before the kernels run, so they must be in TFLite's memory): such a value
// comes from the CPU, or from a partition input through the device's flat copies alone
// (OpHandler::flat_copy: runtime/partition_invoke.cc checks the input). The flat copies and
// the ops that convert int32 values (tfl::ConvertsInt32Values: CAST) read any.
void KeepInt32ValuesForTheirReaders(const GraphView& graph, const std::vector<NodeInfo>& nodes,
                                    std::vector<NodeDecision>* decisions);

// Unclaims the type conversions (OpHandler::converts_type: QUANTIZE, DEQUANTIZE) at the model's
// edge, a graph input's or a graph output's, that the cost model (EdgeConversionCost, with the
// device's `costs` and the interpreter's `cpu`) gives to the CPU: an int8 model's float input
// quantized and its output dequantized cost a launch each on the device where the CPU converts a
// small tensor in less (and the partition then moves the int8 value, a quarter of the bytes).
void LeaveEdgeConversionsToCpu(const GraphView& graph, const std::vector<NodeInfo>& nodes,
                               const DeviceCosts& costs, const CpuCosts& cpu,
                               std::vector<NodeDecision>* decisions);

struct ClaimPlan {
  std::vector<NodeDecision> decisions;       // one per node, plan order
  std::vector<PartitionPreview> partitions;  // the final ones
  std::vector<int> nodes;                    // claimed nodes, plan order
};

// `plan->decisions` holds the checks' verdicts (folded DEQUANTIZEs unclaimed); on return it
// holds the final claims and `plan->partitions` their partitions.
//
// A folded DEQUANTIZE is claimed only while every consumer is claimed and it lands in the
// partition of those consumers. Otherwise its FLOAT32 output would leave the device as a
// partition output on every invoke, and the CPU ops reading it would see a run-time tensor
// instead of a constant weight: XNNPACK then declines them and its single partition breaks
// into pieces around ours (face_detection_back: 35 DELEGATE nodes, 17x slower than the CPU).
void PlanClaims(const std::vector<NodeInfo>& nodes, const std::vector<const NodeInfo*>& dequantizes,
                const PreviewFn& preview, const KeepFn& keep, int max_partitions, ClaimPlan* plan);

}  // namespace clgpu
