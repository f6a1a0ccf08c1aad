# Sourced by scripts: the repo root, job count, and whether CUDA / a GPU are here.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JOBS="${JOBS:-$(nproc)}"
HAVE_NVCC=0; command -v nvcc >/dev/null 2>&1 && HAVE_NVCC=1
[ $HAVE_NVCC = 0 ] && [ -x /usr/local/cuda/bin/nvcc ] && { export PATH=/usr/local/cuda/bin:$PATH; HAVE_NVCC=1; }
HAVE_GPU=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; then HAVE_GPU=1; fi
CUDA_FLAG=-DLINATTN_ENABLE_CUDA=OFF
[ $HAVE_NVCC = 1 ] && CUDA_FLAG=-DLINATTN_ENABLE_CUDA=ON
