// Our own declaration of the TFLite C ABI shared by tflite-runtime 2.14 and
// ai-edge-litert 2.3 (facts: shared/research/tflite-abi.md). No TFLite header is
// used or vendored. Layouts are the non-TF_LITE_STATIC_MEMORY ones, which both
// desktop runtimes use; the static asserts below pin them.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

typedef enum TfLiteStatus {
  kTfLiteOk = 0,
  kTfLiteError = 1,
  kTfLiteDelegateError = 2,
  kTfLiteApplicationError = 3,
} TfLiteStatus;

// Values both runtimes assign; anything else is "not ours" (whitelist).
typedef enum TfLiteType {
  kTfLiteNoType = 0,
  kTfLiteFloat32 = 1,
  kTfLiteInt32 = 2,
  kTfLiteUInt8 = 3,
  kTfLiteInt64 = 4,
  kTfLiteString = 5,
  kTfLiteBool = 6,
  kTfLiteInt16 = 7,
  kTfLiteComplex64 = 8,
  kTfLiteInt8 = 9,
  kTfLiteFloat16 = 10,
} TfLiteType;

typedef enum TfLiteAllocationType {
  kTfLiteMemNone = 0,
  kTfLiteMmapRo = 1,  // constants of the model file
  kTfLiteArenaRw = 2,
  kTfLiteArenaRwPersistent = 3,
  kTfLiteDynamic = 4,
  kTfLitePersistentRo = 5,
  kTfLiteCustom = 6,
  kTfLiteVariantObject = 7,
  kTfLiteNonCpu = 8,  // L2.3 only: no CPU data
} TfLiteAllocationType;

enum {
  kTfLiteDelegateFlagsNone = 0,
  kTfLiteDelegateFlagsAllowDynamicTensors = 1,
};

typedef struct TfLiteIntArray {
  int size;
  int data[];
} TfLiteIntArray;

typedef struct TfLiteFloatArray {
  int size;
  float data[];
} TfLiteFloatArray;

typedef struct TfLiteQuantizationParams {
  float scale;
  int32_t zero_point;
} TfLiteQuantizationParams;

typedef struct TfLiteQuantization {
  int type;  // 0 none, 1 affine (L2.3 adds 2, 3)
  void* params;
} TfLiteQuantization;

enum { kTfLiteNoQuantization = 0, kTfLiteAffineQuantization = 1 };

// What TfLiteQuantization::params points to when type == kTfLiteAffineQuantization: one scale
// and zero point per tensor, or one per index of quantized_dimension (per-channel).
typedef struct TfLiteAffineQuantization {
  TfLiteFloatArray* scale;
  TfLiteIntArray* zero_point;
  int32_t quantized_dimension;
} TfLiteAffineQuantization;

typedef union TfLitePtrUnion {
  float* f;
  void* raw;
  const void* raw_const;
  void* data;
} TfLitePtrUnion;

// Sparse constants (TfLiteTensor::sparsity; facts: TFLite's common.h, same in both runtimes).
typedef enum TfLiteDimensionType {
  kTfLiteDimDense = 0,
  kTfLiteDimSparseCSR = 1,
} TfLiteDimensionType;

typedef struct TfLiteDimensionMetadata {
  TfLiteDimensionType format;
  int dense_size;                  // a dense level's extent
  TfLiteIntArray* array_segments;  // a CSR level's segments and indices
  TfLiteIntArray* array_indices;
} TfLiteDimensionMetadata;

typedef struct TfLiteSparsity {
  TfLiteIntArray* traversal_order;
  TfLiteIntArray* block_map;
  TfLiteDimensionMetadata* dim_metadata;  // one per level of the traversal order
  int dim_metadata_size;
} TfLiteSparsity;

struct TfLiteDelegate;
struct TfLiteContext;

typedef struct TfLiteTensor {
  TfLiteType type;
  TfLitePtrUnion data;
  TfLiteIntArray* dims;
  TfLiteQuantizationParams params;
  TfLiteAllocationType allocation_type;
  size_t bytes;
  const void* allocation;
  const char* name;
  struct TfLiteDelegate* delegate;
  int buffer_handle;
  bool data_is_stale;
  bool is_variable;
  TfLiteQuantization quantization;
  TfLiteSparsity* sparsity;  // NULL if dense
  const TfLiteIntArray* dims_signature;
} TfLiteTensor;

