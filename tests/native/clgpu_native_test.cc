// A Python-free check of the core on one OpenCL device: one convolution (through
// the conv selector and encoder the delegate uses) and one GEMM (kernels/gemm.cl),
// each compared with a plain C++ reference. Built for the host or cross-compiled
// (aarch64, run under qemu against PoCL); prints "N passed, N failed".
//
//   clgpu_native_test [--device SPEC] [--precision fp32|fp16] [--all-algorithms]
//   clgpu_native_test --list         (device enumeration only)
//   clgpu_native_test --jit-probe    (build and run one trivial kernel only)
//
// SPEC is the delegate's device option (auto, gpu, cpu, an index or a name part;
// default $CLGPU_TEST_DEVICE or "auto"). Exit status 0 only if every case passed.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cl/device.h"
#include "cl/environment.h"
#include "cl/errors.h"
#include "common/error.h"
#include "common/half.h"
#include "ops/conv2d_selector.h"
#include "ops/conv_geometry.h"
#include "ops/op.h"

namespace {

using clgpu::Buffer;
using clgpu::CheckCl;
using clgpu::Cl;

struct Config {
  std::string device = "auto";
  std::string precision = "fp32";
  bool all_algorithms = false;
  bool list_only = false;
  bool jit_probe = false;
};

struct Totals {
  int passed = 0, failed = 0;
};

std::vector<float> RandomVector(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// Values as the device will see them: rounded to half when storage is fp16, so
// the reference only differs by the device's arithmetic and the output rounding.
std::vector<float> AsStored(const std::vector<float>& v, bool half) {
  if (!half) return v;
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = clgpu::HalfToFloat(clgpu::FloatToHalf(v[i]));
  return r;
}

Buffer Upload(clgpu::OpContext& ctx, const std::vector<float>& host) {
  return clgpu::UploadWeights(ctx, host);  // storage type of ctx, read-only
}

std::vector<float> Download(clgpu::OpContext& ctx, const Buffer& buf, size_t n) {
  std::vector<float> out(n);
  if (ctx.storage_bytes == 2) {
    std::vector<uint16_t> h(n);
    CheckCl(Cl().clEnqueueReadBuffer(ctx.queue, buf.get(), CL_TRUE, 0, n * 2, h.data(), 0, nullptr,
                                     nullptr),
            "clEnqueueReadBuffer");
    for (size_t i = 0; i < n; ++i) out[i] = clgpu::HalfToFloat(h[i]);
  } else {
    CheckCl(Cl().clEnqueueReadBuffer(ctx.queue, buf.get(), CL_TRUE, 0, n * 4, out.data(), 0,
                                     nullptr, nullptr),
            "clEnqueueReadBuffer");
  }
  return out;
}

void Enqueue(cl_command_queue q, const std::vector<clgpu::Launch>& launches) {
  for (const clgpu::Launch& l : launches) {
    const size_t* local = l.local[0] ? l.local : nullptr;
    CheckCl(Cl().clEnqueueNDRangeKernel(q, l.kernel.get(), l.dims, nullptr, l.global, local, 0,
                                        nullptr, nullptr),
            "clEnqueueNDRangeKernel");
  }
  CheckCl(Cl().clFinish(q), "clFinish");
}

// Worst |got - want| relative to the tolerance; <= 1 passes.
double WorstRatio(const std::vector<float>& got, const std::vector<double>& want, bool half,
                  double* max_abs) {
  const double atol = half ? 2e-2 : 1e-4, rtol = half ? 1e-2 : 1e-4;
  double worst = 0;
  *max_abs = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(double(got[i]) - want[i]);
    if (!(err == err)) return std::numeric_limits<double>::infinity();  // NaN
    *max_abs = std::max(*max_abs, err);
    worst = std::max(worst, err / (atol + rtol * std::fabs(want[i])));
  }
  return worst;
}

// Runs one case; an exception from the core counts as a failure with its message.
void RunCase(Totals& t, const std::string& name, const std::function<double(double*)>& body) {
  const auto t0 = std::chrono::steady_clock::now();
  double max_abs = 0, ratio = 0;
  std::string error;
  try {
    ratio = body(&max_abs);
  } catch (const clgpu::BuildError& e) {
    error = std::string(e.what()) + "\n--- build log ---\n" + e.log();
  } catch (const std::exception& e) {
    error = e.what();
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const bool ok = error.empty() && ratio <= 1.0;
  (ok ? t.passed : t.failed) += 1;
  if (!error.empty()) {
    std::printf("FAIL %-40s %.2fs: %s\n", name.c_str(), secs, error.c_str());
  } else {
    std::printf("%s %-40s %.2fs  max|err| %.3g (%.2f of tolerance)\n", ok ? "ok  " : "FAIL",
                name.c_str(), secs, max_abs, ratio);
  }
  std::fflush(stdout);
}

// NHWC input, OHWI filter, TFLite SAME/VALID padding as in ConvGeometry.
std::vector<double> ReferenceConv(const clgpu::ConvGeometry& g, const std::vector<float>& in,
                                  const std::vector<float>& filter, const std::vector<float>& bias,
                                  float lo, float hi) {
  std::vector<double> out(size_t(g.n) * g.oh * g.ow * g.oc);
  for (int b = 0; b < g.n; ++b)
    for (int oy = 0; oy < g.oh; ++oy)
      for (int ox = 0; ox < g.ow; ++ox)
        for (int oc = 0; oc < g.oc; ++oc) {
          double acc = bias[oc];
          for (int ky = 0; ky < g.kh; ++ky) {
            const int iy = oy * g.sh + ky * g.dh - g.pad_top;
            if (iy < 0 || iy >= g.h) continue;
            for (int kx = 0; kx < g.kw; ++kx) {
              const int ix = ox * g.sw + kx * g.dw - g.pad_left;
              if (ix < 0 || ix >= g.w) continue;
              for (int c = 0; c < g.c; ++c)
                acc += double(in[((size_t(b) * g.h + iy) * g.w + ix) * g.c + c]) *
                       filter[((size_t(oc) * g.kh + ky) * g.kw + kx) * g.c + c];
            }
          }
          out[((size_t(b) * g.oh + oy) * g.ow + ox) * g.oc + oc] =
              std::min<double>(std::max<double>(acc, lo), hi);
        }
  return out;
}

double ConvCase(clgpu::OpContext& ctx, clgpu::ConvAlgorithm algo, const clgpu::ConvGeometry& g,
                float lo, float hi, uint32_t seed, double* max_abs) {
  const bool half = ctx.storage_bytes == 2;
  const auto in = AsStored(RandomVector(size_t(g.n) * g.h * g.w * g.c, seed), half);
  const auto filter = AsStored(RandomVector(size_t(g.oc) * g.kh * g.kw * g.c, seed + 1), half);
  const auto bias = RandomVector(g.oc, seed + 2);
  const size_t out_n = size_t(g.n) * g.oh * g.ow * g.oc;

  Buffer in_buf = Upload(ctx, in);
  Buffer bias_buf = clgpu::UploadFloat32(ctx, bias);
  Buffer out_buf = ctx.env.CreateBuffer(out_n * ctx.storage_bytes);
  // Scratch slots (Winograd's transformed tiles) are the partition's in the delegate.
  std::vector<Buffer> scratch;
  ctx.scratch.clear();
  for (size_t bytes : clgpu::ConvScratchBytes(ctx, algo, g)) {
    scratch.push_back(ctx.env.CreateBuffer(std::max<size_t>(bytes, 16)));
    ctx.scratch.push_back(scratch.back().get());
  }
  auto weights = clgpu::PrepareConvWeights(ctx, algo, g, filter);
  auto launches = clgpu::EncodeConv(ctx, algo, g, in_buf.get(), *weights, bias_buf.get(),
                                    out_buf.get(), lo, hi);
  Enqueue(ctx.queue, launches);
  ctx.scratch.clear();
  return WorstRatio(Download(ctx, out_buf, out_n), ReferenceConv(g, in, filter, bias, lo, hi), half,
                    max_abs);
}

// C[M][N] = clamp(A[M][K] * B[N][K]^T + bias[N]) with kernels/gemm.cl's gemm_nt.
// The tile sizes are spelled out so the work-group size below follows from them.
double GemmCase(clgpu::OpContext& ctx, int M, int N, int K, uint32_t seed, double* max_abs) {
  const int kTileM = 32, kTileN = 32, kWptM = 4, kWptN = 4;
  const size_t wg = size_t(kTileM / kWptM) * (kTileN / kWptN);
  const std::string defines = "-DTILE_M=" + std::to_string(kTileM) +
                              " -DTILE_N=" + std::to_string(kTileN) +
                              " -DTILE_K=16 -DWPT_M=" + std::to_string(kWptM) +
                              " -DWPT_N=" + std::to_string(kWptN) + " -DVWM=4 -DVWN=4";
  const bool half = ctx.storage_bytes == 2;
  const auto a = AsStored(RandomVector(size_t(M) * K, seed), half);
  const auto b = AsStored(RandomVector(size_t(N) * K, seed + 1), half);
  const auto bias = RandomVector(N, seed + 2);
  const float lo = -std::numeric_limits<float>::infinity(), hi = 6.f;

  Buffer a_buf = Upload(ctx, a), b_buf = Upload(ctx, b);
  Buffer bias_buf = clgpu::UploadFloat32(ctx, bias);
  Buffer c_buf = ctx.env.CreateBuffer(size_t(M) * N * ctx.storage_bytes);
  auto program = ctx.GetProgram("gemm", defines);  // storage defines added by the context
  clgpu::Launch l;
  l.name = "gemm_nt";
  l.kernel = clgpu::CreateKernel(*program, l.name);
  clgpu::SetArgs(l.kernel, a_buf.get(), b_buf.get(), bias_buf.get(), c_buf.get(), M, N, K, lo, hi);
  l.dims = 1;
  l.global[0] = size_t((M + kTileM - 1) / kTileM) * ((N + kTileN - 1) / kTileN) * wg;
  l.local[0] = wg;
  std::vector<clgpu::Launch> launches;
  launches.push_back(std::move(l));
  Enqueue(ctx.queue, launches);

  std::vector<double> want(size_t(M) * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double acc = bias[n];
      for (int k = 0; k < K; ++k) acc += double(a[size_t(m) * K + k]) * b[size_t(n) * K + k];
      want[size_t(m) * N + n] = std::min<double>(acc, hi);
    }
  return WorstRatio(Download(ctx, c_buf, size_t(M) * N), want, half, max_abs);
}

bool ParseArgs(int argc, char** argv, Config* cfg) {
  if (const char* d = std::getenv("CLGPU_TEST_DEVICE")) cfg->device = d;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--device" && i + 1 < argc) {
      cfg->device = argv[++i];
    } else if (a == "--precision" && i + 1 < argc) {
      cfg->precision = argv[++i];
      if (cfg->precision != "fp32" && cfg->precision != "fp16") return false;
    } else if (a == "--all-algorithms") {
      cfg->all_algorithms = true;
    } else if (a == "--list") {
      cfg->list_only = true;
    } else if (a == "--jit-probe") {
      cfg->jit_probe = true;
    } else {
      return false;
    }
  }
  return true;
}

