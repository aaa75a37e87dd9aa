"""Runs inside one engine's virtual environment: converted checkpoints through the engine's own drafter loader.

    <engine-venv>/bin/python convert_worker.py ENGINE TARGET_DIR OUT_DIR CASE_DIR...

worker.py's run (one forked child per case, the engine driven by worker_<engine>.py), with two differences:
the checkpoint is loaded as ``ckptdiff convert`` wrote it, carrying the markers its *source* tensors were given
before conversion (``markers.json`` beside it: marker value → source tensor names), instead of markers written
here; and each parameter's result also says which source tensors' markers it holds (``holds``). Only the standard
library, torch and the engine are used here: this file never imports ckptdiff.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import sys
from typing import Any

MARKERS = "markers.json"


def keep_markers(case_dir: str, marked: str) -> dict[float, list[str]]:
    """The converted checkpoint as it is (already marked by its source): copied, and its markers map read."""
    shutil.copytree(case_dir, marked, dirs_exist_ok=True)
    with open(os.path.join(case_dir, MARKERS)) as handle:
        return {float(value): names for value, names in json.load(handle).items()}


def holds(model: Any, markers: dict[float, list[str]]) -> dict[str, list[str]]:
    """Each parameter → the source tensors whose markers it holds (worker.observe's reading, by name)."""
    import torch
    from worker import INT_SENTINEL

    found: dict[str, list[str]] = {}
    seen: set[int] = set()
    for name, param in model.named_parameters(remove_duplicate=False):
        if id(param) in seen or param.dtype == torch.bool:
            continue
        seen.add(id(param))
        data = param.detach().cpu()
        if data.dtype.is_floating_point:
            data = data.double()
            written = ~torch.isnan(data)
        else:
            written = data != INT_SENTINEL
        names: set[str] = set()
        for value in torch.unique(data[written]).tolist():
            names.update(markers.get(float(value), []))
        found[name] = sorted(names)
    return found


def main() -> None:
    engine = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import worker

    driver = importlib.import_module(f"worker_{engine}")
    original_observe = driver.observe

    def observe(model: Any, markers: dict[float, list[str]], built: dict[str, list[int]]) -> dict[str, Any]:
        result: dict[str, Any] = original_observe(model, markers, built)
        result["holds"] = holds(model, markers)
        return result

    driver.write_markers = keep_markers
    driver.observe = observe
    worker.main()


if __name__ == "__main__":
    main()
