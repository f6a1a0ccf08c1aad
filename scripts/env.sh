# Sourced by scripts: the repo root, job count, and whether CUDA / a GPU are here.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JOBS="${JOBS:-$(nproc)}"
HAVE_NVCC=0; command -v nvcc >/dev/null 2>&1 && HAVE_NVCC=1
[ $HAVE_NVCC = 0 ] && [ -x /usr/local/cuda/bin/nvcc ] && { export PATH=/usr/local/cuda/bin:$PATH; HAVE_NVCC=1; }
HAVE_GPU=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; then HAVE_GPU=1; fi
CUDA_FLAG=-DLINATTN_ENABLE_CUDA=OFF
[ $HAVE_NVCC = 1 ] && CUDA_FLAG=-DLINATTN_ENABLE_CUDA=ON

# GPU-machine build inputs carried in the git-ignored third_party_local/: GoogleTest sources
# (LINATTN_GTEST_SOURCE_DIR overrides) and, when the machine has no OpenBLAS, its Debian packages,
# unpacked under /tmp. Sets the array cmake_extra (extra CMake -D flags) and extends LD_LIBRARY_PATH.
gpu_build_inputs() {
  cmake_extra=()
  local gtest="${LINATTN_GTEST_SOURCE_DIR:-$ROOT/third_party_local/googletest}" blas=/tmp/linattn-blas f
  [ -d "$gtest" ] && cmake_extra+=(-DLINATTN_GTEST_SOURCE_DIR="$gtest")
  if ! ldconfig -p | grep -q libopenblas && ls "$ROOT"/third_party_local/debs/*.deb >/dev/null 2>&1; then
    for f in "$ROOT"/third_party_local/debs/*.deb; do dpkg -x "$f" "$blas"; done
    cmake_extra+=(-DLINATTN_OPENBLAS="$blas/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so"
                  -DLINATTN_CBLAS_INCLUDE="$blas/usr/include/x86_64-linux-gnu/openblas-pthread")
    export LD_LIBRARY_PATH="$blas/usr/lib/x86_64-linux-gnu/openblas-pthread:$blas/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
    echo "OpenBLAS unpacked from third_party_local/debs" >&2
  fi
}
