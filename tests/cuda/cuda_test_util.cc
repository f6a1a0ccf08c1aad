// Device copies and CUDA forward runs for the CUDA tests (see cuda_test_util.h).
#include "cuda_test_util.h"

#include <cstring>

#include "meta/chunk_attn_desc.h"

namespace linattn::test {

bool have_cuda_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

TensorView DevArena::alloc(DType dtype, std::vector<int64_t> shape) {
  size_t bytes = dtype_size(dtype);
  for (int64_t s : shape) bytes *= static_cast<size_t>(s);
  bufs.push_back(std::make_unique<Buffer>(cuda0(), bytes == 0 ? 16 : bytes));
  return TensorView::contiguous(bufs.back()->data(), dtype, shape, cuda0());
}

TensorView DevArena::alloc_like(const Tensor& t) {
  TensorView v = alloc(t.dtype(), t.shape());
  copy_tensor(v, t.view());
  // Asynchronous on the legacy stream, which non-blocking test streams do not wait for.
  stream_synchronize(cuda0(), ExecContext{});
  return v;
}

TensorView DevArena::upload(const Tensor& t) { return t.defined() ? alloc_like(t) : TensorView{}; }

Tensor download(const TensorView& dev) {
  if (!dev.defined()) return Tensor();
  Tensor h(dev.dtype, std::vector<int64_t>(dev.shape.begin(), dev.shape.begin() + dev.ndim));
  copy_tensor(h.view(), dev);
  if (cudaDeviceSynchronize() != cudaSuccess) throw std::runtime_error("cudaDeviceSynchronize failed");
  return h;
}

std::unique_ptr<DevChunkAttn> to_device(const ChunkAttnData& d) {
  auto r = std::make_unique<DevChunkAttn>();
  r->in.q = r->arena.upload(d.q);
  r->in.k = r->arena.upload(d.k);
  r->in.v = r->arena.upload(d.v);
  r->in.g = r->arena.upload(d.g);
  r->in.beta = r->arena.upload(d.beta);
  r->in.A_log = r->arena.upload(d.A_log);
  r->in.dt_bias = r->arena.upload(d.dt_bias);
  r->in.initial_state = r->arena.upload(d.initial_state);
  r->in.cu_seqlens = r->arena.upload(d.cu_seqlens);
  const ChunkAttnOutTensors host = alloc_outputs(d, d.spec.dtype, DType::kF32);
  r->out.o = r->arena.upload(host.o);
  r->out.final_state = r->arena.upload(host.final_state);
  return r;
}

ChunkAttnOutTensors outputs_to_host(const DevChunkAttn& dev) {
  ChunkAttnOutTensors r;
  r.o = download(dev.out.o);
  r.final_state = download(dev.out.final_state);
  return r;
}

ChunkAttnOutTensors run_cuda_fwd(const ChunkAttnData& d, api::CudaGdnPath path, int vs) {
  auto dev = to_device(d);
  const meta::ChunkAttnDesc desc = meta::describe_chunk_attn(dev->in, d.opt());
  api::chunk_attn_fwd_cuda_forced(desc, dev->in, dev->out, d.opt(), ExecContext{}, path, vs);
  return outputs_to_host(*dev);
}

}  // namespace linattn::test
