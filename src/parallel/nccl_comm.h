// NCCL communicator for context parallelism across GPUs (CUDA + NCCL builds only: the class is
// declared everywhere, its constructor throws Unsupported where LINATTN_WITH_NCCL is off).
// all_gather is one ncclAllGather on the caller's stream: no host synchronization, so it can be
// captured into a CUDA graph (the constructor runs one eager all-gather, so NCCL's lazy peer
// connection never happens under a capture); every rank must capture the same sequence of calls
// (lockstep) and replay its graph together with the others. One rank per GPU.
// Launch (one process per GPU):
//   torchrun --nproc_per_node=2 ./prog          (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_PORT)
//   mpirun -np 2 ./prog                         (OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK}, or PMI_*)
// NcclCommunicator::from_env() reads those variables, selects GPU LOCAL_RANK, and shares the
// NCCL unique id through a file (LINATTN_NCCL_ID_FILE, default /tmp/linattn-nccl-<MASTER_PORT>.id,
// written by rank 0, read by the others: one host, or a shared file system). Programs with
// their own channel (torch.distributed, MPI_Bcast) pass nccl_unique_id() bytes to the constructor.
#pragma once
#include <array>
#include <memory>

#include "parallel/communicator.h"

namespace linattn::parallel {

struct RankEnv {
  int rank = 0, world = 1, local_rank = 0;
  bool found = false;  // some launcher variable was set
};
// torchrun-style RANK / WORLD_SIZE / LOCAL_RANK, else Open MPI, else PMI (MPICH, Slurm).
RankEnv rank_env_from_environment();

using NcclUniqueId = std::array<char, 128>;
// A fresh id (rank 0 calls it and shares the bytes).
NcclUniqueId nccl_unique_id();
bool nccl_available();  // compiled with NCCL

class NcclCommunicator final : public Communicator {
 public:
  // Joins the group (collective: every rank constructs at the same time) on CUDA device `device`.
  NcclCommunicator(const NcclUniqueId& id, int rank, int world, int device);
  ~NcclCommunicator() override;
  static std::unique_ptr<NcclCommunicator> from_env();

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  void all_gather(const void* send, void* recv, size_t bytes, void* stream) override;
  bool device_buffers() const override { return true; }
  // Rank metadata on the device, for kernels inside a captured graph: {rank, world} (int32 [2]),
  // written once at construction.
  const int* device_rank_info() const { return rank_info_; }

 private:
  void* comm_ = nullptr;  // ncclComm_t
  int* rank_info_ = nullptr;  // device int32 [2]
  int rank_ = 0, world_ = 1, device_ = 0;
};

}  // namespace linattn::parallel
