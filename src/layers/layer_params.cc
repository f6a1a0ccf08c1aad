// LinearAttentionLayer: parameter table (FLA state-dict names), initialisation, safetensors
// load/save, and the activation reservation.
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "layers/layer_impl.h"
#include "linattn/error.h"

namespace linattn {

namespace {
[[noreturn]] void fail(const std::string& msg) {
  throw Error(ErrorCode::kInvalidArgument, FailureCategory::kNone, __FILE__, __LINE__, msg);
}
const char* st_dtype(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    default: return "?";
  }
}
}  // namespace

std::string LayerConfig::describe() const {
  return std::string(kind == LayerKind::kKda ? "KDA" : "GatedDeltaNet") + " hidden=" + std::to_string(hidden_size) +
         " H=" + std::to_string(num_heads) + " HV=" + std::to_string(num_v_heads) + " K=" +
         std::to_string(head_k_dim) + " V=" + std::to_string(head_v_dim) + " W=" + std::to_string(conv_size);
}

TensorView Param::view() const {
  return TensorView::contiguous(value.data(), dtype, shape, value.device());
}
TensorView Param::grad_view() const {
  return TensorView::contiguous(grad.data(), DType::kF32, shape, grad.device());
}

LinearAttentionLayer::Impl::Impl(const LayerConfig& c, Device d) : cfg(c), device(d) {
  if (cfg.kind == LayerKind::kKda && cfg.num_v_heads != cfg.num_heads)
    fail("num_v_heads: KDA layers use HV = H = " + std::to_string(cfg.num_heads) + ", got " +
         std::to_string(cfg.num_v_heads));
  if (cfg.dtype != DType::kF32 && cfg.dtype != DType::kBF16 && cfg.dtype != DType::kF16)
    fail(std::string("dtype: expected fp32, bf16 or fp16, got ") + dtype_name(cfg.dtype));
  if (cfg.dtype != DType::kF32 && d.type == DeviceType::kCPU)  // valid, not implemented: Unsupported
    throw Error(ErrorCode::kUnsupported, FailureCategory::kUnsupportedOp, __FILE__, __LINE__,
                std::string("dtype: layers on the CPU support fp32 (OpenBLAS sgemm), got ") + dtype_name(cfg.dtype));
  const int64_t hid = cfg.hidden_size, kd = cfg.key_dim(), vd = cfg.value_dim(), HV = cfg.num_v_heads;
  const int64_t W = cfg.conv_size, V = cfg.head_v_dim;
  idx.q = add_param("q_proj.weight", {kd, hid}, true);
  idx.k = add_param("k_proj.weight", {kd, hid}, true);
  idx.v = add_param("v_proj.weight", {vd, hid}, true);
  idx.conv_q = add_param("q_conv1d.weight", {kd, W}, false);
  idx.conv_k = add_param("k_conv1d.weight", {kd, W}, false);
  idx.conv_v = add_param("v_conv1d.weight", {vd, W}, false);
  idx.b = add_param("b_proj.weight", {HV, hid}, true);
  if (cfg.kind == LayerKind::kGatedDeltaNet) {
    idx.a = add_param("a_proj.weight", {HV, hid}, true);
    idx.g = add_param("g_proj.weight", {vd, hid}, true);
    idx.dt_bias = add_param("dt_bias", {HV}, false);
  } else {
    idx.f0 = add_param("f_proj.0.weight", {V, hid}, true);
    idx.f1 = add_param("f_proj.1.weight", {HV * cfg.head_k_dim, V}, true);
    idx.g0 = add_param("g_proj.0.weight", {V, hid}, true);
    idx.g1 = add_param("g_proj.1.weight", {vd, V}, true);
    idx.g1_bias = add_param("g_proj.1.bias", {vd}, true);
    idx.dt_bias = add_param("dt_bias", {HV * cfg.head_k_dim}, false);
  }
  idx.A_log = add_param("A_log", {HV}, false);
  idx.norm = add_param("o_norm.weight", {V}, false);
  idx.o = add_param("o_proj.weight", {hid, vd}, true);
}

int LinearAttentionLayer::Impl::add_param(const std::string& name, std::vector<int64_t> shape, bool layer_dtype) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  Param p;
  p.name = name;
  p.shape = std::move(shape);
  p.dtype = layer_dtype ? cfg.dtype : DType::kF32;
  p.value = Buffer(device, static_cast<size_t>(n) * dtype_size(p.dtype));
  p.grad = Buffer(device, static_cast<size_t>(n) * 4);
  params.push_back(std::move(p));
  return static_cast<int>(params.size()) - 1;
}

TensorView LinearAttentionLayer::Impl::rows(const Buffer& b, int64_t T, int64_t width, DType dt) const {
  return TensorView::contiguous(b.data(), dt, {T, width}, device);
}

LinearAttentionLayer::LinearAttentionLayer(const LayerConfig& config, Device device)
    : impl_(std::make_unique<Impl>(config, device)) {}
