"""linattn: fast, graph-capturable GatedDeltaNet / KDA chunked attention and short convolution,
with FLA's function names and semantics. Switch with one import:

    from linattn import chunk_gated_delta_rule, chunk_kda, causal_conv1d
"""
from ._C import version
from .ops import (
    ChunkGrads,
    ConvGrads,
    causal_conv1d,
    causal_conv1d_bwd,
    chunk_attn_saved_bytes,
    chunk_gated_delta_rule,
    chunk_gated_delta_rule_bwd,
    chunk_kda,
    chunk_kda_bwd,
)

chunk_gdn = chunk_gated_delta_rule
__version__ = version()

__all__ = [
    "ChunkGrads", "ConvGrads", "causal_conv1d", "causal_conv1d_bwd", "chunk_attn_saved_bytes", "chunk_gated_delta_rule",
    "chunk_gated_delta_rule_bwd", "chunk_gdn", "chunk_kda", "chunk_kda_bwd", "version",
]
