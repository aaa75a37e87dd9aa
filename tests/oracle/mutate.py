"""Mutation testing of the engine rules: each mutation is one plausible mistake, the oracle job must catch it.

    python tests/oracle/mutate.py [--mutation NAME ...] [--jobs 2] [--list]

Each mutation is named by the rule it changes (not a file or line, so it survives the rules moving between
modules) and applied in its own process to the rules as imported (the engine's rule data, the drafter spec);
then every case is judged by that ckptdiff, in process, against the engines' cached results (run the job
first: ``python tests/oracle/run.py``; a result missing from the cache is an error, no engine is run). A
mutation is killed when the job finds at least one disagreement the unmutated rules do not have. Prints each
mutation's verdict and the kill rate; exit 0 only when every mutation is killed (a survivor is printed and
fails the tool), 2 when the baseline itself disagrees or the cache is incomplete.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
for path in (str(HERE), str(REPO)):
    if path not in sys.path:
        sys.path.insert(0, path)


from mutate_rules import (  # noqa: E402
    _import_spec,
    capture_labels,
    change_aux,
    change_capture,
    change_engine,
    change_loader,
    change_params,
    engine_module,
    place,
)
from mutate_variants import VARIANT_MUTATIONS  # noqa: E402

# ---- the mutations: one plausible mistake each, named by the rule it changes


def _plus_one(ids: Any, n: int) -> Any:
    return tuple(i + 1 for i in ids)


def _as_given(ids: Any, n: int) -> Any:
    return tuple(ids)


def _vllm_v2_reads_no_layer_ids() -> None:
    change_aux("vllm", keys=("eagle_aux_hidden_state_layer_ids",))


def _head_dim_ignored() -> None:
    spec = _import_spec()

    def head_dim_size(self: Any) -> int | None:
        if self.heads and self.hidden and self.hidden.value % self.heads.value == 0:
            return int(self.hidden.value // self.heads.value)
        return None

    spec.head_dim_size = property(head_dim_size)


def _sglang_mla_fc_nested_only() -> None:
    change_loader(
        "sglang",
        "Eagle3DeepseekV2ForCausalLM",
        lambda lo: dataclasses.replace(lo, fc_aux_keys=("eagle_config.eagle_aux_hidden_state_layer_ids",)),
    )


def _ignore_list_not_read() -> None:
    drafter = place("spec")
    original = drafter._quantization

    def without_ignore(config: Any) -> Any:
        found = original(config)
        return dataclasses.replace(found, ignore=()) if found is not None else None

    drafter._quantization = without_ignore


def _sglang_builds_unquantized() -> None:
    change_loader("sglang", "LlamaForCausalLMEagle3", lambda lo: dataclasses.replace(lo, quantization=lambda d: False))


def _sglang_any_int_scheme() -> None:
    engine_module("sglang")._wna16_unsupported = lambda config: False


def _sglang_head_from_target_when_one_vocab() -> None:
    def change(param: Any) -> Any:
        if param.name != "lm_head.weight":
            return param
        first = param.absent[0]
        taken = dataclasses.replace(first, when=lambda d: d.draft_vocab is None or d.draft_vocab == d.vocab)
        return dataclasses.replace(param, absent=(taken, *param.absent[1:]))

    change_params("sglang", "LlamaForCausalLMEagle3", change)


def _q_k_norm_skipped_silently() -> None:
    rules = place("rules")
    vllm = engine_module("vllm")
    event = rules.Event("info", "dropped", "eagle3.vllm.dropped", vllm.LLAMA)
    drop = rules.Drop(r"\.(q_norm|k_norm)\.", event)
    change_loader("vllm", "LlamaForCausalLMEagle3", lambda lo: dataclasses.replace(lo, drops=(*lo.drops, drop)))


def _sglang_llama_capture_without_plus_one() -> None:
    change_capture("sglang", "Llama", indices=_as_given)


def _vllm_capture_takes_output() -> None:
    for label in capture_labels("vllm", takes="input"):
        change_capture("vllm", label, takes="output", reached=lambda n: range(0, n))


def _sglang_deepseek_always_plus_one() -> None:
    change_capture("sglang", "DeepSeek-V2/V3", indices=_plus_one)


def _sglang_gpt_oss_always_plus_one() -> None:
    change_capture("sglang", "GPT-OSS", indices=_plus_one, reached=lambda n: range(0, n))


def _vllm_default_capture_shifted() -> None:
    for label in capture_labels("vllm"):
        change_capture("vllm", label, default=lambda n: (1, n // 2 - 1, n - 4))


def _vllm_unknown_name_skipped() -> None:
    def change(loader: Any) -> Any:
        return dataclasses.replace(loader, unknown=dataclasses.replace(loader.unknown, severity="warning"))

    change_loader("vllm", "LlamaForCausalLMEagle3", change)


def _sglang_unknown_name_raises() -> None:
    def change(loader: Any) -> Any:
        return dataclasses.replace(loader, unknown=dataclasses.replace(loader.unknown, severity="error"))

    change_loader("sglang", "LlamaForCausalLMEagle3", change)


def _sglang_draft_vocab_key_not_required() -> None:
    change_loader("sglang", "LlamaForCausalLMEagle3", lambda lo: dataclasses.replace(lo, checks=()))


def _vllm_fc_sized_from_top_level_ids() -> None:
    change_loader(
        "vllm",
        "LlamaForCausalLMEagle3",
        lambda lo: dataclasses.replace(lo, fc_aux_keys=("eagle_aux_hidden_state_layer_ids",)),
    )


def _nested_ids_written_for_vllm() -> None:
    capture = place("capture")
    capture.WRITERS["eagle_config.eagle_aux_hidden_state_layer_ids"] = "vllm"


def _sglang_reads_top_level_ids() -> None:
    change_aux("sglang", keys=("eagle_config.eagle_aux_hidden_state_layer_ids", "eagle_aux_hidden_state_layer_ids"))


def _vllm_d2t_not_renamed() -> None:
    change_loader(
        "vllm",
        "LlamaForCausalLMEagle3",
        lambda lo: dataclasses.replace(lo, renames=tuple(r for r in lo.renames if r.pattern != "d2t")),
    )


def _vllm_embed_width_unchecked() -> None:
    def change(param: Any) -> Any:
        if param.name != "model.embed_tokens.weight":
            return param
        return dataclasses.replace(param, absent=param.absent[1:])

    change_params("vllm", "LlamaForCausalLMEagle3", change)


def _default_indices_read_by_class() -> None:
    import importlib

    capture = place("capture")
    verdict = importlib.import_module(capture.__name__.rsplit(".", 1)[0] + ".capture_verdict")
    verdict.default_depth = lambda ids: None


def _target_classes_not_refused(name: str) -> Callable[[], None]:
    def apply() -> None:
        change_engine(name, lambda e: dataclasses.replace(e, refused_targets=frozenset()))

    return apply


def _empty_ids(name: str, captures_nothing: bool) -> Callable[[], None]:
    """An engine's reading of an empty list of ids turned round: as given (no layer captured) or as unset."""

    def apply() -> None:
        source = engine_module(name).ENGINE.aux_ids.source if captures_nothing else None
        change_aux(name, empty_captures_nothing=source)

    return apply