LinearAttentionLayer::~LinearAttentionLayer() = default;
LinearAttentionLayer::LinearAttentionLayer(LinearAttentionLayer&&) noexcept = default;
LinearAttentionLayer& LinearAttentionLayer::operator=(LinearAttentionLayer&&) noexcept = default;
const LayerConfig& LinearAttentionLayer::config() const { return impl_->cfg; }
std::vector<Param>& LinearAttentionLayer::params() { return impl_->params; }
int64_t LinearAttentionLayer::capacity_tokens() const { return impl_->acts.T_max; }

Param& LinearAttentionLayer::param(const std::string& name) {
  for (auto& p : impl_->params)
    if (p.name == name) return p;
  fail("param: no parameter named '" + name + "' in " + impl_->cfg.describe());
}

void LinearAttentionLayer::init_random(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const bool kda = impl_->cfg.kind == LayerKind::kKda;
  for (auto& p : impl_->params) {
    Tensor host(DType::kF32, p.shape);
    const int64_t n = host.numel();
    if (p.name == "A_log") {
      std::uniform_real_distribution<double> u(kda ? 1.0 : 1e-3, 16.0);
      for (int64_t i = 0; i < n; ++i) host.set(i, std::log(u(rng)));
    } else if (p.name == "dt_bias") {
      std::uniform_real_distribution<double> u(std::log(1e-3), std::log(0.1));
      for (int64_t i = 0; i < n; ++i) {
        const double dt = std::max(std::exp(u(rng)), 1e-4);
        host.set(i, dt + std::log(-std::expm1(-dt)));  // softplus^-1(dt)
      }
    } else if (p.name == "o_norm.weight") {
      std::uniform_real_distribution<double> u(0.8, 1.2);
      for (int64_t i = 0; i < n; ++i) host.set(i, u(rng));
    } else {
      const double fan_in = static_cast<double>(p.shape.size() > 1 ? p.shape[1] : p.shape[0]);
      std::uniform_real_distribution<double> u(-1.0 / std::sqrt(fan_in), 1.0 / std::sqrt(fan_in));
      for (int64_t i = 0; i < n; ++i) host.set(i, u(rng));
    }
    copy_tensor(p.view(), host.to(p.dtype).view());
  }
  stream_synchronize(impl_->device);  // uploads done before any stream reads the weights
}

void LinearAttentionLayer::save_safetensors(const std::string& path, const std::string& prefix) const {
  nlohmann::json header = nlohmann::json::object();
  size_t off = 0;
  std::vector<Tensor> hosts;
  for (const auto& p : impl_->params) {
    Tensor h(p.dtype, p.shape);
    copy_tensor(h.view(), p.view());
    const size_t nb = h.view().nbytes();
    header[prefix + p.name] = {{"dtype", st_dtype(p.dtype)}, {"shape", p.shape}, {"data_offsets", {off, off + nb}}};
    off += nb;
    hosts.push_back(std::move(h));
  }
  std::string hs = header.dump();
  while (hs.size() % 8) hs += ' ';
  std::ofstream f(path, std::ios::binary);
  if (!f) fail("path: cannot open '" + path + "' for writing");
  const uint64_t hlen = hs.size();
  f.write(reinterpret_cast<const char*>(&hlen), 8);
  f.write(hs.data(), static_cast<std::streamsize>(hs.size()));
  for (const auto& h : hosts) f.write(static_cast<const char*>(h.view().data), static_cast<std::streamsize>(h.view().nbytes()));
  if (!f) fail("path: write to '" + path + "' failed");
}

void LinearAttentionLayer::load_safetensors(const std::string& path, const std::string& prefix) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("path: cannot open safetensors file '" + path + "'");
  uint64_t hlen = 0;
  f.read(reinterpret_cast<char*>(&hlen), 8);
  if (!f || hlen > (100u << 20)) fail("path: '" + path + "' is not a safetensors file (bad header length)");
  std::string hs(hlen, '\0');
  f.read(hs.data(), static_cast<std::streamsize>(hlen));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(hs);
  } catch (const std::exception& e) {
    fail("path: '" + path + "' has a malformed safetensors header: " + e.what());
  }
  const std::streamoff base = static_cast<std::streamoff>(8 + hlen);
  for (auto& p : impl_->params) {
    const std::string key = prefix + p.name;
    if (!header.contains(key)) fail("safetensors: '" + path + "' has no tensor '" + key + "'");
    const auto& e = header[key];
    std::vector<int64_t> shape = e.at("shape").get<std::vector<int64_t>>();
    if (p.name.find("conv1d") != std::string::npos && shape.size() == 3 && shape[1] == 1) shape = {shape[0], shape[2]};
    if (shape != p.shape) fail("safetensors: '" + key + "' has shape " + e.at("shape").dump() + ", expected " + nlohmann::json(p.shape).dump());
    const std::string dt = e.at("dtype").get<std::string>();
    const DType src = dt == "F32" ? DType::kF32 : dt == "BF16" ? DType::kBF16 : dt == "F16" ? DType::kF16 : DType::kI64;
    if (src == DType::kI64) fail("safetensors: '" + key + "' has dtype " + dt + ", expected F32, BF16 or F16");
    const auto offs = e.at("data_offsets").get<std::vector<uint64_t>>();
    Tensor raw(src, p.shape);
    if (offs.size() != 2 || offs[1] - offs[0] != raw.view().nbytes())
      fail("safetensors: '" + key + "' data_offsets do not match its shape and dtype");
    f.seekg(base + static_cast<std::streamoff>(offs[0]));
    f.read(static_cast<char*>(raw.view().data), static_cast<std::streamsize>(raw.view().nbytes()));
    if (!f) fail("safetensors: '" + path + "' is truncated at tensor '" + key + "'");
    copy_tensor(p.view(), raw.to(p.dtype).view());
  }
  stream_synchronize(impl_->device);
}

