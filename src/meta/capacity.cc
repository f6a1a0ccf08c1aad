// Capacity: validation, NT_max and printing.
#include "meta/capacity.h"

#include <limits>
#include <ostream>
#include <sstream>

#include "core/check.h"

namespace linattn {

int64_t Capacity::NT_max() const {
  if (BT <= 0) return 0;  // invalid capacity: keeps str() of a rejected value well defined
  return meta::chunks_of(T_max, BT) + N_max - 1;
}

void Capacity::validate() const {
  meta::check_chunk_size(BT, "Capacity.BT");
  LINATTN_CHECK(T_max >= 1, "Capacity.T_max: expected >= 1, got ", T_max);
  LINATTN_CHECK(N_max >= 1, "Capacity.N_max: expected >= 1, got ", N_max);
  // The tables are int32 and hold sequence ids, chunk ids and chunk offsets.
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  LINATTN_CHECK(T_max <= kMax, "Capacity.T_max: expected <= ", kMax, " (int32 tables), got ", T_max);
  LINATTN_CHECK(N_max <= kMax - meta::chunks_of(T_max, BT),
                "Capacity.N_max: expected NT_max = ceil(T_max/BT) + N_max - 1 <= ", kMax,
                " (int32 tables), got N_max = ", N_max, " with T_max = ", T_max);
}

std::string Capacity::str() const {
  std::ostringstream os;
  os << *this;
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Capacity& c) {
  return os << "Capacity{T_max=" << c.T_max << ", N_max=" << c.N_max << ", BT=" << c.BT
            << ", NT_max=" << c.NT_max() << "}";
}

namespace meta {

bool is_supported_chunk_size(int BT) { return BT == 16 || BT == 32 || BT == 64; }

void check_chunk_size(int BT, const char* arg) {
  if (!is_supported_chunk_size(BT)) LINATTN_UNSUPPORTED(arg, ": expected one of {16, 32, 64}, got ", BT);
}

Capacity make_capacity(int64_t T_max, int64_t N_max, int BT) {
  Capacity c{T_max, N_max, BT};
  c.validate();
  return c;
}

}  // namespace meta
}  // namespace linattn
