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
void register_error_translator();

}  // namespace linattn::py
