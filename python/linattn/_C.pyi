"""Type stubs of the extension module linattn._C (low level; use linattn.ops)."""
from typing import Any, Optional

Array = Any  # any DLPack-compatible array (numpy.ndarray, torch.Tensor, cupy.ndarray, jax.Array)

def version() -> str: ...
def chunk_attn_workspace_bytes(op: str, backward: bool, q: Array, k: Array, v: Array, g: Array, beta: Array,
                               A_log: Optional[Array], dt_bias: Optional[Array], initial_state: Optional[Array],
                               cu_seqlens: Optional[Array], chunk_indices: Optional[Array],
                               chunk_offsets: Optional[Array], scale: float, chunk_size: int, l2norm: bool,
                               gate_in_kernel: bool, beta_sigmoid: bool, neg_eigval: bool, state_v_first: bool,
                               lower_bound: Optional[float], safe_gate: bool, output_final_state: bool,
                               use_graph: bool, max_num_seqs: int, num_threads: int,
                               saved: Optional[Array] = None) -> int: ...
# The training cache: bytes chunk_attn_fwd can write to `saved` for chunk_attn_bwd of the same inputs and
# options to read (0 where none applies: CPU, token-by-token and tier-3 paths; `saved` is then ignored).
# `saved`: raw bytes (uint8), contiguous, on the op's device; at least this size and 256-byte aligned where used.
def chunk_attn_saved_bytes(op: str, q: Array, k: Array, v: Array, g: Array, beta: Array, A_log: Optional[Array],
                           dt_bias: Optional[Array], initial_state: Optional[Array], cu_seqlens: Optional[Array],
                           chunk_indices: Optional[Array], chunk_offsets: Optional[Array], scale: float,
                           chunk_size: int, l2norm: bool, gate_in_kernel: bool, beta_sigmoid: bool,
                           neg_eigval: bool, state_v_first: bool, lower_bound: Optional[float], safe_gate: bool,
                           output_final_state: bool = False, use_graph: bool = False,
                           max_num_seqs: int = 0) -> int: ...
def chunk_attn_fwd(op: str, q: Array, k: Array, v: Array, g: Array, beta: Array, o: Array,
                   final_state: Optional[Array], A_log: Optional[Array], dt_bias: Optional[Array],
                   initial_state: Optional[Array], cu_seqlens: Optional[Array],
                   chunk_indices: Optional[Array], chunk_offsets: Optional[Array], scale: float,
                   chunk_size: int, l2norm: bool, gate_in_kernel: bool, beta_sigmoid: bool,
                   neg_eigval: bool, state_v_first: bool, lower_bound: Optional[float], safe_gate: bool,
                   use_graph: bool, max_num_seqs: int, stream: int, num_threads: int,
                   workspace: Optional[Array] = None, saved: Optional[Array] = None) -> None: ...
def chunk_attn_bwd(op: str, q: Array, k: Array, v: Array, g: Array, beta: Array, A_log: Optional[Array],
                   dt_bias: Optional[Array], initial_state: Optional[Array], cu_seqlens: Optional[Array],
                   chunk_indices: Optional[Array], chunk_offsets: Optional[Array], d_o: Array,
                   d_final_state: Optional[Array], dq: Optional[Array], dk: Optional[Array],
                   dv: Optional[Array], dg: Optional[Array], dbeta: Optional[Array],
                   dA_log: Optional[Array], ddt_bias: Optional[Array], dinitial_state: Optional[Array],
                   scale: float, chunk_size: int, l2norm: bool, gate_in_kernel: bool, beta_sigmoid: bool,
                   neg_eigval: bool, state_v_first: bool, lower_bound: Optional[float], safe_gate: bool,
                   use_graph: bool, max_num_seqs: int, stream: int, num_threads: int,
                   workspace: Optional[Array] = None, saved: Optional[Array] = None) -> None: ...
def conv_bwd_workspace_bytes(x: Array, weight: Array, bias: Optional[Array], residual: Optional[Array],
                             initial_state: Optional[Array], cu_seqlens: Optional[Array],
                             output_final_state: bool, use_graph: bool, max_num_seqs: int) -> int: ...
def conv_fwd(x: Array, weight: Array, bias: Optional[Array], residual: Optional[Array],
             initial_state: Optional[Array], cu_seqlens: Optional[Array], y: Array,
             final_state: Optional[Array], activation: str, use_graph: bool, max_num_seqs: int,
             stream: int, num_threads: int) -> None: ...
def conv_bwd(x: Array, weight: Array, bias: Optional[Array], residual: Optional[Array],
             initial_state: Optional[Array], cu_seqlens: Optional[Array], dy: Array,
             d_final_state: Optional[Array], dx: Optional[Array], dweight: Optional[Array],
             dbias: Optional[Array], dresidual: Optional[Array], dinitial_state: Optional[Array],
             activation: str, use_graph: bool, max_num_seqs: int, stream: int,
             num_threads: int, workspace: Optional[Array] = None) -> None: ...
