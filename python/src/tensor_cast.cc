// See tensor_cast.h.
#include "tensor_cast.h"

#include <string>

#include "linattn/error.h"

namespace linattn::py {

namespace {
DType dtype_of(const Array& a, const char* name) {
  const nb::dlpack::dtype t = a.dtype();
  using Code = nb::dlpack::dtype_code;
  if (t.lanes == 1) {
    if (t.code == static_cast<uint8_t>(Code::Float)) {
      if (t.bits == 32) return DType::kF32;
      if (t.bits == 16) return DType::kF16;
      if (t.bits == 64) return DType::kF64;
    }
    if (t.code == static_cast<uint8_t>(Code::Bfloat) && t.bits == 16) return DType::kBF16;
    if (t.code == static_cast<uint8_t>(Code::Int)) {
      if (t.bits == 32) return DType::kI32;
      if (t.bits == 64) return DType::kI64;
    }
  }
  throw Error(ErrorCode::kInvalidArgument, FailureCategory::kNone, __FILE__, __LINE__,
              std::string(name) + ": unsupported dtype (code " + std::to_string(t.code) + ", " +
                  std::to_string(t.bits) + " bits); expected float32/float16/bfloat16/float64/int32/int64");
}
Device device_of(const Array& a, const char* name) {
  if (a.device_type() == nb::device::cpu::value) return Device{DeviceType::kCPU, 0};
  if (a.device_type() == nb::device::cuda::value) return Device{DeviceType::kCUDA, a.device_id()};
  throw Error(ErrorCode::kInvalidArgument, FailureCategory::kNone, __FILE__, __LINE__,
              std::string(name) + ": unsupported device type " + std::to_string(a.device_type()));
}
}  // namespace

TensorView to_view(const Array& a, const char* name) {
  TensorView v;
  if (a.ndim() == 0 || a.ndim() > static_cast<size_t>(kMaxDims))
    throw Error(ErrorCode::kInvalidArgument, FailureCategory::kNone, __FILE__, __LINE__,
                std::string(name) + ": expected rank 1.." + std::to_string(kMaxDims) + ", got " +
                    std::to_string(a.ndim()));
  v.data = const_cast<void*>(a.data());
  v.dtype = dtype_of(a, name);
  v.device = device_of(a, name);
  v.ndim = static_cast<int>(a.ndim());
  for (int i = 0; i < v.ndim; ++i) {
    v.shape[i] = static_cast<int64_t>(a.shape(i));
    v.strides[i] = static_cast<int64_t>(a.stride(i));
  }
  return v;
}

Bytes to_bytes(const OptArray& a, Device device, const char* name) {
  if (!a) return {};
  const Device got = device_of(*a, name);
  if (got != device)
    throw Error(ErrorCode::kInvalidArgument, FailureCategory::kAddressOrLifetime, __FILE__, __LINE__,
                std::string(name) + ": expected a buffer on " + device_name(device) + " (the op's device), got " +
                    device_name(got));
  int64_t want = 1;  // C-contiguous: strides (in elements) of a dense row-major array
  for (size_t i = a->ndim(); i-- > 0;) {
    if (a->shape(i) != 1 && a->stride(i) != want)
      throw Error(ErrorCode::kInvalidArgument, FailureCategory::kNone, __FILE__, __LINE__,
                  std::string(name) + ": expected a contiguous byte buffer, got stride " +
                      std::to_string(a->stride(i)) + " in dimension " + std::to_string(i) + " (want " +
                      std::to_string(want) + ")");
    want *= static_cast<int64_t>(a->shape(i));
  }
  return {const_cast<void*>(a->data()), a->nbytes()};
}

void register_error_translator() {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      PyObject* type = PyExc_RuntimeError;
      if (e.code() == ErrorCode::kInvalidArgument) type = PyExc_ValueError;
      else if (e.code() == ErrorCode::kUnsupported) type = PyExc_NotImplementedError;
      PyErr_SetString(type, e.what());
    }
  });
}

}  // namespace linattn::py
