"""Convert for MTP layers (DeepSeek-V3 / GLM layout): the MTP layers alone, where both engines read them.

vLLM reads MTP layer i at ``model.layers.{N+i}.`` with N the *target's* ``num_hidden_layers`` (a standalone export
served beside its target takes N from the target's config); SGLang's NextN loader reads layer 0 when the draft's
own config says ``num_hidden_layers: 1``, else layer N of that config. So an export that stores its layer at 0
(SGLang's export script's layout) loads in SGLang and is asked for layer 61 by vLLM, and a full target loads in
both but weighs 600+ GiB. convert writes the one layout both engines read: the MTP layers at N .. N+k-1, N the
target's, with ``num_hidden_layers: N`` and ``num_nextn_predict_layers: k`` in its config, and none of the main
model's tensors (the engines take the embedding and head from the target, or from the layer's own copies).

Nothing is invented: each output tensor is an MTP layer's tensor, renumbered; the MTP family's replay of the
engine's loader (:mod:`ckptdiff.families.mtp.engines`) decides whether the output loads, as ``ckptdiff OUT --engine
ENGINE --base BASE`` does.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..base_layouts import text_config
from ..checkpoint import Checkpoint
from ..naming import RenameRule
from .plan import (
    ConfigChange,
    ConvertRefused,
    Left,
    Origin,
    Plan,
    PlannedTensor,
    judge,
    laid_out,
    renamed,
    replay_engine,
    set_key,
)
from .targets import TargetLayout

#: The family whose rules judge the output.
FAMILY = "mtp"


def target_layers(source: Checkpoint, base: Checkpoint | None, stored: Sequence[int]) -> tuple[int, str]:
    """N, the target's ``num_hidden_layers``, and where it was read: BASE's config, or SRC's own when SRC holds
    its MTP layers past its main ones (a full model). An export storing its layer at 0 needs ``--base``."""
    if base is not None:
        value = text_config(base.config).get("num_hidden_layers")
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConvertRefused(base.spec, "config.json has no num_hidden_layers: where the MTP layers go is unknown")
        return value, f"{base.spec}'s num_hidden_layers"
    own = text_config(source.config).get("num_hidden_layers")
    if isinstance(own, int) and not isinstance(own, bool) and stored and min(stored) >= own > 1:
        return own, "SRC's num_hidden_layers"
    raise ConvertRefused(
        source.spec,
        f"stores its MTP layers at {list(stored)}, not past its own main layers: the target's num_hidden_layers "
        "says where the engines read them",
        "give --base, the model the MTP layers serve",
    )


def build_mtp_plan(
    source: Checkpoint,
    layout: TargetLayout,
    *,
    base: Checkpoint | None = None,
    renames: Sequence[RenameRule] = (),
    max_shard_size: int | None = None,
    allowed_events: Sequence[str] = (),
) -> Plan:
    """The plan that moves ``source``'s MTP layers to where ``layout.engine`` reads them beside ``base``."""
    from ..families import family
    from ..families.mtp.spec import MtpSpec, split_layer

    assert source.config is not None  # build_plan refused a checkpoint without one
    if layout.engine not in family(FAMILY).engines:
        raise ConvertRefused(f"--to {layout.engine}", f"ckptdiff has no MTP rules for {layout.label}")
    names = [renamed(name, renames) for name in source.tensors]
    spec = MtpSpec.of(source.config, names)
    if spec.layout != "deepseek":
        from ..families.mtp.detect import INDEXED_LAYOUTS

        if spec.layout == "mtp":
            where = "mtp.* (Qwen3-Next, Qwen3.5)"
        else:
            prefixes, _, words = INDEXED_LAYOUTS[spec.layout]
            where = f"{prefixes[0].partition('{i}')[0]}* ({words})"
        raise ConvertRefused(
            source.spec, f"keeps its MTP layers under {where}: convert moves DeepSeek-V3/GLM-layout layers"
        )
    stored = spec.stored_mtp
    if not stored:
        announced = f"announces {spec.nextn} (num_nextn_predict_layers) but " if spec.nextn else ""
        raise ConvertRefused(
            source.spec, f"{announced}stores no MTP layer (no enorm/hnorm/eh_proj/shared_head tensors): nothing to move"
        )
    first, where = target_layers(source, base, stored)
    moved_to = {index: first + i for i, index in enumerate(stored)}

    planned: list[PlannedTensor] = []
    left: list[Left] = []
    for (original, info), name in zip(source.tensors.items(), names):
        split = split_layer(name)
        if split is None or split[1] not in moved_to:
            left.append(Left(original, "not an MTP layer's: the engines take the main model from the target"))
            continue
        prefix, index, rest = split
        out = f"{prefix}{moved_to[index]}.{rest}"
        transforms = ("copy",) if out == original else ("rename",)
        planned.append(PlannedTensor(out, info.dtype, info.shape, info.file, Origin("source", info), transforms))

    config = dict(source.config)
    changes: list[ConfigChange] = []
    text_key = "text_config." if isinstance(config.get("text_config"), dict) else ""
    if text_key:
        config["text_config"] = dict(config["text_config"])
    set_key(config, changes, f"{text_key}num_hidden_layers", first, f"{where}: the engines read MTP layer i at N + i")
    set_key(config, changes, f"{text_key}num_nextn_predict_layers", len(stored), "the MTP layers written")
    tensors, shards = laid_out(planned, max_shard_size)
    plan = Plan(
        engine=layout.engine,
        label=layout.label,
        source=source,
        base=base,
        embed="keep",
        tensors=tensors,
        left=left,
        config=config,
        changes=changes,
        shards=shards,
        allowed_events=tuple(allowed_events),
        family=FAMILY,
    )
    plan.check = replay_engine(plan)
    judge(plan, allowed_events)
    return plan
