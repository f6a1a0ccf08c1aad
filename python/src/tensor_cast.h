// DLPack (nanobind ndarray) <-> linattn::TensorView, without copies, and the mapping of
// linattn::Error to Python exceptions (ValueError / NotImplementedError / RuntimeError).
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <optional>

#include "linattn/tensor.h"

namespace linattn::py {

namespace nb = nanobind;
using Array = nb::ndarray<>;
using OptArray = std::optional<Array>;

TensorView to_view(const Array& a, const char* name);
inline TensorView to_view(const OptArray& a, const char* name) {
  return a ? to_view(*a, name) : TensorView{};
}
// A caller's raw byte buffer (the training cache): any dtype, C-contiguous, on `device` (the op's);
// {nullptr, 0} when absent. Its size and 256-byte alignment are checked by the op itself, where it
// uses the buffer (chunk_attn_saved_bytes > 0).
struct Bytes {
  void* data = nullptr;
  size_t size = 0;
};
Bytes to_bytes(const OptArray& a, Device device, const char* name);
void register_error_translator();

}  // namespace linattn::py
