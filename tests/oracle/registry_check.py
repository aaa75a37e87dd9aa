"""ckptdiff's per-engine class choices held against the engines' own registries and config rewrites
(registry_facts.py, run inside each engine's environment; its answers cached under the results cache, keyed by
engine, version, pin line, registry_facts.py and the configs asked about). Each check returns its disagreements,
one line each: ``test_registry_facts.py`` asserts there are none, and ``mutate.py`` judges the registry rules'
mutations (``mutate_registry.py``) with them, on the cached answers.

- vLLM's MTP class for a target's config: ``SpeculativeConfig.hf_config_override`` run on each model type and
  architecture ckptdiff's vLLM MTP rules name, each standalone ``*_mtp`` type vLLM serves and each registered MTP
  class named as architectures[0], against the class ckptdiff says vLLM builds (``MtpEngine.choose``); every MTP
  class vLLM registers is one ckptdiff names (its loader modelled or said not to be); the Transformers backend's
  targets are the registry's. Every NextN/MTP class SGLang registers is one ckptdiff names.
- A family ckptdiff says a pinned engine has no loader for (``Family.no_loader``: Medusa) is exactly one that no
  architecture of that engine's registries and no speculative method of it names.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from engines import oracle_home, pins

HERE = Path(__file__).resolve().parent
FACTS = HERE / "registry_facts.py"

#: Registered MTP-named classes no MTP rule of ckptdiff's is about: EAGLE's DeepSeek drafter (method "eagle").
NOT_MTP_DRAFTERS = frozenset({"EagleDeepSeekMTPModel"})
#: Configs whose rewrite reads keys these minimal configs lack (the engine raises on them here): not compared.
NEEDS_MORE = frozenset(
    {
        ("dots3_note", "SomeForCausalLM"),  # layer_types
        ("some_model", "NemotronH_Super_Omni_Reasoning_V3"),  # text_config
        ("some_model", "NemotronH_Omni_Reasoning_V3"),
        ("qwen4_exp", "SomeForCausalLM"),  # hc_count
        ("qwen4_exp_text", "SomeForCausalLM"),
        ("qwen4_exp_mtp", "SomeForCausalLM"),
        ("some_model", "BailingMoeV3VLForConditionalGeneration"),  # text_config
        ("interns2_mobius", "SomeForCausalLM"),  # its vision and text configs
        ("inkling_mm_model", "SomeForCausalLM"),  # the MTP weights' announcement
        ("inkling_model", "SomeForCausalLM"),
    }
)


class NotCached(RuntimeError):
    pass


def _cache(engine: str, what: str) -> Path:
    pin = next(p for p in pins() if p.engine == engine)
    sha = hashlib.sha256()
    for part in (pin.engine, pin.version, pin.requirements, FACTS.read_text()):
        sha.update(part.encode() + b"\0")
    return oracle_home() / "results" / f"registry_{engine}-{pin.version}" / f"{what}-{sha.hexdigest()[:24]}.json"


def _ask(engine: str, configs: list[dict[str, Any]]) -> dict[str, Any]:
    pin = next(p for p in pins() if p.engine == engine)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "configs.json"
        path.write_text(json.dumps(configs))
        done = subprocess.run(
            [str(pin.python), str(FACTS), engine, str(path)], capture_output=True, text=True, check=True, timeout=600
        )
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def facts(engine: str, cached_only: bool = False) -> dict[str, Any]:
    """What ``engine``'s registries say (and, vLLM, its MTP rewrite of each config of :func:`documents`, under
    ``asked``): from the cache, else by running registry_facts.py in its environment. The configs asked are those
    of the rules as shipped: a mutated run (``cached_only``) reads the same question and answers."""
    cached = _cache(engine, "facts")
    found: dict[str, Any] | None = json.loads(cached.read_text()) if cached.is_file() else None
    if cached_only:
        if found is None:
            raise NotCached(f"{engine}: registry facts not cached (run tests/oracle/test_registry_facts.py)")
        return found
    if found is None or (engine == "vllm" and found.get("asked") != _asked(found)):
        found = _ask(engine, [])
        if engine == "vllm":
            asked = _asked(found)
            found = {**_ask(engine, asked), "asked": asked}
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(json.dumps(found))
    return found


def _asked(registry: dict[str, Any]) -> list[dict[str, Any]]:
    return documents(registry["methods"], registry["architectures"])


def documents(methods: list[str], architectures: list[str]) -> list[dict[str, Any]]:
    """A config per model type and architecture each of ckptdiff's vLLM MTP classes is chosen for, per standalone
    ``*_mtp`` type vLLM serves, per registered MTP class named as architectures[0], and Parse 3.5 without its
    vision prefix."""
    from ckptdiff.families.mtp.engines.vllm import ENGINE

    out: list[dict[str, Any]] = []
    for cls in ENGINE.classes:
        extra: dict[str, Any] = {"decoder": {"causal_vision_prefix": True}} if cls.name == "ParseAuxMTPModel" else {}
        out += [{"model_type": t, "architectures": ["SomeForCausalLM"], **extra} for t in cls.model_types]
        out += [{"model_type": "some_model", "architectures": [a], **extra} for a in cls.architectures]
    out += [{"model_type": m, "architectures": ["SomeForCausalLM"]} for m in methods if m.endswith("_mtp")]
    registered = [a for a in architectures if "MTP" in a and a not in NOT_MTP_DRAFTERS]
    out += [{"model_type": "some_model", "architectures": [a]} for a in registered]
    out.append({"model_type": "some_model", "architectures": ["RadioMBartPrefixForCausalLM"]})
    unique = {json.dumps(d, sort_keys=True): {**d, "num_nextn_predict_layers": 1} for d in out}
    return list(unique.values())


def vllm_mtp_choice(cached_only: bool = False) -> tuple[list[str], int]:
    """Where ckptdiff's vLLM MTP class for a config differs from vLLM's rewrite; and how many were compared. The
    configs asked are those of the rules as shipped (a mutation must not change the question)."""
    from ckptdiff.families.mtp.engines.vllm import ENGINE
    from ckptdiff.families.mtp.spec import MtpSpec

    seen = facts("vllm", cached_only=cached_only)
    asked = seen["asked"]
    # an architecture the rewrite leaves that is no drafter class of the registry: no MTP class (ckptdiff: None)
    drafters = ({a for a in seen["architectures"] if "MTP" in a} - NOT_MTP_DRAFTERS) | {c.name for c in ENGINE.classes}
    rows, compared, raised = [], 0, set()
    for document, did in zip(asked, seen["chosen"], strict=True):
        key = (document["model_type"], document["architectures"][0])
        if did.startswith("raised:"):
            raised.add(key)
            continue
        compared += 1
        chosen = ENGINE.choose(MtpSpec.of(document, ()))
        said = chosen.name if chosen is not None else None
        want = did if did in drafters and did in seen["architectures"] else None
        if said != want:
            rows.append(f"vllm MTP class for {key}: ckptdiff {said}, vLLM {did}")
    if raised != NEEDS_MORE:
        rows.append(f"vllm MTP rewrite raised on {sorted(raised ^ NEEDS_MORE)} (expected: NEEDS_MORE)")
    return rows, compared


def vllm_mtp_registry(cached_only: bool = False) -> list[str]:
    """Every MTP class vLLM registers is one ckptdiff names; the Transformers backend's targets are ckptdiff's."""
    from ckptdiff.families.mtp.engines.vllm import ENGINE

    seen = facts("vllm", cached_only=cached_only)
    rows = []
    registered = {a for a in seen["architectures"] if "MTP" in a} - NOT_MTP_DRAFTERS
    unknown = sorted(registered - {c.name for c in ENGINE.classes})
    if unknown:
        rows.append(f"vllm registers MTP classes ckptdiff does not name: {unknown}")
    for backend, ours in (
        ("TransformersForCausalLM", _architectures(ENGINE, "TransformersForMTP")),
        ("TransformersMoEForCausalLM", _architectures(ENGINE, "TransformersMoEForMTP")),
    ):
        theirs = sorted(seen["transformers"].get(backend, ()))
        if set(theirs) != set(ours) - {backend}:
            rows.append(f"vllm {backend} targets: ckptdiff {sorted(set(ours) - {backend})}, vLLM {theirs}")
    return rows


def sglang_mtp_registry(cached_only: bool = False) -> list[str]:
    """Every NextN/MTP class SGLang registers is one ckptdiff's SGLang MTP rules name."""
    from ckptdiff.families.mtp.engines.sglang import ENGINE

    seen = facts("sglang", cached_only=cached_only)
    registered = {a for a in seen["architectures"] if a.endswith(("NextN", "MTP"))}
    unknown = sorted(registered - {c.name for c in ENGINE.classes})
    return [f"sglang registers MTP classes ckptdiff does not name: {unknown}"] if unknown else []


