"""The oracle's converted outputs: each published layout in fixtures/, marked, converted by ``ckptdiff convert`` for
each engine with a pinned loader, then loaded by that engine's own loader.

Per source layout (``fixtures/drafters/*`` and the bundled Kimi drafters): a marked copy (floating tensor k holds
the k-th of worker.FLOAT_MARKERS, integer tensor k 1,000,000 + k but a d2t an offset that keeps every draft id
inside the vocabulary, in its own dtype), converted with the
command as a user runs it (``python -m ckptdiff convert MARKED OUT --to ENGINE``), then loaded by the engine
(convert_worker.py) against a target whose config matches the drafter's (its hidden size, vocabulary and the
real target's layer count; an MLA source's marked copy gains Kimi's yarn ``rope_scaling`` when it has none, which
SGLang's CPU rope factory needs, as the oracle's own MLA cases do). The marked source is loaded as published too.
The check, per parameter the engine builds: it is written (or taken from the target by the engine's own code
when convert dropped the embedding, or left unwritten exactly as the source as published leaves it), and the
markers it holds are exactly those of the source tensors convert.json names for the output tensors that fill
it. A layout convert refuses for an engine is listed with the plan's reason, and is not loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
FIXTURES = REPO / "fixtures"
CONVERT_WORKER = HERE / "convert_worker.py"
#: Engines with a pinned loader (pins.txt); TensorRT-LLM has none here.
ENGINES = ("sglang", "vllm")
#: The real target's layer count per fixture family (fixtures/drafters/bases), so aux ids are in range.
TARGET_LAYERS = {"kimi": 61, "llama3.1": 32, "qwen3": 36}


def sources() -> dict[str, Path]:
    """Every published EAGLE-3 layout in fixtures/: name → folder. The loaders driven here are the EAGLE-3 drivers
    (worker_<engine>.py): another family's layouts (MTP layers, which convert moves too) are not loaded by this job,
    and their conversions say "not proven by an engine"."""
    from ckptdiff.families import detect_family

    found = {
        p.name: p
        for p in sorted((FIXTURES / "drafters").iterdir())
        if p.is_dir() and p.name != "bases" and detect_family(json.loads((p / "config.json").read_text())) == "eagle3"
    }
    for name in (
        "kimi-k2-eagle3-published",
        "kimi-k25-eagle3-ours",
        "kimi-k25-eagle3-two-aux",
        "kimi-k2-eagle3-no-lm-head",
    ):
        found[name] = FIXTURES / name
    return found


def _flat(config: dict[str, Any]) -> dict[str, Any]:
    inner = config.get("transformer_layer_config")
    return {**inner, **config} if isinstance(inner, dict) else config


def target_config(source: Path) -> dict[str, Any]:
    """A Llama target the drafter fits: its width (target_hidden_size, else hidden_size), its vocabulary."""
    config = _flat(json.loads((source / "config.json").read_text()))
    hidden = config.get("target_hidden_size") or config["hidden_size"]
    family = next((f for f in TARGET_LAYERS if f in source.name), "kimi")
    heads = max(1, hidden // 8)
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_attention_heads": heads,
        "num_key_value_heads": heads,
        "num_hidden_layers": TARGET_LAYERS[family],
        "vocab_size": config["vocab_size"],
        "rms_norm_eps": 1e-5,
        "max_position_embeddings": 2048,
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": False,
    }


# --- markers -----------------------------------------------------------------------------------------------------


def float_markers() -> list[float]:
    """worker.FLOAT_MARKERS (the worker runs in the engine's environment; the list is rebuilt, not imported)."""
    values = (sign * (1 + m / 4) * 2**e for e in range(9) for m in range(4) for sign in (1, -1))
    return sorted(values, key=lambda v: (v != int(v), abs(v), v < 0))


NUMPY = {
    "BF16": "bfloat16",
    "F16": "<f2",
    "F32": "<f4",
    "F64": "<f8",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U8": "u1",
    "BOOL": "?",
}


def _dtype(name: str) -> Any:
    import numpy as np

    spelled = NUMPY[name]
    if not spelled.startswith(("<", "?", "i", "u")):
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, spelled))
    return np.dtype(spelled)


