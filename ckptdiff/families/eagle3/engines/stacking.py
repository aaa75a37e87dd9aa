"""Fused parameters: q/k/v → qkv_proj and gate/up → gate_up_proj, as every engine's load_weights stacks them."""

from __future__ import annotations

from ...rules import Rename, Source


def stacked(source: Source) -> tuple[Rename, ...]:
    return (
        Rename(r"\.q_proj\.", ".qkv_proj.", source, shard="q"),
        Rename(r"\.k_proj\.", ".qkv_proj.", source, shard="k"),
        Rename(r"\.v_proj\.", ".qkv_proj.", source, shard="v"),
        Rename(r"\.gate_proj\.", ".gate_up_proj.", source, shard="0"),
        Rename(r"\.up_proj\.", ".gate_up_proj.", source, shard="1"),
    )
