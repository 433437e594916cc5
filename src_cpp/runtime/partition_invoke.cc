// The run side of a partition (runtime/partition.h): uploads, the kernels and chunk
// copies enqueued without host sync, downloads and one clFinish per invoke; tensor
// capture and profile records. Planning and binding are in partition.cc.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "cl/errors.h"
#include "common/error.h"
#include "common/half.h"
#include "runtime/partition.h"

namespace clgpu {
namespace {
// Waits for the queue when an invoke leaves by an exception: work already enqueued
// (non-blocking reads into TFLite's tensors, kernels) must not land after invoke
// has returned an error and the interpreter may have freed that memory.
struct DrainOnError {
  cl_command_queue queue;
  bool armed = true;
  ~DrainOnError() {
    if (armed) Cl().clFinish(queue);
  }
};

// Run-time indices read from partition inputs (Op::index_inputs), directly or through flat copies
// (delegate/claim.h): TFLite's GATHER and EMBEDDING_LOOKUP fail the invoke on one outside
// [0, extent), and so does the partition, on the host before anything is enqueued (a kernel could
// only clamp it).
void CheckIndexInputs(const std::vector<std::unique_ptr<Op>>& ops,
                      const std::map<int, int>& copied_from, const TfLiteContext* ctx) {
  auto source = [&](int t) {
    for (auto it = copied_from.find(t); it != copied_from.end(); it = copied_from.find(t))
      t = it->second;
    return t;
  };
  for (const auto& op : ops)
    for (const Op::IndexInput& x : op->index_inputs()) {
      const TfLiteTensor& t = ctx->tensors[source(x.tensor)];
      size_t n = 1;
      for (int d = 0; t.dims && d < t.dims->size; ++d) n *= size_t(std::max(t.dims->data[d], 0));
      if (t.type != kTfLiteInt32 || (n && (!t.data.raw || t.bytes < 4 * n)))
        throw Error(x.what + " positions (tensor " + std::to_string(x.tensor) +
                    ") are not int32 values of their shape");
      const auto* v = static_cast<const int32_t*>(t.data.raw_const);
      for (size_t i = 0; i < n; ++i)
        if (v[i] < 0 || v[i] >= x.extent)
          throw Error(x.what + ": index out of bounds. Got " + std::to_string(v[i]) +
                      ", and bounds are [0, " + std::to_string(x.extent - 1) + "]");
    }
}
}  // namespace

cl_event* Partition::Recorder::Slot(int op, int64_t bytes, int step) {
  if (!on) return nullptr;
  events.emplace_back();
  event_op.push_back(op);
  event_step.push_back(step);
  event_bytes.push_back(bytes);
  return &last;
}

void Partition::Recorder::Keep() {
  if (on) events.back() = Event(std::exchange(last, nullptr));
}

// A conversion kernel of fp16 storage (none: nothing), recorded as an upload (-1) or a
// download (-2).
void Partition::RunConvert(cl_command_queue q, const Launch& l, int which, Recorder& rec) {
  if (!l.kernel) return;
  CheckCl(Cl().clEnqueueNDRangeKernel(q, l.kernel.get(), 1, nullptr, l.global, nullptr, 0, nullptr,
                                      rec.Slot(which, 0)),
          "clEnqueueNDRangeKernel(convert)");
  rec.Keep();
}

// A ranged value: each range straight into / out of its piece, or a float value under fp16
// storage through transfer_staging_ and a conversion (the in-order queue keeps the staging
// buffer's uses apart).
void Partition::TransferRanges(cl_command_queue q, const Value& v, char* host, bool upload,
                               Recorder& rec) {
  const ClApi& cl = Cl();
  const size_t eb = HostElementBytes(v.type);
  for (const Value::Range& r : v.ranges) {
    const size_t bytes = (r.end - r.begin) * eb;
    char* at = host + r.begin * eb;
    const bool staged = Converted(v);
    cl_mem mem = staged ? transfer_staging_.get() : v.piece_buffers[r.piece].get();
    const size_t off = staged ? 0 : (r.begin - v.pieces[r.piece].begin) * eb;
    if (upload) {
      CheckCl(cl.clEnqueueWriteBuffer(q, mem, CL_FALSE, off, bytes, at, 0, nullptr,
                                      rec.Slot(-1, int64_t(bytes))),
              "clEnqueueWriteBuffer");
      rec.Keep();
      if (staged) RunConvert(q, r.convert, -1, rec);
    } else {
      if (staged) RunConvert(q, r.convert, -2, rec);
      CheckCl(cl.clEnqueueReadBuffer(q, mem, CL_FALSE, off, bytes, at, 0, nullptr,
                                     rec.Slot(-2, int64_t(bytes))),
              "clEnqueueReadBuffer");
      rec.Keep();
    }
  }
}

// Bytes a zero-copy map/unmap moves: none where the device works in host memory, the tensor
// where the driver keeps a device copy (a discrete GPU).
int64_t Partition::ZeroCopyBytes(size_t bytes) const {
  return host_->env().device().host_unified_memory ? int64_t(0) : int64_t(bytes);
}

void Partition::EnqueueUploads(TfLiteContext* ctx, cl_command_queue q, Recorder& rec,
                               InvokeCounts& counts) {
  const ClApi& cl = Cl();
  for (int t : uploads_) {
    const TfLiteTensor& x = ctx->tensors[t];
    const Value& v = values_[t];
    const size_t bytes = v.host_bytes();
    if (!bytes) continue;
    if (!x.data.raw || x.bytes < bytes)
      throw Error("partition input tensor " + std::to_string(t) + " holds " +
                  std::to_string(x.data.raw ? x.bytes : 0) + " bytes where its shape needs " +
                  std::to_string(bytes) + " (an op before it sized it otherwise)");
    ++counts.uploads;
    counts.upload_bytes += int64_t(bytes);
    if (v.ranged) {
      TransferRanges(q, v, static_cast<char*>(x.data.raw), true, rec);
      continue;
    }
    if (zero_copy_) {
      // The buffer wraps x.data: map + unmap makes the host's writes visible. The
      // map must invalidate: a plain CL_MAP_WRITE lets a driver with a device copy
      // (NVIDIA) first copy the old device contents over the new input. Such a driver
      // copies at the unmap, so that is the command timed (NVIDIA stamps the map,
      // which moves nothing, with the queue's previous command's times).
      cl_int err = CL_SUCCESS;
      void* p = cl.clEnqueueMapBuffer(q, TransferMem(t), CL_FALSE, CL_MAP_WRITE_INVALIDATE_REGION,
                                      0, bytes, 0, nullptr, nullptr, &err);
      CheckCl(err, "clEnqueueMapBuffer");
      CheckCl(cl.clEnqueueUnmapMemObject(q, TransferMem(t), p, 0, nullptr,
                                         rec.Slot(-1, ZeroCopyBytes(bytes))),
              "clEnqueueUnmapMemObject");
      rec.Keep();
    } else {
      CheckCl(cl.clEnqueueWriteBuffer(q, TransferMem(t), CL_FALSE, 0, bytes, x.data.raw_const, 0,
                                      nullptr, rec.Slot(-1, bytes)),
              "clEnqueueWriteBuffer");
      rec.Keep();
    }
    RunConvert(q, v.convert, -1, rec);
  }
}

// Every op's kernels and chunk copies, in order; the number of commands.
int Partition::EnqueueOps(cl_command_queue q, Recorder& rec) {
  const ClApi& cl = Cl();
  int commands = 0;
  for (size_t i = 0; i < ops_.size(); ++i) {
    if (RunsNothing(i)) continue;
    const std::vector<Step>& steps = runs_[i].steps;
    for (size_t k = 0; k < steps.size(); ++k) {
      const Step& st = steps[k];
      if (st.launch && !LaunchFormTrial::Runs(*st.launch, form_)) continue;
      cl_event* ev = rec.Slot(static_cast<int>(i), 0, static_cast<int>(k));
      if (st.launch) {
        const Launch& l = *st.launch;
        const size_t* local = l.local[0] ? l.local : nullptr;
        CheckCl(cl.clEnqueueNDRangeKernel(q, l.kernel.get(), l.dims, nullptr, l.global, local, 0,
                                          nullptr, ev),
                "clEnqueueNDRangeKernel");
      } else {
        EnqueueCopy(q, st.copy, ev);
      }
      rec.Keep();
      ++commands;
      // Some drivers (NVIDIA's) hold enqueued work until a flush: submit early so
      // the device runs while the host is still enqueueing, then in batches.
      if (commands == flush_first_ || commands % flush_every_ == 0)
        CheckCl(cl.clFlush(q), "clFlush");
    }
  }
  return commands;
}

// The partition's outputs, read (or mapped: mapped_, unmapped after the wait) without a wait.
void Partition::EnqueueDownloads(TfLiteContext* ctx, cl_command_queue q, Recorder& rec,
                                 InvokeCounts& counts) {
  const ClApi& cl = Cl();
  std::vector<std::pair<cl_mem, void*>>& mapped = mapped_;  // reused: no allocation per invoke
  mapped.clear();
  for (int t : downloads_) {
    TfLiteTensor& x = ctx->tensors[t];
    const Value& v = values_[t];
    const size_t bytes = v.host_bytes();
    if (!bytes) continue;
    if (!x.data.raw || x.bytes < bytes) throw Error("partition output has no buffer");
    ++counts.downloads;
    counts.download_bytes += int64_t(bytes);
    if (v.kind == Kind::kConstant) {
      std::memcpy(x.data.raw,
                  v.type == ValueType::kFloat ? static_cast<const void*>(v.constant.data())
                                              : v.constant_bytes.data(),
                  bytes);
      continue;
    }
    if (v.ranged) {
      TransferRanges(q, v, static_cast<char*>(x.data.raw), false, rec);
      continue;
    }
    RunConvert(q, v.convert, -2, rec);
    if (zero_copy_) {
      cl_int err = CL_SUCCESS;
      void* p = cl.clEnqueueMapBuffer(q, TransferMem(t), CL_FALSE, CL_MAP_READ, 0, bytes, 0,
                                      nullptr, rec.Slot(-2, ZeroCopyBytes(bytes)), &err);
      if (err != CL_SUCCESS) {
        // Leave no output mapped behind the error.
        for (const auto& [mem, ptr] : mapped)
          cl.clEnqueueUnmapMemObject(q, mem, ptr, 0, nullptr, nullptr);
        cl.clFinish(q);
      }
      CheckCl(err, "clEnqueueMapBuffer");
      rec.Keep();
      mapped.emplace_back(TransferMem(t), p);
    } else {
      CheckCl(cl.clEnqueueReadBuffer(q, TransferMem(t), CL_FALSE, 0, bytes, x.data.raw, 0, nullptr,
                                     rec.Slot(-2, bytes)),
              "clEnqueueReadBuffer");
      rec.Keep();
    }
  }
}

void Partition::Invoke(TfLiteContext* ctx) {
  if (warming_ && InvokeWarm(ctx)) return;
  const auto t0 = std::chrono::steady_clock::now();
  DrainOnError drain{host_->queue()};
  // A dynamic input resized without a prepare.
  if (InputShapesChanged(ctx) || !device_planned_) Plan(ctx);
  if (!bound_ || HostPointersChanged(ctx)) Bind(ctx);
  CheckIndexInputs(ops_, copied_from_, ctx);
  const ClApi& cl = Cl();
  cl_command_queue q = host_->queue();
  // With profiling on, every enqueue gets an event: -1 = upload, -2 = download,
  // otherwise the index of the op (and of its step).
  Recorder rec{host_->settings().profiling, last_event_};
  InvokeCounts counts;  // this invoke's syncs and boundary transfers
  form_ = forms_.Next();
  EnqueueUploads(ctx, q, rec, counts);
  const int commands = EnqueueOps(q, rec);
  EnqueueDownloads(ctx, q, rec, counts);
  EnqueueOverflowRead(q);  // waited for with the outputs
  const auto t_enqueued = std::chrono::steady_clock::now();
  // Mapped outputs are unmapped after the sync: the data is in TFLite's memory.
  // Every one is unmapped even if one fails, and the first failure is reported.
  cl_int unmap_err = CL_SUCCESS;
  for (const auto& [mem, p] : mapped_) {
    const cl_int e = cl.clEnqueueUnmapMemObject(q, mem, p, 0, nullptr, nullptr);
    if (unmap_err == CL_SUCCESS) unmap_err = e;
  }
  mapped_.clear();
  CheckCl(unmap_err, "clEnqueueUnmapMemObject");
  CheckCl(cl.clFinish(q), "clFinish");
  ++counts.host_syncs;
  const auto t_done = std::chrono::steady_clock::now();
  counts.enqueue_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t_enqueued - t0).count();
  counts.wait_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(t_done - t_enqueued).count();
  drain.armed = false;
  // Values past fp16's range under precision auto: this invoke runs again, in float32.
  if (HandleOverflow()) return Invoke(ctx);
  forms_.Record(form_, counts.enqueue_ns + counts.wait_ns);
  if (const double r = forms_.last_ratio(); r > 0)
    counts.form_pairs = 1, counts.form_pair_log_ratio = std::log(r);
  counts.fewer_launch_invokes = form_ == LaunchForm::kFewerLaunches;
  host_->CountInvoke(counts);
  if (host_->settings().capture_tensors) CaptureValues();
  if (rec.on) {
    const auto ns = [&](auto t) {
      return std::chrono::duration<double, std::nano>(t - t0).count();
    };
    RecordProfile(rec.events, rec.event_op, rec.event_step, rec.event_bytes,
                  ns(std::chrono::steady_clock::now()), ns(t_enqueued), commands);
  }
}