def d2t_marker(config: dict[str, Any], length: int) -> int:
    """d2t's marker: an offset every draft id keeps inside the vocabulary (convert proves that it does), odd and
    at least 9 so it is no float marker (a whole float marker is 1, 3, 5 or 7 times a power of 2)."""
    from ckptdiff.families.eagle3.spec import DrafterSpec

    vocab = DrafterSpec.of(config).vocab_size
    assert vocab is not None, "a marked drafter names its vocabulary"
    offset = vocab - length - (vocab - length + 1) % 2
    assert offset >= 9, f"vocab_size {vocab} leaves d2t of {length} no odd offset past the float markers"
    return offset


def write_marked(source: Path, into: Path) -> dict[float, list[str]]:
    """A copy of ``source`` whose tensor k holds marker k; returns marker value (as stored) → tensor names."""
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import save_file

    into.mkdir(parents=True)
    markers: dict[float, list[str]] = {}
    config = json.loads((source / "config.json").read_text())
    if "kv_lora_rank" in config and not config.get("rope_scaling"):
        # SGLang's CPU rope factory builds MLA attention only with a rope_scaling (an environment limit, as for the
        # oracle's MLA cases): Kimi's long-context yarn rope is added to the marked copy, the source otherwise kept
        from cases import KIMI_ROPE

        config["rope_scaling"] = KIMI_ROPE
    values = float_markers()
    k = 0
    for path in sorted(source.iterdir()):
        if path.name == "config.json":
            (into / path.name).write_text(json.dumps(config, indent=2))
            continue
        if not path.name.endswith(".safetensors"):
            shutil.copy(path, into / path.name)
            continue
        with safe_open(str(path), framework="numpy") as opened:
            names = list(opened.keys())
            shapes = {n: (opened.get_slice(n).get_dtype(), opened.get_slice(n).get_shape()) for n in names}
        tensors = {}
        for name in names:
            dtype, shape = shapes[name]
            k += 1
            if dtype == "BOOL":
                tensors[name] = np.ones(shape, dtype=bool)
                continue
            target = _dtype(dtype)
            value = values[k - 1] if target.kind in "fV" or dtype.startswith("F") else 1_000_000 + k
            if name.rpartition(".")[2] == "d2t" and target.kind in "iu":
                value = d2t_marker(config, shape[0])
            array = np.full(shape, value, dtype=np.float64).astype(target)
            stored = float(array.reshape(-1)[0].astype(np.float64)) if array.size else float(value)
            markers.setdefault(stored, []).append(name)
            tensors[name] = array
        save_file(tensors, str(into / path.name), metadata={"format": "pt"})
    return markers


# --- the check ----------------------------------------------------------------------------------------------------

#: A fused module → the stored modules it stacks (as every engine's load_weights does); each of its parameters
#: (``weight``, ``weight_scale``, ``input_scale``, ...) holds those modules' same-named tensors.
FUSED = {
    "self_attn.qkv_proj.": ("self_attn.q_proj.", "self_attn.k_proj.", "self_attn.v_proj."),
    "mlp.gate_up_proj.": ("mlp.gate_proj.", "mlp.up_proj."),
    "self_attn.fused_qkv_a_proj.": ("self_attn.q_a_proj.", "self_attn.kv_a_proj_with_mqa."),
    "self_attn.fused_qkv_a_proj_with_mqa.": ("self_attn.q_a_proj.", "self_attn.kv_a_proj_with_mqa."),
}
#: Parameters named otherwise than the tensor that fills them.
ALIASES = {"draft_id_to_target_id": "d2t"}


def canonical(name: str) -> str:
    """A parameter's or stored tensor's name with the layer spelled one way (layer i → ``L{i}.``), no ``model.``."""
    name = name[len("model.") :] if name.startswith("model.") else name
    found = re.match(r"^(?:midlayer\.(?:(\d+)\.)?|layers\.(\d+)\.)(.*)$", name)
    if found:
        return f"L{found[1] or found[2] or 0}.{found[3]}"
    return ALIASES.get(name, name)


