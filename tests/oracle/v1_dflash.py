"""DFlash drafters under vLLM's V1 model runner (``VLLM_USE_V2_MODEL_RUNNER=0``): the DFlash oracle's cases
(dflash_cases.py) and three written for V1, through vLLM's own CPUModelRunner (worker_v1dflash_vllm.py, the
V1 worker of worker_v1_vllm.py), against ``ckptdiff --vllm-runner v1`` with the DFlash oracle's comparison
(dflash_judge.judge, the DFlash family's: outcome, stage of failure, the tensor a load raised on, each parameter's
fate, the tensors used).

    python tests/oracle/v1_dflash.py [--case NAME] [--cached-only]

Prints one line per disagreement and the count; exit 0 (none), 1 (some), 2 (no vLLM environment). When the DFlash
oracle is on the family registry (oracle_families.py), these cases belong to the ``vllm_v1`` variant there.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
for path in (str(HERE), str(REPO)):
    if path not in sys.path:
        sys.path.insert(0, path)

from dflash_cases import CASES as DFLASH_CASES  # noqa: E402
from dflash_cases import DFlashCase, Target, write_cases  # noqa: E402
from dflash_setting_cases import CONFIG_CASES  # noqa: E402
from engines import missing_environments, oracle_home, pins, run_engine  # noqa: E402

#: Written for the V1 runner: where it captures other target states than V2 for the same fc.
V1_ONLY: tuple[DFlashCase, ...] = (
    DFlashCase(
        "v1_dflash_top_level_ids_8",
        "target_layer_ids [1, 5] at the top level only, an 8-layer Qwen3 target: V2 captures those + 1 (two states, "
        "fc's two), V1 reads no top-level ids and captures the class default, three states",
        config={"dflash_config.target_layer_ids": None, "target_layer_ids": [1, 5]},
        target=Target("qwen3", 8),
    ),
    DFlashCase(
        "v1_dflash_eagle_config_three_ids_8",
        "an eagle_config with three aux ids [2, 4, 6] beside dflash_config ids [1, 5], an 8-layer target: V1 "
        "captures three states at eagle_config's ids for fc's two, V2 the DFlash ids + 1",
        config={
            "dflash_config.target_layer_ids": [1, 5],
            "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 4, 6]},
        },
        target=Target("qwen3", 8),
    ),
    DFlashCase(
        "v1_dflash_eagle_config_empty_8",
        "an eagle_config section without ids beside dflash_config ids [1, 5]: V1 lets it replace the DFlash ids "
        "(none: the class default, three states), V2 reads the DFlash ids",
        config={"dflash_config.target_layer_ids": [1, 5], "eagle_config": {"use_aux_hidden_state": True}},
        target=Target("qwen3", 8),
    ),
)
CASES: tuple[DFlashCase, ...] = (*DFLASH_CASES, *CONFIG_CASES, *V1_ONLY)
DRIVER = "v1dflash_"
SHARED = ("worker_v1_vllm.py", "worker_vllm.py")


def run(
    names: list[str] | None = None, cached_only: bool = False, log: Any = sys.stderr, reporter: Any = None
) -> tuple[list[Any], int, list[str]]:
    """Every case through vLLM's V1 runner and ckptdiff --vllm-runner v1 (its JSON report; ``reporter``: run.py's
    in_process_report, mutate.py's): the disagreements, the cases compared, and the cases vLLM cannot be asked
    about here (with why)."""
    from dflash_judge import judge
    from run import ckptdiff_report

    chosen = [case for case in CASES if not names or case.name in names]
    (pin,) = [pin for pin in pins() if pin.engine == "vllm"]
    if missing_environments([pin]):
        raise SystemExit(f"not installed: {pin.label} under {oracle_home()}")
    found: list[Any] = []
    skipped = [f"{c.name}: {c.not_comparable['vllm']}" for c in chosen if "vllm" in c.not_comparable]
    with tempfile.TemporaryDirectory(prefix="ckptdiff-v1-dflash-") as scratch:
        paths = write_cases(Path(scratch), tuple(chosen))
        asked = {c.name: paths[c.name] for c in chosen if "vllm" not in c.not_comparable}
        observed = run_engine(pin, asked, log=log, cached_only=cached_only, driver=DRIVER, shared=SHARED)
        for case in chosen:
            if case.name in asked:
                report = (
                    reporter(*paths[case.name], ["vllm"], ("--vllm-runner", "v1"))
                    if reporter
                    else (ckptdiff_report(REPO, *paths[case.name], ["vllm"], ("--vllm-runner", "v1")))
                )
                (entry,) = report["engines"]
                found += judge(case, "vllm", observed[case.name], entry)
    return found, len(asked), skipped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append")
    parser.add_argument("--cached-only", action="store_true", help="never run the engine (mutate.py)")
    args = parser.parse_args(argv)
    try:
        found, compared, skipped = run(args.case, args.cached_only)
    except SystemExit as missing:
        print(missing)
        return 2
    for row in found:
        print(f"{row.case:36} {row.subject}: ckptdiff {row.ckptdiff} / engine {row.engine_did}")
    for line in skipped:
        print(f"not comparable: {line}")
    print(f"dflash oracle, vLLM's V1 runner: {compared} cases, {len(found)} disagreement(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
