"""The drafter families the oracle checks, one registry line each: a family's cases, the worker drivers that load
them in the engines, how they are written, and the failure codes its rules add to compare.py's vocabulary.

Adding a family to the oracle: its cases (objects with ``name``, ``about``, ``split``, ``not_comparable``,
``family``, ``trained_outputs``; every name starts with the family's ``prefix``), ``worker_<driver><engine>.py``
per engine (``setup(architectures)``, the worker's start-up, run once before the cases: where an engine refuses
this machine at start-up for a reason that is not the drafter's, it answers that one check there; and ``case(
case_dir, target_dir, marked, result)``, run by worker.py per case), a ``write`` that puts them on disk, and one
line in ``ORACLE_FAMILIES``. run.py, test_oracle.py and mutate.py then run, compare and mutate them with the others.
A family whose outcomes and stages are not compare.py's (DFlash: the DFLASH worker's start-up check after the
load) brings its own ``judge``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compare import Disagreement

#: (case, engine, what the engine did, ckptdiff's engines[] entry for it) → where they differ.
Judge = Callable[[Any, str, Mapping[str, Any], Mapping[str, Any]], list[Disagreement]]


@dataclass(frozen=True)
class OracleFamily:
    name: str
    #: The family's cases (imported when first asked for).
    cases: Callable[[], list[Any]]
    #: Name → (the checkpoint ckptdiff is run on, its ``--base`` or None) for these cases, written under a root.
    write: Callable[[Path, list[Any]], dict[str, tuple[Path, Path | None]]]
    #: The checkpoint's tensor names of a case (the engine side's tensor list).
    names: Callable[[Any], list[str]]
    #: The worker driver: engine E runs ``worker_<driver>E.py`` ("" is EAGLE-3's worker_vllm.py, worker_sglang.py).
    driver: str = ""
    #: The worker files besides worker.py and the driver whose text keys the family's cached results.
    shared: tuple[str, ...] = ()
    #: (case, engine result) → the tensors whose going unused is no degradation (None: compare.INERT's only).
    inert: Callable[[Any, Mapping[str, Any]], Callable[[str], bool]] | None = None
    #: ckptdiff's error codes of this family's rules → (stage, forward defect or None) (compare.FAILURE_OF).
    failure_of: Mapping[str, tuple[str, str | None]] = field(default_factory=dict)
    #: EAGLE-3's later layers' norms an engine never reads (compare.UNREAD) are no degradation in its cases.
    unread: bool = False
    #: What every case name of the family starts with: names are the job's and the results cache's handle on a
    #: case, unique across families ("": EAGLE-3's, which predate the prefixes).
    prefix: str = ""
    #: The family's own comparison (None: compare.py's engine_view / ckptdiff_view / disagreements).
    judge: Judge | None = None


def _eagle3_cases() -> list[Any]:
    from catalogue import CASES

    return list(CASES)


def _eagle3_write(root: Path, cases: list[Any]) -> dict[str, tuple[Path, Path | None]]:
    from cases import target_dir, write_all

    directories = write_all(root, cases)
    return {case.name: (directories[case.name], target_dir(root, case)) for case in cases}


def _eagle3_names(case: Any) -> list[str]:
    from cases import tensors_of

    return list(tensors_of(case))


def _k25_cases() -> list[Any]:
    from generated import K25_CASES

    return list(K25_CASES)


def _llama4_cases() -> list[Any]:
    from llama4_cases import LLAMA4_CASES

    return list(LLAMA4_CASES)


def _mtp_cases() -> list[Any]:
    from mtp_catalogue import MTP_CASES

    return list(MTP_CASES)


def _mtp_write(root: Path, cases: list[Any]) -> dict[str, tuple[Path, Path | None]]:
    from mtp_cases import write_mtp_cases

    return write_mtp_cases(root, cases)


def _mtp_inert(case: Any, result: Mapping[str, Any]) -> Callable[[str], bool]:
    from mtp_cases import inert

    return inert(case, result)


def _dflash_cases() -> list[Any]:
    from dflash_setting_cases import ALL_CASES

    return list(ALL_CASES)


def _dflash_write(root: Path, cases: list[Any]) -> dict[str, tuple[Path, Path | None]]:
    from dflash_cases import write_cases

    return dict(write_cases(root, tuple(cases)))


def _dflash_names(case: Any) -> list[str]:
    from dflash_cases import names_of

    return names_of(case)


def _dflash_judge(case: Any, engine: str, observed: Mapping[str, Any], entry: Mapping[str, Any]) -> list[Disagreement]:
    from dflash_judge import judge

    return judge(case, engine, observed, entry)


ORACLE_FAMILIES: tuple[OracleFamily, ...] = (
    OracleFamily("eagle3", _eagle3_cases, _eagle3_write, _eagle3_names, unread=True),
    OracleFamily(
        "mtp",
        _mtp_cases,
        _mtp_write,
        lambda case: list(case.names),
        driver="mtp_",
        shared=("worker_mtp.py",),
        prefix="mtp_",
        inert=_mtp_inert,
        failure_of={
            "mtp_not_supported": ("config", None),
            "mtp_layers_not_announced": ("config", None),
            # SGLang checks num_nextn_predict_layers when its NextN loader starts (_initialize_nextn_conf)
            "mtp_layers_key_absent": ("load", None),
            "mtp_layer_count_unsupported": ("load", None),
            "mtp_layer_missing": ("load", None),
            "mtp_layer_not_moe": ("construction", None),
            # SGLang's copy_with_check refuses a wider tensor into an FP8 parameter (parameter.py:72-75)
            "dtype_refused": ("load", None),
        },
    ),
    # EAGLE-3 drafters against a Kimi-K2.5 target (a wrapper: its text model's sizes in text_config, its capture
    # through language_model), run by worker_k25_<engine>.py around the EAGLE-3 driver
    OracleFamily(
        "eagle3_k25",
        _k25_cases,
        _eagle3_write,
        _eagle3_names,
        driver="k25_",
        shared=("worker_vllm.py", "worker_sglang.py", "k25_target.py"),
        unread=True,
        prefix="gen_k25_",
    ),
    # EAGLE-3 drafters against a Llama-4 target (Llama4ForConditionalGeneration: the same wrapping, its capture
    # through language_model, a Llama4ForCausalLM), run by the same drivers
    OracleFamily(
        "eagle3_llama4",
        _llama4_cases,
        _eagle3_write,
        _eagle3_names,
        driver="k25_",
        shared=("worker_vllm.py", "worker_sglang.py", "k25_target.py"),
        unread=True,
        prefix="gen_llama4_",
    ),
    # DFlash drafters against tiny targets, run by worker_dflash_<engine>.py (their setup answers SGLang's
    # start-up refusal of the CPU; their capture tracing and SGLang set-up are the EAGLE-3 drivers')
    OracleFamily(
        "dflash",
        _dflash_cases,
        _dflash_write,
        _dflash_names,
        driver="dflash_",
        shared=("worker_vllm.py", "worker_sglang.py"),
        prefix="dflash_",
        judge=_dflash_judge,
    ),
)


@dataclass(frozen=True)
class OracleVariant:
    """An engine setting compared as an engine of its own: the same engine environment driven by another worker
    module, ckptdiff run with the arguments that select the same setting, over cases of the families above."""

    name: str
    #: The pinned engine whose environment runs it (pins.txt).
    engine: str
    #: What it sets, in words (the table's label).
    setting: str
    #: Its worker driver: ``worker_<driver><engine>.py``; results cached under results/<driver><engine>-<version>/.
    driver: str
    #: ckptdiff's arguments that select the same setting.
    args: tuple[str, ...]
    #: Its cases (each of a family above, by ``family_of``: written and compared as that family's).
    cases: Callable[[], list[Any]]
    #: The worker files besides worker.py and the driver whose text keys its cached results.
    shared: tuple[str, ...] = ()


def _v1_cases() -> list[Any]:
    from v1_cases import V1_CASES

    return list(V1_CASES)


def _v2_cases() -> list[Any]:
    from v2_cases import V2_CASES

    return list(V2_CASES)


#: vLLM's V1 model runner (VLLM_USE_V2_MODEL_RUNNER=0): vLLM's own CPUModelRunner and V1 proposer, observed by
#: worker_v1_vllm.py, against ``ckptdiff --vllm-runner v1``. vLLM's default (V2) runner driven through its own
#: load_model (worker_v2_vllm.py: whether it sets the capture up at all, and where), against ckptdiff's default.
ORACLE_VARIANTS: tuple[OracleVariant, ...] = (
    OracleVariant(
        "vllm_v1",
        "vllm",
        "V1 model runner, VLLM_USE_V2_MODEL_RUNNER=0",
        driver="v1_",
        args=("--vllm-runner", "v1"),
        cases=_v1_cases,
        shared=("worker_vllm.py",),
    ),
    OracleVariant(
        "vllm_v2",
        "vllm",
        "V2 model runner (the default), its own load_model",
        driver="v2_",
        args=(),
        cases=_v2_cases,
        shared=("worker_vllm.py", "worker_v1_vllm.py"),
    ),
)


def family_of(case: Any) -> str:
    """The family a case belongs to (EAGLE-3's cases predate the field)."""
    return str(getattr(case, "family", "eagle3"))


def oracle_family(name: str) -> OracleFamily:
    return next(f for f in ORACLE_FAMILIES if f.name == name)


def all_cases() -> list[Any]:
    """Every family's cases, EAGLE-3's first; each name starts with its family's prefix, and names are unique
    across families."""
    found = [case for each in ORACLE_FAMILIES for case in each.cases()]
    names = [case.name for case in found]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"oracle case names must be unique across families: {repeated}")
    unprefixed = sorted(c.name for c in found if not c.name.startswith(oracle_family(family_of(c)).prefix))
    if unprefixed:
        raise ValueError(f"oracle case names must start with their family's prefix: {unprefixed}")
    return found


def failure_codes() -> dict[str, tuple[str, str | None]]:
    out: dict[str, tuple[str, str | None]] = {}
    for each in ORACLE_FAMILIES:
        out |= dict(each.failure_of)
    return out