def expected_sources(parameter: str, provenance: dict[str, Any]) -> set[str]:
    """The source tensors whose markers ``parameter`` must hold: those convert.json names for its tensors."""
    wanted = canonical(parameter)
    parts = {wanted}
    for fused, members in FUSED.items():
        stem, found, leaf = wanted.rpartition(fused)
        if found and "." not in leaf:
            parts = {stem + member + leaf for member in members}
    return {t["from"]["name"] for t in provenance["tensors"] if canonical(t["name"]) in parts}


@dataclass
class Verdict:
    source: str
    engine: str
    refused: str | None = None  # convert's reason, when it refuses this layout for this engine
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    parameters: int = 0

    @property
    def agrees(self) -> bool:
        return self.refused is None and not self.problems


#: Parameters an engine fills itself when the checkpoint has none (attention KV-cache scales): not compared,
#: as in compare.py.
ENGINE_DEFAULTS = re.compile(r"\.attn\.(k|v|q|prob)_scale$")
#: The name of the run that loads a source as published (marked, not converted), beside its converted outputs.
AS_PUBLISHED = "--as-published"


def judge(
    source: str,
    engine: str,
    observed: dict[str, Any],
    provenance: dict[str, Any],
    baseline: dict[str, Any] | None,
    expected_of: Callable[[str, dict[str, Any]], set[str]] = expected_sources,
    unused_ok: Callable[[str, dict[str, Any]], bool] = lambda name, observed: False,
) -> Verdict:
    """The converted output's load against convert.json: every parameter written (or taken from the target, or
    left unwritten exactly as the source as published leaves it under this engine), each holding the markers of
    exactly the source tensors convert.json names for it."""
    verdict = Verdict(source, engine)
    raised = observed.get("raised")
    if raised and baseline is not None and (baseline.get("raised") or {}).get("type") == raised["type"]:
        first = (raised["message"].strip().splitlines() or [""])[0][:120]
        verdict.refused = f"not comparable here: the engine raises for the source as published too ({first})"
        return verdict
    if raised:
        verdict.problems.append(f"the engine raised: {raised}")
        return verdict
    from_target = set(observed.get("from_target", []))
    holds: dict[str, list[str]] = observed.get("holds", {})
    published = (baseline or {}).get("params", {}) if not (baseline or {}).get("raised") else {}
    for parameter, state in observed.get("params", {}).items():
        if parameter == "hot_token_id" or ENGINE_DEFAULTS.search(parameter):
            continue  # SGLang's d2t attribute is checked through "consumed"; KV-cache scales are the engine's
        verdict.parameters += 1
        expected = expected_of(parameter, provenance)
        if parameter in from_target and not expected:
            continue  # the engine takes it from the target, as convert left it to (the embedding dropped)
        if state in ("unwritten", "partial") and not expected and published.get(parameter) == state:
            verdict.notes.append(f"{parameter} {state}, as with the source as published (no tensor for it)")
            continue
        if state not in ("loaded", "altered"):
            verdict.problems.append(f"{parameter} is {state}")
            continue
        held = set(holds.get(parameter, []))
        if held != expected:
            says = f"convert.json says {sorted(expected)}"
            verdict.problems.append(f"{parameter} holds the markers of {sorted(held)}, {says}")
        elif state == "altered":
            verdict.notes.append(f"{parameter}: the right markers, and values of no tensor (the engine pads it)")
    if "hot_token_id" in observed.get("params", {}):
        d2t = {t["from"]["name"] for t in provenance["tensors"] if t["name"] == "d2t"}
        if set(observed.get("consumed", [])) != d2t:
            made = observed.get("consumed")
            verdict.problems.append(f"hot_token_id made from {made}, convert.json says {sorted(d2t)}")
    written = {t["from"]["name"] for t in provenance["tensors"] if t["dtype"] != "BOOL"}
    reached = {n for names in holds.values() for n in names} | set(observed.get("consumed", []))
    unused = written - reached
    for name in sorted(n for n in unused if unused_ok(n, observed)):
        verdict.notes.append(f"{name} written and not loaded: the engine takes its role from the target")
    unused = {n for n in unused if not unused_ok(n, observed)}
    if unused:
        verdict.problems.append(f"written but in no parameter: {sorted(unused)}")
    return verdict