typedef struct TfLiteNode {
  TfLiteIntArray* inputs;
  TfLiteIntArray* outputs;
  TfLiteIntArray* intermediates;
  TfLiteIntArray* temporaries;
  void* user_data;
  void* builtin_data;
  const void* custom_initial_data;
  int custom_initial_data_size;
  struct TfLiteDelegate* delegate;
  bool might_have_side_effect;
} TfLiteNode;

typedef struct TfLiteRegistration {
  void* (*init)(struct TfLiteContext* context, const char* buffer, size_t length);
  void (*free)(struct TfLiteContext* context, void* buffer);
  TfLiteStatus (*prepare)(struct TfLiteContext* context, TfLiteNode* node);
  TfLiteStatus (*invoke)(struct TfLiteContext* context, TfLiteNode* node);
  const char* (*profiling_string)(const struct TfLiteContext* context, const TfLiteNode* node);
  int32_t builtin_code;
  const char* custom_name;
  int version;
  void* registration_external;  // must stay NULL
  void* async_kernel;           // must stay NULL
  uint64_t inplace_operator;
} TfLiteRegistration;

// What we pass by value to ReplaceNodeSubsetsWithDelegateKernels: the 88-byte
// registration plus zeroed reserve, so a runtime with a longer struct reads
// zeros rather than stack garbage (ABI pitfall 1).
typedef struct TfLiteRegistrationPadded {
  TfLiteRegistration reg;
  unsigned char reserved[64];
} TfLiteRegistrationPadded;

// What GetExternalContext hands out: a runtime's shared CPU state (Eigen's and the CPU backend's
// thread pools). Refresh makes it read the context's recommended_num_threads again, as the
// interpreter's SetNumThreads does after changing it.
typedef enum {
  kTfLiteEigenContext = 0,
  kTfLiteGemmLowpContext = 1,
  kTfLiteCpuBackendContext = 3,
} TfLiteExternalContextType;
typedef struct TfLiteExternalContext {
  TfLiteExternalContextType type;
  TfLiteStatus (*Refresh)(struct TfLiteContext* context);
} TfLiteExternalContext;

typedef struct TfLiteDelegateParams {
  struct TfLiteDelegate* delegate;
  TfLiteIntArray* nodes_to_replace;
  TfLiteIntArray* input_tensors;
  TfLiteIntArray* output_tensors;
} TfLiteDelegateParams;

typedef struct TfLiteContext {
  size_t tensors_size;
  TfLiteStatus (*GetExecutionPlan)(struct TfLiteContext* context, TfLiteIntArray** plan);
  TfLiteTensor* tensors;
  void* impl_;
  TfLiteStatus (*ResizeTensor)(struct TfLiteContext*, TfLiteTensor* tensor,
                               TfLiteIntArray* new_size);
  void (*ReportError)(struct TfLiteContext*, const char* format, ...);
  TfLiteStatus (*AddTensors)(struct TfLiteContext*, int tensors_to_add, int* first_new_index);
  TfLiteStatus (*GetNodeAndRegistration)(struct TfLiteContext*, int node_index, TfLiteNode** node,
                                         TfLiteRegistration** registration);
  // Declared with the padded struct: see TfLiteRegistrationPadded.
  TfLiteStatus (*ReplaceNodeSubsetsWithDelegateKernels)(struct TfLiteContext*,
                                                        TfLiteRegistrationPadded registration,
                                                        const TfLiteIntArray* nodes_to_replace,
                                                        struct TfLiteDelegate* delegate);
  int recommended_num_threads;
  void* (*GetExternalContext)(struct TfLiteContext*, int);
  void (*SetExternalContext)(struct TfLiteContext*, int, void*);
  bool allow_fp32_relax_to_fp16;
  void* profiler;
  void* (*AllocatePersistentBuffer)(struct TfLiteContext* ctx, size_t bytes);
  TfLiteStatus (*AllocateBufferForEval)(struct TfLiteContext* ctx, size_t bytes, void** ptr);
  TfLiteStatus (*RequestScratchBufferInArena)(struct TfLiteContext* ctx, size_t bytes,
                                              int* buffer_idx);
  void* (*GetScratchBuffer)(struct TfLiteContext* ctx, int buffer_idx);
  TfLiteStatus (*ResizeTensorExplicit)(struct TfLiteContext* ctx, TfLiteTensor* tensor, int dims,
                                       const int* shape);
  TfLiteStatus (*PreviewDelegatePartitioning)(struct TfLiteContext* context,
                                              const TfLiteIntArray* nodes_to_replace,
                                              TfLiteDelegateParams** partition_params_array,
                                              int* num_partitions);
  TfLiteTensor* (*GetTensor)(const struct TfLiteContext* context, int tensor_idx);  // NULL
  void* (*GetEvalTensor)(const struct TfLiteContext* context, int tensor_idx);      // NULL
  TfLiteStatus (*GetModelMetadata)(const struct TfLiteContext* context, const char* name,
                                   const char** ptr, size_t* bytes);
  TfLiteStatus (*AcquireSubgraphContext)(struct TfLiteContext* context, int subgraph_index,
                                         struct TfLiteContext** acquired_context);
  TfLiteStatus (*ReleaseSubgraphContext)(struct TfLiteContext* context, int subgraph_index);
} TfLiteContext;

