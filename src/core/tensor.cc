// TensorView helpers and the owning host Tensor.
#include "linattn/tensor.h"

#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/half.h"

namespace linattn {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: case DType::kI32: return 4;
    case DType::kF16: case DType::kBF16: return 2;
    case DType::kI64: case DType::kF64: return 8;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "fp32";
    case DType::kF16: return "fp16";
    case DType::kBF16: return "bf16";
    case DType::kI32: return "int32";
    case DType::kI64: return "int64";
    case DType::kF64: return "fp64";
  }
  return "?";
}

bool dtype_is_float(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kF64;
}

std::string device_name(Device d) {
  return d.type == DeviceType::kCPU ? std::string("cpu") : "cuda:" + std::to_string(d.index);
}

int64_t TensorView::numel() const {
  if (ndim <= 0) return 0;
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  return n;
}

bool TensorView::is_contiguous() const {
  int64_t expect = 1;
  for (int i = ndim - 1; i >= 0; --i) {
    if (shape[i] != 1 && strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

std::string TensorView::shape_str() const {
  if (!defined()) return "absent";
  std::string s = "[";
  for (int i = 0; i < ndim; ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

TensorView TensorView::contiguous(void* data, DType dtype, const std::vector<int64_t>& shp,
                                  Device device) {
  LINATTN_CHECK(!shp.empty() && shp.size() <= static_cast<size_t>(kMaxDims),
                "TensorView: rank must be in [1, ", kMaxDims, "], got ", shp.size());
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.device = device;
  v.ndim = static_cast<int>(shp.size());
  int64_t st = 1;
  for (int i = v.ndim - 1; i >= 0; --i) {
    LINATTN_CHECK(shp[i] >= 0, "TensorView: negative dim ", i, ": ", shp[i]);
    v.shape[i] = shp[i];
    v.strides[i] = st;
    st *= shp[i];
  }
  return v;
}

TensorView TensorView::contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape,
                                  Device device) {
  return contiguous(data, dtype, std::vector<int64_t>(shape), device);
}

Tensor::Tensor(DType dtype, std::vector<int64_t> shape) : shape_(std::move(shape)) {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  storage_.resize(static_cast<size_t>(n) * dtype_size(dtype) + 64);
  view_ = TensorView::contiguous(storage_.data(), dtype, shape_);
}

Tensor::Tensor(const Tensor& other)
    : shape_(other.shape_), storage_(other.storage_), view_(other.view_) {
  if (view_.data) view_.data = storage_.data();
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this != &other) {
    shape_ = other.shape_;
    storage_ = other.storage_;
    view_ = other.view_;
    if (view_.data) view_.data = storage_.data();
  }
  return *this;
}

double Tensor::get(int64_t i) const {
  const void* p = view_.data;
  switch (view_.dtype) {
    case DType::kF32: return static_cast<const float*>(p)[i];
    case DType::kF64: return static_cast<const double*>(p)[i];
    case DType::kF16: return fp16_bits_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::kBF16: return bf16_bits_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::kI32: return static_cast<const int32_t*>(p)[i];
    case DType::kI64: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
  }
  return 0;
}

void Tensor::set(int64_t i, double v) {
  void* p = view_.data;
  switch (view_.dtype) {
    case DType::kF32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DType::kF64: static_cast<double*>(p)[i] = v; break;
    case DType::kF16: static_cast<uint16_t*>(p)[i] = float_to_fp16_bits(static_cast<float>(v)); break;
    case DType::kBF16: static_cast<uint16_t*>(p)[i] = float_to_bf16_bits(static_cast<float>(v)); break;
    case DType::kI32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
    case DType::kI64: static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); break;
  }
}

Tensor Tensor::to(DType dtype) const {
  Tensor out(dtype, shape_);
  const int64_t n = numel();
  for (int64_t i = 0; i < n; ++i) out.set(i, get(i));
  return out;
}

}  // namespace linattn