MUTATIONS: dict[str, tuple[str, Callable[[], None]]] = {
    "vllm.aux_ids.reads_eagle_config_layer_ids": (
        "vLLM's V2 runner no longer reads eagle_config.layer_ids (issue #26)",
        _vllm_v2_reads_no_layer_ids,
    ),
    "spec.head_dim.explicit": ("an explicit head_dim is ignored (hidden / heads used) (issue #26)", _head_dim_ignored),
    "sglang.mla.fc_aux_keys.top_level": (
        "SGLang's MLA fc ignores the top-level ids (issue #26)",
        _sglang_mla_fc_nested_only,
    ),
    "spec.quantization.ignored_layers": (
        "the quantization ignore list (ignored_layers, exclude_modules, ignore) is not read (issue #26)",
        _ignore_list_not_read,
    ),
    "sglang.quantization.unquantized_build": (
        "SGLang builds the drafter unquantized, whatever its quantization_config",
        _sglang_builds_unquantized,
    ),
    "sglang.quantization.wna16_any_format": (
        "SGLang builds compressed-tensors int weight-only groups in any format",
        _sglang_any_int_scheme,
    ),
    "sglang.lm_head.from_target_when_one_vocab": (
        "SGLang takes the head from the target when the draft vocabulary equals the vocabulary (issue #26)",
        _sglang_head_from_target_when_one_vocab,
    ),
    "vllm.llama.q_norm_k_norm.unknown": (
        "vLLM's Llama drafter skips q_norm/k_norm silently instead of raising (issue #26)",
        _q_k_norm_skipped_silently,
    ),
    "sglang.aux_ids.empty_captures_nothing": (
        "SGLang reads an empty list of eagle_config ids as unset (its default capture), as vLLM does",
        _empty_ids("sglang", captures_nothing=False),
    ),
    "vllm.aux_ids.empty_is_unset": (
        "vLLM passes an empty list of ids on as given (no layer captured), as SGLang does",
        _empty_ids("vllm", captures_nothing=True),
    ),
    "sglang.capture.llama.plus_one": (
        "SGLang's Llama-class capture takes the ids without adding 1",
        _sglang_llama_capture_without_plus_one,
    ),
    "vllm.capture.takes_input": ("vLLM's capture takes a layer's output, not its input", _vllm_capture_takes_output),
    "sglang.capture.deepseek.plus_one_only_from_1": (
        "SGLang's DeepSeek-V2 capture always adds 1",
        _sglang_deepseek_always_plus_one,
    ),
    "sglang.capture.gpt_oss.keeps_ids_at_depth": (
        "SGLang's GPT-OSS capture always adds 1",
        _sglang_gpt_oss_always_plus_one,
    ),
    "vllm.capture.default": ("vLLM's default capture is (1, n//2-1, n-4)", _vllm_default_capture_shifted),
    "vllm.llama.unknown_name.raises": ("vLLM skips an unknown name instead of raising", _vllm_unknown_name_skipped),
    "sglang.llama.unknown_name.skipped": ("SGLang raises on an unknown name", _sglang_unknown_name_raises),
    "sglang.llama.draft_vocab_size.required": (
        "SGLang's Llama drafter no longer needs the draft_vocab_size key",
        _sglang_draft_vocab_key_not_required,
    ),
    "vllm.llama.fc_aux_keys.nested": ("vLLM sizes fc from the top-level ids", _vllm_fc_sized_from_top_level_ids),
    "capture.writers.nested_is_sglang": (
        "eagle_config's ids are taken as written for vLLM's capture",
        _nested_ids_written_for_vllm,
    ),
    "sglang.aux_ids.keys.nested_only": ("SGLang also reads the top-level ids", _sglang_reads_top_level_ids),
    "vllm.llama.d2t.renamed": ("vLLM does not rename d2t to draft_id_to_target_id", _vllm_d2t_not_renamed),
    "vllm.target_class.supports_eagle3": (
        "vLLM serves EAGLE-3 on a target class that does not implement SupportsEagle3 (issue #27)",
        _target_classes_not_refused("vllm"),
    ),
    "sglang.target_class.set_eagle3_layers_to_capture": (
        "SGLang serves EAGLE-3 on a target class without set_eagle3_layers_to_capture (issue #27)",
        _target_classes_not_refused("sglang"),
    ),
    "capture.claim.default_indices": (
        "ids that are the default capture's indices (2, n//2, n-3) are read by the target class's convention",
        _default_indices_read_by_class,
    ),
    "vllm.embed.width_checked": (
        "vLLM's shared embedding is not checked against the drafter's width",
        _vllm_embed_width_unchecked,
    ),
}