// Each activation as floats: float values as they are, quantized ones as their integers (errors
// against the CPU's tensors then read in quanta).
void Partition::CaptureValues() {
  for (const auto& [t, v] : values_) {
    if (v.kind == Kind::kConstant || (!Mem(t) && !v.split())) continue;
    const size_t n = static_cast<size_t>(NumElements(v.shape));
    // Zero-copy boundary tensors are TFLite's memory itself.
    const size_t elem = v.host_ptr && !Converted(v) ? HostElementBytes(v.type) : ElemBytes(t);
    CapturedTensor c{v.shape, std::vector<float>(n)};
    if (n) {
      std::vector<unsigned char> raw(n * elem);
      const Storage st = StorageOf(t);
      for (size_t p = 0; p < st.mems.size(); ++p) {
        const Piece& piece = st.pieces[p];
        const size_t offset = st.offsets.empty() ? 0 : st.offsets[p];
        CheckCl(Cl().clEnqueueReadBuffer(host_->queue(), st.mems[p], CL_TRUE, offset,
                                         (piece.end - piece.begin) * elem,
                                         raw.data() + piece.begin * elem, 0, nullptr, nullptr),
                "clEnqueueReadBuffer(capture)");
      }
      if (v.type == ValueType::kInt8) {
        for (size_t i = 0; i < n; ++i) c.data[i] = static_cast<int8_t>(raw[i]);
      } else if (v.type == ValueType::kUInt8 || v.type == ValueType::kBool) {
        for (size_t i = 0; i < n; ++i) c.data[i] = raw[i];
      } else if (v.type == ValueType::kComplex64) {  // the real parts
        for (size_t i = 0; i < n; ++i) std::memcpy(&c.data[i], raw.data() + 8 * i, 4);
      } else if (v.type == ValueType::kInt32) {
        for (size_t i = 0; i < n; ++i) {
          int32_t x;
          std::memcpy(&x, raw.data() + 4 * i, 4);
          c.data[i] = static_cast<float>(x);
        }
      } else if (elem == 2) {
        const auto* h = reinterpret_cast<const uint16_t*>(raw.data());
        for (size_t i = 0; i < n; ++i) c.data[i] = HalfToFloat(h[i]);
      } else {
        std::memcpy(c.data.data(), raw.data(), n * 4);
      }
    }
    host_->Capture(t, std::move(c));
  }
}