void LinearAttentionLayer::reserve(int64_t T_max, int64_t N_max, const ExecContext& ctx) {
  impl_->reserve(T_max, N_max, ctx);
}

void LinearAttentionLayer::Impl::reserve(int64_t T_max, int64_t N_max, const ExecContext& ctx) {
  auto& a = acts;
  const auto& c = cfg;
  dense_prepare(device, ctx);  // CUDA: cuBLAS handle + workspace of this stream, before any capture
  if (T_max <= a.T_max && N_max <= a.N_max) return;
  T_max = std::max(T_max, a.T_max);
  N_max = std::max(N_max, a.N_max);
  if (a.T_max > 0) {
    retired_acts.push_back(std::move(a));
    retired_workspaces.push_back(std::move(workspace));
    a = layers::Acts{};
  }
  const Device d = device;
  const size_t es = dtype_size(c.dtype);
  auto buf = [&](int64_t width, size_t e = 0) {
    return Buffer(d, static_cast<size_t>(std::max<int64_t>(T_max * width, 1)) * (e ? e : es));
  };
  const int64_t hid = c.hidden_size, kd = c.key_dim(), vd = c.value_dim(), HV = c.num_v_heads, V = c.head_v_dim;
  a.xz = buf(hid); a.q_pre = buf(kd); a.k_pre = buf(kd); a.v_pre = buf(vd);
  a.q = buf(kd); a.k = buf(kd); a.v = buf(vd); a.graw = buf(c.gate_dim()); a.fmid = buf(V);
  a.beta = buf(HV); a.o = buf(vd); a.gmid = buf(V); a.gout = buf(vd); a.rstd = buf(HV, 4); a.normed = buf(vd);
  a.ones = buf(1);
  a.dyz = buf(hid); a.dnormed = buf(vd); a.d_o = buf(vd); a.dgout = buf(vd); a.dgmid = buf(V);
  a.dq = buf(kd); a.dk = buf(kd); a.dv = buf(vd); a.dgraw = buf(c.gate_dim()); a.dfmid = buf(V);
  a.dbeta = buf(HV); a.dq_pre = buf(kd); a.dk_pre = buf(kd); a.dv_pre = buf(vd);
  if (c.dtype != DType::kF32) a.dxf = buf(hid, 4);
  Tensor ones(c.dtype, {T_max, 1});
  for (int64_t i = 0; i < T_max; ++i) ones.set(i, 1.0);
  copy_tensor(TensorView::contiguous(a.ones.data(), c.dtype, {T_max, 1}, d), ones.view(), ctx);
  for (Buffer* b : {&a.o, &a.q, &a.k, &a.v, &a.graw, &a.beta})
    fill_zero(TensorView::contiguous(b->data(), c.dtype, {static_cast<int64_t>(b->bytes() / es)}, d), ctx);
  a.T_max = T_max;
  a.N_max = N_max;
  // Graph-mode scratch for the capacity (sizes depend only on shapes, options and threads).
  a.cu_probe = Buffer(d, static_cast<size_t>(N_max + 1) * 4);
  fill_zero(TensorView::contiguous(a.cu_probe.data(), DType::kI32, {N_max + 1}, d), ctx);
  {  // the chunk op's training cache for the capacity (graph-mode sizes bound every eager call's)
    LayerRunOptions g;
    g.use_graph = true;
    const ChunkAttnInputs pin = attn_inputs(T_max, a.cu_probe.view(DType::kI32, {N_max + 1}), {});
    a.attn_saved = Buffer(d, std::max<size_t>(chunk_attn_saved_bytes(pin, attn_options(g, N_max, false)), 1));
  }
  workspace = Buffer(d, graph_workspace_bytes(T_max, a.cu_probe.view(DType::kI32, {N_max + 1}), ctx));
  stream_synchronize(d, ctx);
}

}  // namespace linattn