# --- running -------------------------------------------------------------------------------------------------------


def mark_and_convert(
    root: Path, name: str, folder: Path, python: str = sys.executable, base: Path | None = None
) -> tuple[dict[str, Path], list[Verdict]]:
    """``folder`` marked (under ``root/marked``) and converted for every engine (with ``--base``, when given):
    engine → converted folder, and convert's refusals."""
    marked = root / "marked" / (name + AS_PUBLISHED)  # the worker names results by folder name
    markers = json.dumps({str(k): v for k, v in write_marked(folder, marked).items()})
    (marked / "markers.json").write_text(markers)
    converted: dict[str, Path] = {}
    refused: list[Verdict] = []
    for engine in ENGINES:
        out = root / "converted" / engine / name
        out.parent.mkdir(parents=True, exist_ok=True)
        command = [python, "-m", "ckptdiff", "convert", str(marked), str(out), "--to", engine, "--format", "json", "-q"]
        done = subprocess.run(
            command + (["--base", str(base)] if base is not None else []),
            capture_output=True,
            text=True,
            cwd=REPO,
            env={**os.environ, "NO_COLOR": "1"},
            timeout=600,
        )
        if done.returncode != 0:
            refused.append(Verdict(name, engine, refused=(done.stderr.strip().splitlines() or ["?"])[-1]))
            continue
        (out / "markers.json").write_text(markers)
        converted[engine] = out
    return converted, refused


def convert_all(root: Path, python: str = sys.executable) -> tuple[dict[tuple[str, str], Path], list[Verdict]]:
    """Every source marked and converted for every engine; (source, engine) → converted folder, and refusals."""
    converted: dict[tuple[str, str], Path] = {}
    refused: list[Verdict] = []
    for name, folder in sources().items():
        outs, refusals = mark_and_convert(root, name, folder, python)
        converted |= {(name, engine): out for engine, out in outs.items()}
        refused += refusals
        target = target_folder(root, name)
        if not target.exists():  # sources that fit one target share it: one engine start-up for them all
            target.mkdir(parents=True)
            (target / "config.json").write_text(json.dumps(target_config(folder), indent=1))
    return converted, refused


def target_folder(root: Path, source: str) -> Path:
    """The target a source is loaded against, named by its config (equal configs, one folder)."""
    config = json.dumps(target_config(sources()[source]), sort_keys=True)
    return root / "targets" / hashlib.sha256(config.encode()).hexdigest()[:12]


def _digest(folder: Path) -> str:
    sha = hashlib.sha256()
    for path in sorted(folder.iterdir()):
        if path.name != "convert.json":  # its command line names a temporary folder
            sha.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return sha.hexdigest()