void Partition::RecordProfile(const std::vector<Event>& events, const std::vector<int>& event_op,
                              const std::vector<int>& event_step,
                              const std::vector<int64_t>& event_bytes, double wall_ns,
                              double enqueue_ns, int commands) {
  Profiler& prof = host_->profiler();
  std::set<int> attributed;  // ops whose work and traffic went to a kernel record
  cl_ulong first = ~cl_ulong{0}, last = 0;
  for (size_t e = 0; e < events.size(); ++e) {
    const auto [start, end] = EventTimes(events[e].get());
    if (start && end >= start) first = std::min(first, start), last = std::max(last, end);
    const int op = event_op[e];
    if (op < 0) {
      prof.AddTransfer(id_, op == -1, event_bytes[e], start, end);
      continue;
    }
    const Op& o = *ops_[op];
    const Step& st = runs_[op].steps.at(event_step[e]);
    KernelRecord r;
    r.partition = id_;
    r.node = o.node_index();
    r.op = o.type_name();
    r.algorithm = st.owner->algorithm();
    r.kernel = st.launch ? st.launch->name : st.name;
    r.shape = op_profiles_[op].shape;
    // Work and traffic are attributed to the op's first kernel only (a flat copy's first copy).
    if ((st.launch || runs_[op].flat) && attributed.insert(op).second) {
      r.flops = op_profiles_[op].flops;
      r.bytes = op_profiles_[op].bytes;
    }
    prof.AddKernel(r, start, end);
  }
  prof.EndInvoke(id_, wall_ns, enqueue_ns, last > first ? double(last - first) : 0.0, commands);
}

}  // namespace clgpu