MUTATIONS.update(VARIANT_MUTATIONS)


# The other families' mutations, each in its own module.
from mutate_dflash import FAMILY as DFLASH_FAMILY  # noqa: E402
from mutate_dflash import MUTATIONS as DFLASH_MUTATIONS  # noqa: E402
from mutate_mtp import MUTATIONS as MTP_MUTATIONS  # noqa: E402

MUTATIONS |= MTP_MUTATIONS

# vLLM's V1 model runner (judged on the vllm_v1 variant's cases, oracle_families.ORACLE_VARIANTS).
from mutate_v1 import MUTATIONS as V1_MUTATIONS  # noqa: E402
from mutate_v1 import V1_DFLASH_MUTATIONS  # noqa: E402

MUTATIONS |= V1_MUTATIONS | V1_DFLASH_MUTATIONS
# Whether the target captures at all: vLLM's V2 runner (the vllm_v2 variant's cases) and the drafter's flag.
from mutate_v2 import MUTATIONS as V2_MUTATIONS  # noqa: E402

MUTATIONS |= V2_MUTATIONS
MUTATIONS |= DFLASH_MUTATIONS
# The Llama-4 target's capture (judged on the eagle3_llama4 family's cases).
from mutate_llama4 import FAMILY as LLAMA4_FAMILY  # noqa: E402
from mutate_llama4 import MUTATIONS as LLAMA4_MUTATIONS  # noqa: E402

MUTATIONS |= LLAMA4_MUTATIONS
# Which class an engine builds, and whether it has a loader at all (judged by registry_check.py).
from mutate_registry import MUTATIONS as REGISTRY_MUTATIONS  # noqa: E402