def run_engines(
    converted: dict[tuple[str, str], Path],
    root: Path,
    *,
    driver: str = "",
    targets: Mapping[str, Path] | None = None,
    expected_of: Callable[[str, dict[str, Any]], set[str]] = expected_sources,
    unused_ok: Callable[[str, dict[str, Any]], bool] = lambda name, observed: False,
) -> list[Verdict]:
    """Each converted output through its engine's loader (results cached by engine, worker and content).
    ``driver``: the worker driver's prefix (``worker_<driver><engine>.py``; "" is EAGLE-3's); ``targets``: each
    source's target folder (default: the Llama target its config fits)."""
    from engines import PAIR, oracle_home, pins

    verdicts: list[Verdict] = []
    for pin in pins():
        if pin.engine not in ENGINES or not pin.installed:
            continue
        cache = oracle_home() / "results" / f"convert-{driver}{pin.engine}-{pin.version}"
        cache.mkdir(parents=True, exist_ok=True)
        drivers = [HERE / f"worker_{driver}{pin.engine}.py"] + (
            [HERE / f"worker_{driver.rstrip('_')}.py"] if driver else []
        )
        code = "".join(p.read_text() for p in (CONVERT_WORKER, HERE / "worker.py", *drivers))
        mine = {src: path for (src, engine), path in converted.items() if engine == pin.engine}
        for src in list(mine):
            mine[src + AS_PUBLISHED] = root / "marked" / (src + AS_PUBLISHED)
        results: dict[str, dict[str, Any]] = {}
        todo: dict[str, list[str]] = {}  # target → sources
        keys = {}
        for src, path in mine.items():
            name = src.removesuffix(AS_PUBLISHED)
            target = targets[name] if targets is not None else target_folder(root, name)
            key = hashlib.sha256(
                "\0".join((pin.engine, pin.version, pin.requirements, code, _digest(path), _digest(target))).encode()
            ).hexdigest()[:24]
            keys[src] = key
            cached = cache / f"{src}-{key}.json"
            if cached.is_file():
                results[src] = json.loads(cached.read_text())
            else:
                todo.setdefault(str(target), []).append(src)
        for target, names in todo.items():
            out = Path(tempfile.mkdtemp(prefix=f"ckptdiff-convert-oracle-{pin.engine}-"))
            try:
                env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
                env.update(CUDA_VISIBLE_DEVICES="", PYTHONNOUSERSITE="1", TOKENIZERS_PARALLELISM="false")
                # worker.py's command line: ENGINE OUT_DIR CASE_DIR::TARGET_DIR...
                command = [str(pin.python), str(CONVERT_WORKER), driver + pin.engine, str(out)]
                command += [f"{mine[name]}{PAIR}{target}" for name in names]
                done = subprocess.run(
                    command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1800
                )
                for name in names:
                    produced = out / f"{name}.json"
                    if not produced.is_file():
                        raise RuntimeError(
                            f"no result for {name} under {pin.label} (exit {done.returncode}):\n{done.stdout[-3000:]}"
                        )
                    results[name] = json.loads(produced.read_text())
                    shutil.copy(produced, cache / f"{name}-{keys[name]}.json")
            finally:
                shutil.rmtree(out, ignore_errors=True)
        for src, observed in sorted(results.items()):
            if src.endswith(AS_PUBLISHED):
                continue
            provenance = json.loads((mine[src] / "convert.json").read_text())
            baseline = results.get(src + AS_PUBLISHED)
            verdicts.append(judge(src, pin.engine, observed, provenance, baseline, expected_of, unused_ok))
    return verdicts


def summary(verdicts: list[Verdict]) -> str:
    lines = []
    for engine in ENGINES:
        mine = [v for v in verdicts if v.engine == engine]
        loaded = [v for v in mine if v.refused is None]
        env = [v for v in mine if v.refused and v.refused.startswith("not comparable")]
        lines.append(
            f"{engine}: {len(loaded)} converted outputs loaded, {sum(v.agrees for v in loaded)} agree "
            f"({sum(v.parameters for v in loaded)} parameters checked), "
            f"{sum(1 for v in loaded if not v.agrees)} disagree; {len(mine) - len(loaded) - len(env)} refused by "
            f"convert; {len(env)} not comparable here"
        )
    for v in verdicts:
        for note in v.notes:
            lines.append(f"  note: {v.source} under {v.engine}: {note}")
        if v.refused:
            lines.append(f"  refused: {v.source} for {v.engine}: {v.refused}")
        for problem in v.problems:
            lines.append(f"  DISAGREES: {v.source} under {v.engine}: {problem}")
    return "\n".join(lines)


if __name__ == "__main__":  # python tests/oracle/convert_cases.py: the table, without pytest
    sys.path.insert(0, str(HERE))
    work = Path(tempfile.mkdtemp(prefix="ckptdiff-convert-oracle-"))
    try:
        converted, refused = convert_all(work)
        found = refused + run_engines(converted, work)
        print(summary(found))
        sys.exit(0 if all(v.agrees or v.refused for v in found) else 1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
