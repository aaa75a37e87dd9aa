"""EAGLE-3 drafters (SpecForge / EAGLE / speculators layouts): one decoder layer on top of a frozen target."""

from __future__ import annotations

from . import Config, InjectedWeight, Profile


def is_eagle3(config: Config) -> bool:
    architectures = config.get("architectures") or []
    if isinstance(architectures, list) and any(isinstance(a, str) and "eagle3" in a.lower() for a in architectures):
        return True
    return "eagle_config" in config or config.get("speculators_model_type") == "eagle3"


EAGLE3 = Profile(
    name="eagle3",
    description="EAGLE-3 speculative-decoding drafter",
    detect=is_eagle3,
    injected=(
        InjectedWeight(
            name="embed_tokens.weight",
            base_name="model.embed_tokens.weight",
            note="frozen: supplied by the base model's model.embed_tokens.weight at runtime",
        ),
    ),
)
