"""The base (target) model's text settings, wherever its config.json keeps them (top level or text_config)."""

from __future__ import annotations

from ..profiles.base_layouts import text_config

__all__ = ["text_config"]
