// Helpers of the CUDA backward tests: NaN-filled device gradients, device cotangents, a direct
// call of the CUDA backward with a forced path (token-by-token or chunked, optional V-slice), and
// the checks shared by the backward tests (padding rows zero, bitwise equality).
#pragma once
#include <cstring>
#include <memory>
#include <string>

#include "cuda_test_util.h"
#include "meta/chunk_attn_desc.h"

namespace linattn::test {

struct DevGrads {
  DevArena arena;
  ChunkAttnGrads g;
  TensorView d_o, dht;
};

inline std::unique_ptr<DevGrads> grads_to_device(const ChunkAttnGradTensors& h, const ChunkAttnCotangents& c) {
  auto r = std::make_unique<DevGrads>();
  r->g.dq = r->arena.upload(h.dq);
  r->g.dk = r->arena.upload(h.dk);
  r->g.dv = r->arena.upload(h.dv);
  r->g.dg = r->arena.upload(h.dg);
  r->g.dbeta = r->arena.upload(h.dbeta);
  r->g.dA_log = r->arena.upload(h.dA_log);
  r->g.ddt_bias = r->arena.upload(h.ddt_bias);
  r->g.dinitial_state = r->arena.upload(h.dinitial_state);
  r->d_o = r->arena.upload(c.d_o);
  r->dht = r->arena.upload(c.d_final_state);
  return r;
}

inline ChunkAttnGradTensors grads_to_host(const ChunkAttnGrads& g) {
  ChunkAttnGradTensors r;
  r.dq = download(g.dq);
  r.dk = download(g.dk);
  r.dv = download(g.dv);
  r.dg = download(g.dg);
  r.dbeta = download(g.dbeta);
  r.dA_log = download(g.dA_log);
  r.ddt_bias = download(g.ddt_bias);
  r.dinitial_state = download(g.dinitial_state);
  return r;
}

// CUDA backward of d with cotangents c; per-token gradients in grad_dtype, the rest fp32.
inline ChunkAttnGradTensors run_cuda_bwd(const ChunkAttnData& d, const ChunkAttnCotangents& c, DType grad_dtype,
                                         api::CudaGdnPath path, int vs = 0) {
  auto dev = to_device(d);
  auto dg = grads_to_device(alloc_grads(d, grad_dtype, DType::kF32), c);
  const meta::ChunkAttnDesc desc = meta::describe_chunk_attn(dev->in, d.opt());
  api::chunk_attn_bwd_cuda_forced(desc, dev->in, dg->d_o, dg->dht, dg->g, d.opt(), ExecContext{}, path, vs);
  return grads_to_host(dg->g);
}

// Every element of rows [r0, T) (dim 1) of a [B, T, ...] tensor is exactly 0.
inline ::testing::AssertionResult padding_zero(const char* name, const Tensor& t, int64_t r0) {
  if (!t.defined()) return ::testing::AssertionSuccess();
  const int64_t T = t.shape()[1], inner = t.numel() / (t.shape()[0] * T);
  for (int64_t i = r0 * inner; i < T * inner; ++i)
    if (t.get(i) != 0.0)
      return ::testing::AssertionFailure() << name << ": padding element " << i << " = " << t.get(i);
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult grads_padding_zero(const ChunkAttnData& d, const ChunkAttnGradTensors& g) {
  if (!d.cu_seqlens.defined()) return ::testing::AssertionSuccess();
  for (const auto& [name, t] : {std::pair{"dq", &g.dq}, {"dk", &g.dk}, {"dv", &g.dv}, {"dg", &g.dg},
                                {"dbeta", &g.dbeta}}) {
    const ::testing::AssertionResult r = padding_zero(name, *t, d.valid_tokens);
    if (!r) return r;
  }
  return ::testing::AssertionSuccess();
}

inline bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  return a.view().nbytes() == b.view().nbytes() &&
         std::memcmp(a.view().data, b.view().data, a.view().nbytes()) == 0;
}

inline ::testing::AssertionResult grads_bitwise(const ChunkAttnGradTensors& a, const ChunkAttnGradTensors& b) {
  const std::pair<const char*, std::pair<const Tensor*, const Tensor*>> all[] = {
      {"dq", {&a.dq, &b.dq}},         {"dk", {&a.dk, &b.dk}},
      {"dv", {&a.dv, &b.dv}},         {"dg", {&a.dg, &b.dg}},
      {"dbeta", {&a.dbeta, &b.dbeta}}, {"dA_log", {&a.dA_log, &b.dA_log}},
      {"ddt_bias", {&a.ddt_bias, &b.ddt_bias}},
      {"dinitial_state", {&a.dinitial_state, &b.dinitial_state}}};
  for (const auto& [name, t] : all)
    if (!same_bits(*t.first, *t.second)) return ::testing::AssertionFailure() << name << " differs bitwise";
  return ::testing::AssertionSuccess();
}

}  // namespace linattn::test