int Run(const Config& cfg) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto devices = clgpu::ListDevices(/*probe_fp16=*/false);
  std::printf("OpenCL library: %s\n", Cl().library_path.c_str());
  for (const auto& d : devices)
    std::printf("device %d: %s / %s (%s, %d CUs, max alloc %llu MiB)\n", d.index,
                d.platform.c_str(), d.name.c_str(), d.type.c_str(), d.compute_units,
                static_cast<unsigned long long>(d.max_alloc_bytes >> 20));
  if (cfg.list_only) {
    // The enumeration smoke test: at least one device must be there.
    std::printf("%d passed, %d failed\n", devices.empty() ? 0 : 1, devices.empty() ? 1 : 0);
    return devices.empty() ? 1 : 0;
  }

  auto env = clgpu::Environment::ForDevice(clgpu::SelectDevice(cfg.device));
  clgpu::Queue queue = env->CreateQueue(/*profiling=*/false);
  const bool half = cfg.precision == "fp16";
  clgpu::OpContext ctx{*env, queue.get(), clgpu::OpOptions{}};
  ctx.storage_defines = half ? "-DSTORAGE_HALF" : "";
  ctx.storage_bytes = half ? 2 : 4;
  ctx.max_alloc = env->device().max_alloc_bytes;
  std::printf("running on: %s (%s storage)\n", env->device().name.c_str(), cfg.precision.c_str());

  Totals t;
  if (cfg.jit_probe) {
    // Can this device compile OpenCL C at all (PoCL under qemu: its LLVM and the
    // linker it spawns)? Separate from the op cases so a CI log tells the two apart.
    RunCase(t, "jit probe", [&](double* max_abs) {
      const char* src =
          "__kernel void axpb(__global float* x, float a, float b) {\n"
          "  const int i = get_global_id(0);\n  x[i] = a * x[i] + b;\n}\n";
      auto program = env->programs().GetSource("jit_probe", src, "");
      std::vector<float> x = RandomVector(64, 7);
      Buffer buf = env->CreateBuffer(x.size() * 4);
      CheckCl(Cl().clEnqueueWriteBuffer(ctx.queue, buf.get(), CL_TRUE, 0, x.size() * 4, x.data(), 0,
                                        nullptr, nullptr),
              "clEnqueueWriteBuffer");
      clgpu::Launch l;
      l.kernel = clgpu::CreateKernel(*program, "axpb");
      clgpu::SetArgs(l.kernel, buf.get(), 2.f, 1.f);
      l.global[0] = x.size();
      std::vector<clgpu::Launch> launches;
      launches.push_back(std::move(l));
      Enqueue(ctx.queue, launches);
      std::vector<float> got(x.size());
      CheckCl(Cl().clEnqueueReadBuffer(ctx.queue, buf.get(), CL_TRUE, 0, x.size() * 4, got.data(),
                                       0, nullptr, nullptr),
              "clEnqueueReadBuffer");
      std::vector<double> want(x.size());
      for (size_t i = 0; i < x.size(); ++i) want[i] = 2.0 * x[i] + 1.0;
      return WorstRatio(got, want, false, max_abs);
    });
    std::printf("%d passed, %d failed\n", t.passed, t.failed);
    return t.failed == 0 ? 0 : 1;
  }
  // 3x3 SAME, odd sizes, RELU6; and (with --all-algorithms) a 1x1 for the GEMM path.
  std::vector<clgpu::ConvGeometry> geometries(1);
  {
    clgpu::ConvGeometry& g = geometries[0];
    g.n = 1, g.h = 9, g.w = 11, g.c = 5, g.oc = 7, g.kh = 3, g.kw = 3;
    g.Compute(/*SAME=*/1);
  }
  if (cfg.all_algorithms) {
    clgpu::ConvGeometry g;
    g.n = 2, g.h = 6, g.w = 7, g.c = 12, g.oc = 9, g.kh = 1, g.kw = 1;
    g.Compute(/*VALID=*/2);
    geometries.push_back(g);
  }
  const clgpu::ConvAlgorithm all[] = {clgpu::ConvAlgorithm::kDirect, clgpu::ConvAlgorithm::kGemm1x1,
                                      clgpu::ConvAlgorithm::kImplicitGemm,
                                      clgpu::ConvAlgorithm::kWinograd,
                                      clgpu::ConvAlgorithm::kWinograd4};
  uint32_t seed = 1234;
  for (const auto& g : geometries) {
    std::vector<clgpu::ConvAlgorithm> algos;
    if (cfg.all_algorithms) {
      for (auto a : all)
        if (clgpu::ConvAlgorithmApplies(a, g)) algos.push_back(a);
    } else {
      algos.push_back(clgpu::SelectConvAlgorithm(g, env->device(), "auto"));
    }
    for (auto a : algos) {
      const std::string name = "conv2d " + std::to_string(g.kh) + "x" + std::to_string(g.kw) + " " +
                               std::to_string(g.h) + "x" + std::to_string(g.w) + "x" +
                               std::to_string(g.c) + "->" + std::to_string(g.oc) + " " +
                               clgpu::ConvAlgorithmName(a);
      seed += 10;
      RunCase(t, name, [&, a, g, seed](double* max_abs) {
        return ConvCase(ctx, a, g, 0.f, 6.f, seed, max_abs);
      });
    }
  }
  RunCase(t, "gemm_nt 37x45x52",
          [&](double* max_abs) { return GemmCase(ctx, 37, 45, 52, 99, max_abs); });

  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("total %.2fs\n", secs);
  std::printf("%d passed, %d failed\n", t.passed, t.failed);
  return t.failed == 0 && t.passed > 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  if (!ParseArgs(argc, argv, &cfg)) {
    std::fprintf(stderr,
                 "usage: %s [--device SPEC] [--precision fp32|fp16] [--all-algorithms | --list | "
                 "--jit-probe]\n",
                 argv[0]);
    return 2;
  }
  try {
    return Run(cfg);
  } catch (const std::exception& e) {
    // No device, no OpenCL library, or a failure outside any case.
    std::printf("error: %s\n", e.what());
    std::printf("0 passed, 1 failed\n");
    return 1;
  }
}
