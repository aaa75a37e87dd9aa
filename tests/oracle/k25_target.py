"""A wrapped target's text model as the oracle's workers need it (Kimi-K2.5: KimiK25ForConditionalGeneration keeps
its DeepSeek-V3 text model's sizes in ``text_config``): its depth, and stand-ins of its embedding and head."""

from __future__ import annotations

import json
import os
from typing import Any


def text_config_of(target_dir: str) -> dict[str, Any]:
    with open(os.path.join(target_dir, "config.json")) as handle:
        config: dict[str, Any] = json.load(handle)
    text: dict[str, Any] = config.get("text_config") or config
    return text


def text_layers(target_dir: str) -> int:
    return int(text_config_of(target_dir)["num_hidden_layers"])


def text_embed_and_head(target_dir: str) -> tuple[Any, Any]:
    import torch

    text = text_config_of(target_dir)
    shape = (text["vocab_size"], text["hidden_size"])
    return torch.nn.Embedding(*shape), torch.nn.Embedding(*shape)
