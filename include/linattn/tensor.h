// Public tensor types: a non-owning, DLPack-shaped TensorView and an owning host Tensor.
// Shapes and strides are in elements, at most 5 dims. A default TensorView is "absent"
// (ndim == 0): optional arguments are passed that way. A present tensor may have zero elements
// (T = 0) and a null data pointer.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace linattn {

enum class DType : uint8_t { kF32, kF16, kBF16, kI32, kI64, kF64 };
enum class DeviceType : uint8_t { kCPU, kCUDA };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;
  bool operator==(const Device&) const = default;
};

inline constexpr int kMaxDims = 5;

size_t dtype_size(DType t);
const char* dtype_name(DType t);
bool dtype_is_float(DType t);
std::string device_name(Device d);

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Device device{};
  int ndim = 0;  // 0 = absent
  std::array<int64_t, kMaxDims> shape{};
  std::array<int64_t, kMaxDims> strides{};  // elements

  bool defined() const { return ndim > 0; }
  int64_t size(int d) const { return shape[d < 0 ? d + ndim : d]; }
  int64_t numel() const;
  bool is_contiguous() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  std::string shape_str() const;  // "[2, 3, 4]" or "absent"

  template <class T>
  T* ptr() const { return static_cast<T*>(data); }

  // A contiguous view over `data` with the given shape.
  static TensorView contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape,
                               Device device = {});
  static TensorView contiguous(void* data, DType dtype, const std::vector<int64_t>& shape,
                               Device device = {});
};

// Owning, contiguous host tensor for tools and tests.
class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, std::vector<int64_t> shape);
  // Copies own their storage: the view is rebound to the copy's bytes.
  Tensor(const Tensor& other);
  Tensor& operator=(const Tensor& other);
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;
  static Tensor empty(DType dtype, std::vector<int64_t> shape) { return Tensor(dtype, std::move(shape)); }

  const TensorView& view() const { return view_; }
  operator TensorView() const { return view_; }  // NOLINT: views are cheap
  bool defined() const { return view_.defined(); }
  int64_t numel() const { return view_.numel(); }
  const std::vector<int64_t>& shape() const { return shape_; }
  DType dtype() const { return view_.dtype; }
  template <class T>
  T* data() const { return view_.ptr<T>(); }
  // Element i (flat, contiguous order) converted to/from double, any dtype.
  double get(int64_t i) const;
  void set(int64_t i, double v);
  // A copy converted to `dtype` (floats round to nearest even).
  Tensor to(DType dtype) const;

 private:
  std::vector<int64_t> shape_;
  std::vector<std::byte> storage_;
  TensorView view_;
};

}  // namespace linattn
