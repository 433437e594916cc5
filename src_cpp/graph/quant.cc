#include "graph/quant.h"

#include <dlfcn.h>

#include <cmath>

namespace clgpu {

ValueType ValueTypeOf(TfLiteType t) {
  switch (t) {
    case kTfLiteFloat32:
      return ValueType::kFloat;
    case kTfLiteInt8:
      return ValueType::kInt8;
    case kTfLiteUInt8:
      return ValueType::kUInt8;
    case kTfLiteInt32:
      return ValueType::kInt32;
    case kTfLiteBool:
      return ValueType::kBool;
    case kTfLiteComplex64:
      return ValueType::kComplex64;
    default:
      return ValueType::kUnsupported;
  }
}

const char* ValueTypeName(ValueType t) {
  switch (t) {
    case ValueType::kFloat:
      return "float32";
    case ValueType::kInt8:
      return "int8";
    case ValueType::kUInt8:
      return "uint8";
    case ValueType::kInt32:
      return "int32";
    case ValueType::kFloat32:
      return "float32 (kept)";
    case ValueType::kBool:
      return "bool";
    case ValueType::kComplex64:
      return "complex64";
    default:
      return "unsupported";
  }
}

size_t HostElementBytes(ValueType t) {
  if (t == ValueType::kComplex64) return 8;
  return t == ValueType::kInt8 || t == ValueType::kUInt8 || t == ValueType::kBool ? 1 : 4;
}

int QuantMin(ValueType t) { return t == ValueType::kUInt8 ? 0 : -128; }
int QuantMax(ValueType t) { return t == ValueType::kUInt8 ? 255 : 127; }

QuantParams ReadQuantParams(const TfLiteTensor& x) {
  QuantParams q;
  if (x.quantization.type == kTfLiteAffineQuantization && x.quantization.params) {
    const auto* a = static_cast<const TfLiteAffineQuantization*>(x.quantization.params);
    if (!a->scale || !a->zero_point || a->scale->size < 1 || a->zero_point->size != a->scale->size)
      return {};
    q.scale.assign(a->scale->data, a->scale->data + a->scale->size);
    q.zero_point.assign(a->zero_point->data, a->zero_point->data + a->zero_point->size);
    q.axis = a->quantized_dimension;
  } else if (x.params.scale != 0.f) {
    q.scale = {x.params.scale};
    q.zero_point = {x.params.zero_point};
  }
  for (float s : q.scale)
    if (!(std::isfinite(s) && s > 0.f)) return {};
  return q;
}

CpuKernels IdentifyCpuKernels(const TfLiteContext* ctx, const std::string& hint) {
  CpuKernels k;
#if defined(__aarch64__) || defined(__arm__)
  k.neon = true;
#endif
  Dl_info info{};
  // A function of the runtime itself: dladdr names the shared object it lives in.
  const void* fn = reinterpret_cast<const void*>(ctx->GetExecutionPlan);
  if (fn && dladdr(fn, &info) && info.dli_fname) k.library = info.dli_fname;
  const std::string& who = hint.empty() ? k.library : hint;
  if (who.find("litert") != std::string::npos || who.find("LiteRt") != std::string::npos)
    k.neon = k.litert = true;
  k.threads = ctx->recommended_num_threads > 0 ? ctx->recommended_num_threads : 1;
  return k;
}

}  // namespace clgpu