typedef struct TfLiteDelegate {
  void* data_;
  TfLiteStatus (*Prepare)(TfLiteContext* context, struct TfLiteDelegate* delegate);
  TfLiteStatus (*CopyFromBufferHandle)(TfLiteContext*, struct TfLiteDelegate*, int, TfLiteTensor*);
  TfLiteStatus (*CopyToBufferHandle)(TfLiteContext*, struct TfLiteDelegate*, int, TfLiteTensor*);
  void (*FreeBufferHandle)(TfLiteContext*, struct TfLiteDelegate*, int*);
  int64_t flags;
  void* opaque_delegate_builder;  // must stay NULL
} TfLiteDelegate;

}  // extern "C"

static_assert(sizeof(TfLiteTensor) == 112, "context->tensors stride");
static_assert(offsetof(TfLiteTensor, dims_signature) == 104, "TfLiteTensor layout");
static_assert(offsetof(TfLiteTensor, quantization) == 80, "TfLiteTensor layout");
static_assert(offsetof(TfLiteTensor, sparsity) == 96, "TfLiteTensor layout");
static_assert(sizeof(TfLiteDimensionMetadata) == 24, "TfLiteDimensionMetadata layout");
static_assert(offsetof(TfLiteDimensionMetadata, array_segments) == 8, "TfLiteDimensionMetadata");
static_assert(sizeof(TfLiteSparsity) == 32, "TfLiteSparsity layout");
static_assert(offsetof(TfLiteSparsity, dim_metadata_size) == 24, "TfLiteSparsity layout");
static_assert(offsetof(TfLiteTensor, params) == 24, "TfLiteTensor layout");
static_assert(sizeof(TfLiteQuantizationParams) == 8, "legacy per-tensor quantization");
static_assert(sizeof(TfLiteQuantization) == 16, "TfLiteQuantization layout");
static_assert(offsetof(TfLiteQuantization, params) == 8, "TfLiteQuantization layout");
static_assert(sizeof(TfLiteAffineQuantization) == 24, "TfLiteAffineQuantization layout");
static_assert(offsetof(TfLiteAffineQuantization, zero_point) == 8, "affine quantization");
static_assert(offsetof(TfLiteAffineQuantization, quantized_dimension) == 16, "affine quantization");
static_assert(sizeof(TfLiteNode) == 80, "TfLiteNode layout");
static_assert(sizeof(TfLiteRegistration) == 88, "TfLiteRegistration layout");
static_assert(offsetof(TfLiteRegistration, builtin_code) == 40, "TfLiteRegistration layout");
static_assert(sizeof(TfLiteDelegate) == 56, "TfLiteDelegate layout");
static_assert(offsetof(TfLiteDelegate, flags) == 40, "TfLiteDelegate layout");
static_assert(sizeof(TfLiteDelegateParams) == 32, "TfLiteDelegateParams layout");
static_assert(sizeof(TfLiteContext) == 200, "TfLiteContext layout (Linux)");
static_assert(offsetof(TfLiteContext, ReplaceNodeSubsetsWithDelegateKernels) == 64, "ctx");
static_assert(offsetof(TfLiteContext, PreviewDelegatePartitioning) == 152, "ctx");