MUTATIONS |= REGISTRY_MUTATIONS
#: Mutations whose rules only one family's drafters reach: judged on that family's cases only (the baseline run
#: judges every case, so each such family's cases are in it).
SCOPE: dict[str, str] = {name: DFLASH_FAMILY for name in DFLASH_MUTATIONS} | dict.fromkeys(
    LLAMA4_MUTATIONS, LLAMA4_FAMILY
)


def v1_dflash_found(engines: list[str] | None) -> list[str]:
    """DFlash's disagreements under vLLM's V1 runner (v1_dflash.py), on its cached results."""
    if engines and "vllm" not in engines:
        return []
    from run import in_process_report
    from v1_dflash import run as v1_dflash_run

    with open(os.devnull, "w") as quiet:
        found, _, _ = v1_dflash_run(None, cached_only=True, log=quiet, reporter=in_process_report)
    return [f"v1_dflash:{d.case}/{d.engine}/{d.subject}" for d in found]


def judge_one(name: str | None, engines: list[str] | None) -> dict[str, Any]:
    """In this process: apply mutation ``name`` (None: none), judge every case of the job (the main split; a
    family-scoped mutation's family's) against the cached engine results; a registry mutation, the registry checks
    against the engines' cached registry answers."""
    if name is not None:
        MUTATIONS[name][1]()
    import registry_check
    from run import in_process_report, run

    if name is not None and name in REGISTRY_MUTATIONS:
        return {"found": sorted(set(registry_check.found(engines, cached_only=True)))}

    families = [SCOPE[name]] if name in SCOPE else None
    if name is not None and name in V1_DFLASH_MUTATIONS:  # DFlash under vLLM's V1 runner: v1_dflash.py's cases
        return {"found": sorted(set(v1_dflash_found(engines)))}
    with open(os.devnull, "w") as quiet:
        result = run(
            REPO,
            engines,
            None,
            log=quiet,
            reporter=in_process_report,
            cached_only=True,
            split="main",
            families=families,
        )
    found = {f"{d.case}/{d.engine}/{d.subject}" for d in result.found}
    if name is None:
        found |= set(v1_dflash_found(engines)) | set(registry_check.found(engines, cached_only=True))
    return {"found": sorted(found)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mutation", action="append", help="only this mutation (repeatable)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--engine", action="append", help="only this engine's results (repeatable; default: every pin)")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child: judge with this mutation ("-": none)
    args = parser.parse_args(argv)
    if args.list:
        for name, (about, _) in MUTATIONS.items():
            print(f"{name}: {about}")
        return 0
    if args.one is not None:
        print(json.dumps(judge_one(None if args.one == "-" else args.one, args.engine)))
        return 0
    wanted = args.mutation or list(MUTATIONS)
    unknown = [m for m in wanted if m not in MUTATIONS]
    if unknown:
        parser.error(f"unknown mutation(s): {', '.join(unknown)}")
    started = time.time()

    def child(name: str) -> dict[str, Any]:
        engines = [part for engine in args.engine or () for part in ("--engine", engine)]
        done = subprocess.run(
            [sys.executable, __file__, "--one", name, *engines], capture_output=True, text=True, cwd=REPO, timeout=3600
        )
        if done.returncode != 0:
            return {"error": (done.stderr.strip().splitlines() or ["(no output)"])[-1]}
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = dict(zip(["-", *wanted], pool.map(child, ["-", *wanted])))
    baseline = results.pop("-")
    if "error" in baseline:
        print(f"mutate: the unmutated run broke: {baseline['error']}")
        return 2
    if baseline["found"]:
        print(f"mutate: the unmutated rules already disagree ({len(baseline['found'])}): {baseline['found'][:5]}")
        return 2
    survivors = []
    for name in wanted:
        outcome = results[name]
        if "error" in outcome:
            print(f"ERROR    {name}: {outcome['error']}")
            survivors.append(name)
            continue
        new = [f for f in outcome["found"] if f not in baseline["found"]]
        print(
            f"{'killed' if new else 'SURVIVED'} {name}: {len(new)} disagreement(s)"
            + (f", e.g. {new[0]}" if new else "")
        )
        if not new:
            survivors.append(name)
    killed = len(wanted) - len(survivors)
    print(
        f"mutate: {killed} of {len(wanted)} mutations killed ({100 * killed / len(wanted):.0f} %) "
        f"in {time.time() - started:.0f}s"
    )
    for name in survivors:
        print(f"survived: {name}: {MUTATIONS[name][0]}")
    return 0 if not survivors else 1


if __name__ == "__main__":
    sys.exit(main())