def _architectures(engine: Any, name: str) -> tuple[str, ...]:
    return next((c.architectures for c in engine.classes if c.name == name), ())


def no_loader(engine: str, cached_only: bool = False) -> list[str]:
    """A family is in ``no_loader`` for ``engine`` exactly when no architecture or speculative method names it."""
    from ckptdiff.families import FAMILIES

    seen = facts(engine, cached_only=cached_only)
    rows = []
    for family in FAMILIES:
        names = [a for a in (*seen["architectures"], *seen["methods"]) if family.name in a.lower()]
        if (engine in family.no_loader) == bool(names):
            said = "no loader" if engine in family.no_loader else "served"
            rows.append(f"{engine} {family.name}: ckptdiff {said}, the registry names {names[:5] or 'none'}")
    return rows


def found(engines: list[str] | None = None, cached_only: bool = False) -> list[str]:
    """Every disagreement of the checks above (vLLM's choice checks when vLLM is among ``engines``)."""
    wanted = engines or [p.engine for p in pins()]
    rows: list[str] = []
    if "vllm" in wanted:
        rows += vllm_mtp_choice(cached_only)[0] + vllm_mtp_registry(cached_only)
    if "sglang" in wanted:
        rows += sglang_mtp_registry(cached_only)
    for engine in wanted:
        rows += no_loader(engine, cached_only)
    return rows
