"""The oracle's converted MTP layers: ``ckptdiff convert`` moving MTP layers, then the engines' MTP loaders.

Sources are MTP cases of the family's oracle (mtp_catalogue.py): NextN exports stored at layer 0 beside their
target (DeepSeek-V3 and GLM-4.5), and targets carrying their MTP layer (MoE and dense), from which convert extracts
the layer. Each is marked (every tensor its own value), converted with the command a user runs (``python -m ckptdiff
convert MARKED OUT --to ENGINE --base TARGET``), and the output loaded by the engine's MTP driver
(worker_mtp_<engine>.py, through convert_worker.py) as the speculative model beside the target. The check is
convert_cases.judge's: every parameter written (or taken from the target, or unwritten exactly as with the source
as published), each holding the markers of exactly the source tensors convert.json names for it. Parameter names
are read in each engine's own spelling: vLLM's ``model.layers.{N}.mtp_block.*``, SGLang's ``model.decoder.*`` and
``model.{enorm,hnorm,eh_proj,shared_head}``, and the stacked experts (``w13_weight``: every expert's gate and up;
``w2_weight``: their down).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from convert_cases import Verdict, canonical, expected_sources, mark_and_convert, run_engines

#: The MTP oracle cases converted here, each with a story convert must tell right.
SOURCES = (
    "mtp_nextn_export_layer0",  # DeepSeek-V3 export at 0 → the target's layer 2
    "mtp_nextn_export_layer0_deep_target",  # the same beside a 3-layer target → layer 3
    "mtp_nextn_export_glm_layer0",  # GLM-4.5 export at 0 → layer 2
    "mtp_ds_full",  # a target's MoE MTP layer, extracted alone
    "mtp_ds_dense_layer",  # a target's dense MTP layer, extracted alone
)
DRIVER = "mtp_"


def write_sources(root: Path) -> dict[str, tuple[Path, Path]]:
    """Each source case and its target under ``root``: name → (source folder, target folder)."""
    from mtp_cases import write_mtp_cases
    from mtp_catalogue import MTP_CASES

    cases = [case for case in MTP_CASES if case.name in SOURCES]
    written = write_mtp_cases(root, cases)
    return {name: (folder, target or folder) for name, (folder, target) in written.items()}


def convert_all(root: Path, python: str = sys.executable) -> tuple[dict[tuple[str, str], Path], dict[str, Path], list]:
    """Every source marked and converted for every engine beside its target: (source, engine) → converted folder,
    source → target folder, and convert's refusals."""
    converted: dict[tuple[str, str], Path] = {}
    refused: list[Verdict] = []
    targets: dict[str, Path] = {}
    for name, (folder, target) in write_sources(root / "mtp-sources").items():
        targets[name] = target
        outs, refusals = mark_and_convert(root, name, folder, python, base=target)
        converted |= {(name, engine): out for engine, out in outs.items()}
        refused += refusals
    return converted, targets, refused


#: An engine's spelling of an MTP layer's parameter → the stored spelling (``{n}``: the MTP layer's index).
_SGLANG_OWN = re.compile(r"^model\.(enorm|hnorm|eh_proj|shared_head)\.")
_EXPERTS = re.compile(r"^(?P<stem>.*\.mlp\.experts\.)(?:routed_experts\.)?(?P<which>w13|w2)_(?P<leaf>\w+)$")
_SHARED_GATE_UP = re.compile(r"^(?P<stem>.*\.shared_experts\.)gate_up_proj\.(?P<leaf>\w+)$")


def _layer_of(provenance: dict[str, Any]) -> int | None:
    found = {int(m[1]) for t in provenance["tensors"] if (m := re.match(r"^model\.layers\.(\d+)\.", t["name"]))}
    return min(found) if found else None


def stored_spelling(parameter: str, provenance: dict[str, Any]) -> str:
    """vLLM's ``model.layers.2.mtp_block.X`` and SGLang's ``model.decoder.X`` / ``model.enorm.weight`` →
    ``model.layers.2.X`` / ``model.layers.2.enorm.weight``."""
    layer = _layer_of(provenance)
    name = parameter.replace(".mtp_block.", ".")
    if layer is not None and name.startswith("model.decoder."):
        name = f"model.layers.{layer}." + name[len("model.decoder.") :]
    elif layer is not None and _SGLANG_OWN.match(name):
        name = f"model.layers.{layer}." + name[len("model.") :]
    return name


def expected_mtp_sources(parameter: str, provenance: dict[str, Any]) -> set[str]:
    """The source tensors whose markers an MTP drafter's ``parameter`` must hold, as convert.json names them."""
    name = stored_spelling(parameter, provenance)
    found = _EXPERTS.match(name)
    if found:  # the experts stacked into one parameter: w13 holds every expert's gate and up, w2 their down
        members = ("gate_proj", "up_proj") if found["which"] == "w13" else ("down_proj",)
        pattern = re.compile(
            re.escape(found["stem"]) + r"\d+\.(?:" + "|".join(members) + r")\." + re.escape(found["leaf"]) + "$"
        )
        return {t["from"]["name"] for t in provenance["tensors"] if pattern.match(t["name"])}
    found = _SHARED_GATE_UP.match(name)
    if found:
        parts = {canonical(found["stem"] + m + "." + found["leaf"]) for m in ("gate_proj", "up_proj")}
        return {t["from"]["name"] for t in provenance["tensors"] if canonical(t["name"]) in parts}
    return expected_sources(name, provenance)


def taken_from_target(name: str, observed: dict[str, Any]) -> bool:
    """An MTP layer's copy of the embedding or head that the engine skips because it takes the target's (SGLang's
    NextN loader; the MTP oracle's cases call these inert too)."""
    taken = observed.get("from_target") or []
    embed = any(p.endswith("embed_tokens.weight") for p in taken)
    head = any(p.endswith(("lm_head.weight", "shared_head.head.weight")) for p in taken)
    return (embed and name.endswith(".embed_tokens.weight")) or (head and name.endswith(".shared_head.head.weight"))


def run(root: Path) -> list[Verdict]:
    converted, targets, refused = convert_all(root)
    found = run_engines(
        converted,
        root,
        driver=DRIVER,
        targets=targets,
        expected_of=expected_mtp_sources,
        unused_ok=taken_from_target,
    )
    return refused + found


if __name__ == "__main__":  # python tests/oracle/convert_mtp_cases.py: the table, without pytest
    import shutil
    import tempfile

    from convert_cases import summary

    work = Path(tempfile.mkdtemp(prefix="ckptdiff-convert-mtp-oracle-"))
    try:
        found = run(work)
        print(summary(found))
        sys.exit(0 if all(v.agrees or v.refused for v in found) else 1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
