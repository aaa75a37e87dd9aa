"""The one mapping between what an engine did (worker.py) and what ckptdiff says (its JSON); their differences are
compare_diff.py's.

Both sides are put in one vocabulary, then compared name by name:

tensor (a checkpoint name)   ``used``: its marker reached a parameter, or the engine consumed it into an
                             attribute (SGLang's d2t → hot_token_id); ckptdiff ``loaded``/``renamed``.
                             ``from_target``: used, then replaced by the target's (the embedding both engines
                             take from the target, the head SGLang takes without draft_vocab_size); ckptdiff
                             ``from_target``. ``unused``: its marker reached nothing; ckptdiff ``skipped``
                             (dropped or skipped). ``error``: the engine's load raised on it (the tensor the
                             loader was handed last); ckptdiff ``error``.
parameter (the engine's)     ``loaded``: every element written; ``partial``: some (one of q/k/v);
                             ``unwritten``: none, and the engine does not take it from the target;
                             ``altered``: fully written, but with values no checkpoint tensor holds (zero
                             padding of a narrower tensor, a lossy cast); ``from_target``: the engine takes
                             it from the target. ckptdiff's fused shards (``qkv_proj.weight[q]``) are folded
                             into their parameter; ``random``, ``default``, ``not_needed`` and ``missing``
                             are ``unwritten``; ckptdiff ``error`` (a shape it says the load raises on) equals
                             no engine fate unless the engine raised. Attention KV-cache scales, which the
                             engine sets itself when the checkpoint has none, are not compared.
outcome                      ``fails``: the engine raised while building or loading the drafter, or its
                             first forward cannot run: fc's width is not that of the hidden states the
                             target captures; the embedding comes from a target of another width; a loader
                             replaced a parameter by a tensor of another shape; hot_token_id is shorter
                             than the head it maps. ``degraded``: it loaded, but a trained tensor went
                             unused (other than those no loader uses: t2d, mask_hidden, rotary inv_freq), a
                             parameter stayed unwritten, partial or altered, the token map went through a
                             float type, hot_token_id is longer than the head, the head comes from a target
                             with another vocabulary, or the target layers captured differ from the ones
                             the case says it was trained on. ``loads``: none of these.
failure (when both fail)     where it fails, one of ``config`` (reading the configs: the architecture, the
                             speculators adapter, the target), ``construction`` (building the drafter's
                             modules), ``load`` (its load_weights) and ``forward`` (the first forward,
                             derived as above), and what: the tensor the load raised on, the config key the
                             raise names, or the forward's defect (``capture_width``: fc against the captured
                             states; ``embed_width``; ``token_map``: hot_token_id against the head;
                             ``target_class``: the target's class has no EAGLE-3 capture, its set-up raised;
                             ``reshaped``). ckptdiff's side is its earliest error events' (``FAILURE_OF``
                             maps each error code to its stage and kind; a code it does not map is a
                             disagreement of its own). Stages must be equal; a tensor must be among
                             ckptdiff's error tensors of that stage; a key must be named by one of its
                             messages; forward defects must be the same set.
capture set-up (a runner)    where the worker watched a model runner's own load (vLLM's V1 and V2 runners:
                             ``aux.runner_uses_aux``, the runner's own flag, and whether it called its set-up),
                             whether the target captures at all: the runner set none up exactly when ckptdiff
                             says ``aux_capture_off``; when it did and the states were traced, the target
                             layers whose outputs it captures equal ckptdiff's (``captured`` of its capture
                             event), ``runner_capture``.
environment                  an engine raise that is about this machine, not the drafter (a CPU kernel or
                             instruction set the wheel lacks, ``ENVIRONMENT``): the case is not comparable
                             under that engine, named with the kernel, and never counted.

When the engine raised, its lists describe progress up to the raise: then, besides the failure, every tensor
whose marker reached a parameter must be one ckptdiff does not call unused.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cases import HIDDEN, VOCAB, Case, tensors_of

#: Names no loader uses by design: skipping them is not a degradation.
INERT = re.compile(r"(^|\.)(t2d|mask_hidden|rotary_emb\.inv_freq)$")
#: Parameters an engine fills itself when the checkpoint has none (attention KV-cache quantization scales,
#: set to 1.0 by the attention layer; SGLang's MLA has two, attn_mha and attn_mqa): not compared.
ENGINE_DEFAULTS = re.compile(r"\.attn(_mha|_mqa)?\.(k|v|q|prob)_(scale|zero_point)$")
#: Parameters an engine builds and loads but whose forward never reads them, by engine: left unwritten, they do
#: not degrade the drafter. Derived from the forward's code (the first forward is not run here), at the pinned
#: versions: vLLM's decoder layers after the first call input_layernorm(hidden_states, residual) and never
#: hidden_norm (llama_eagle3.py, qwen3_eagle3.py: LlamaDecoderLayer.forward; deepseek_eagle3.py:
#: DeepseekV2Eagle3DecoderLayer.forward; layer_idx > 0); SGLang's call hidden_norm(hidden_states, residual) and
#: never input_layernorm (llama_eagle3.py LlamaDecoderLayer.forward, not is_input_layer).
UNREAD = {
    "vllm": re.compile(r"^model\.layers\.[1-9]\d*\.hidden_norm\.weight$"),
    "sglang": re.compile(r"^model\.layers\.[1-9]\d*\.input_layernorm\.weight$"),
}
CKPTDIFF_TENSOR = {"loaded": "used", "renamed": "used", "from_target": "from_target", "skipped": "unused"}
CKPTDIFF_PARAMETER = {
    "loaded": "loaded",
    "from_target": "from_target",
    "random": "unwritten",
    "default": "unwritten",
    "not_needed": "unwritten",
    "missing": "unwritten",
}


#: The stages a drafter can fail at, in the order an engine goes through them.
STAGES = ("config", "construction", "load", "forward")
#: The worker's stage when the engine raised → the stage in this vocabulary.
ENGINE_STAGE = {"start": "config", "config": "config", "distributed": "config", "construct": "construction"}
#: ckptdiff's error codes → (stage, forward defect or None). Keep in step with the rules' error events: an
#: unmapped code is reported, never guessed.
FAILURE_OF: dict[str, tuple[str, str | None]] = {
    **{
        code: ("config", None)
        for code in (
            "no_config",
            "no_architecture",
            "no_hidden_size",
            "architecture_not_registered",
            "architecture_not_eagle3",
            "not_eagle3",
            "speculators_config_invalid",
            "speculators_format_unsupported",
            "target_not_supported",
            "config_unrecognized",
        )
    },
    **{
        code: ("construction", None)
        for code in (
            "draft_vocab_size_absent",
            "layers_unsupported",
            "mla_needs_q_lora_rank",
            "config_invalid",
            "speculators_layer_config_incomplete",
            "quantization_config_invalid",
            "quantization_scheme_unsupported",
        )
    },
    **{code: ("load", None) for code in ("unknown_name", "shape_mismatch", "d2t_dtype", "missing_weight")},
    "aux_count_mismatch": ("forward", "capture_width"),
    "fc_without_capture": ("forward", "capture_width"),
    "aux_id_out_of_range": ("forward", "capture_width"),
    "target_hidden_mismatch": ("forward", "capture_width"),
    "embed_width_mismatch": ("forward", "embed_width"),
    "target_class_not_eagle3": ("forward", "target_class"),
    "d2t_length": ("forward", "token_map"),
}
#: Raises that are about this machine, not the drafter: (pattern, what is missing). The first group, when there
#: is one, names the kernel or instruction set.
ENVIRONMENT = (
    (re.compile(r"Could not run '([\w:.]+)' with arguments from the '(?:CPU|Meta)' backend"), "CPU kernel {0}"),
    (
        re.compile(r"No module named '((?:sgl_kernel|vllm\._C|vllm\._custom_ops|flash_attn|triton)[\w.]*)'"),
        "module {0}",
    ),
    (
        re.compile(r"\b(AVX-?512\w*|AMX\w*|avx512\w*|amx\w*)\b.*(?:not|unsupported|required)", re.I),
        "instruction set {0}",
    ),
    (re.compile(r"Torch not compiled with CUDA enabled"), "a CUDA build of torch"),
    (re.compile(r"Failed to find a kernel that can implement the (\w+) linear layer"), "a CPU kernel for {0}"),
    # vLLM's CPU build has no fused-MoE kernel for some sizes (the rebuilt layouts' scaled-down experts)
    (re.compile(r"No (\w+) MoE backend supports the deployment configuration"), "a CPU {0} MoE kernel for these sizes"),
    (re.compile(r"undefined symbol: (\w+)"), "native symbol {0}"),
    # SGLang's FP8 linear quantizes activations with sgl_kernel's CUDA op, which its CPU build does not define
    (re.compile(r"name '(sgl_\w+)' is not defined"), "sgl_kernel's {0}"),
    (re.compile(r"Cannot re-initialize CUDA in forked subprocess"), "CUDA (a CUDA-only path)"),
    (re.compile(r"oracle: the rotary kernel is a stand-in"), "the rotary kernel (vllm._custom_ops stand-in)"),
)


#: A capture set-up raise that refuses the target's class for EAGLE-3 (vLLM's supports_eagle3 check, SGLang's
#: set_eagle3_layers_to_capture check), not the ids: the forward defect ``target_class``.
TARGET_CLASS_REFUSED = re.compile(r"does not support EAGLE3 interface|does not implement set_eagle3_layers_to_capture")


@dataclass(frozen=True)
class Failure:
    """Where a drafter fails and on what (a tensor, a config key or a forward defect; None: not said)."""

    stage: str
    subject: str | None = None
    kind: str = ""  # "tensor", "key", "defect" or "" (none)
    code: str = ""  # ckptdiff's event code; the engine's exception type

    def __str__(self) -> str:
        what = f" {self.kind} {self.subject}" if self.subject else ""
        return f"{self.stage}{what}" + (f" ({self.code})" if self.code else "")


@dataclass(frozen=True)
class View:
    """One side's account of a case under one engine, in the shared vocabulary."""

    outcome: str
    tensors: dict[str, str]
    parameters: dict[str, str]
    reasons: tuple[str, ...] = ()
    raised: bool = False
    #: Why it fails (engine: one raise, or each forward defect; ckptdiff: each error event).
    failures: tuple[Failure, ...] = ()
    #: ckptdiff's error messages by stage (a key a raise names is looked up in them).
    messages: Mapping[str, str] = field(default_factory=dict)
    #: Engine side: why the capture could not be observed (then the case cannot agree).
    unobserved: str | None = None


@dataclass(frozen=True)
class Disagreement:
    case: str
    engine: str
    subject: str  # "outcome", "tensor NAME" or "parameter NAME"
    ckptdiff: str
    engine_did: str

    def row(self) -> tuple[str, str, str, str, str]:
        return (self.case, self.engine, self.subject, self.ckptdiff, self.engine_did)


def refused_capture(result: Mapping[str, Any]) -> Mapping[str, Any]:
    """The observation with a capture the target's class refused as a set-up raise (``setup_raised``), also where
    the worker recorded the raise as the capture's error (vLLM's driver: its set-up raised inside the observation)."""
    aux = result.get("aux") or {}
    error = str(aux.get("capture_error", ""))
    if "outputs" in aux or not TARGET_CLASS_REFUSED.search(error):
        return result
    return {**result, "aux": {**aux, "outputs": [], "setup_raised": error, "how": "set-up raised"}}


def engine_view(
    result: Mapping[str, Any],
    case: Case,
    names: list[str] | None = None,
    inert: Callable[[str], bool] | None = None,
    engine: str | None = None,
) -> View:
    """What the engine did, from the worker's observation of one case. For a case of another family than EAGLE-3's:
    ``names``, the checkpoint's tensors; ``inert``, the tensors whose going unused is no degradation there (a
    target's own tensors beside its MTP layers). ``engine``: whose, for an EAGLE-3 case: its unread parameters
    (``UNREAD``) do not degrade it."""
    result = refused_capture(result)
    raised = result.get("raised")
    params = {name: state for name, state in result.get("params", {}).items() if not ENGINE_DEFAULTS.search(name)}
    taken = set(result.get("from_target", []))
    parameters = {name: "from_target" if name in taken else state for name, state in params.items()}
    loaded = set(result.get("loaded", [])) | set(result.get("consumed", []))
    names = list(tensors_of(case)) if names is None else names
    tensors = {}
    for name in names:
        if name in loaded:
            replaced = any(_same_weight(name, p) for p in taken)
            tensors[name] = "from_target" if replaced else "used"
        else:
            tensors[name] = "unused"
    if raised:
        first_line = (raised["message"].strip().splitlines() or [""])[0][:160]
        reason = f"raised {raised['type']}: {first_line} (at {result.get('stage')})"
        failure = engine_failure(result, names)
        if failure.kind == "tensor" and failure.subject in tensors:
            tensors[failure.subject] = "error"
        return View("fails", tensors, parameters, (reason,), raised=True, failures=(failure,))
    fails, degraded = [], []
    fails += _forward_failures(result)
    for name, fate in tensors.items():
        if fate == "unused" and not INERT.search(name) and not (inert is not None and inert(name)):
            degraded.append(f"{name} unused")
    unread = UNREAD.get(engine or "")
    for name, state in parameters.items():
        if state == "unwritten" and unread is not None and unread.search(name):
            continue
        if state in ("unwritten", "partial"):
            degraded.append(f"{name} {state}")
        elif state == "altered":
            degraded.append(f"{name} holds values that are in no checkpoint tensor (padded or converted)")
    for name in result.get("float_into_int", []):
        degraded.append(f"{name}: token ids through a float type")
    hot = result.get("hot_token_id")
    if hot and hot.get("rows") is not None and hot["length"] > hot["rows"]:
        degraded.append(f"hot_token_id has {hot['length']} entries for a {hot['rows']}-row head")
    head_rows = result.get("head_rows")
    if "lm_head.weight" in taken and head_rows is not None and head_rows != VOCAB:
        degraded.append(f"lm_head from the {VOCAB}-row target though the drafter's head has {head_rows} rows")
    aux = result.get("aux") or {}
    unobserved = None
    if aux.get("uses_aux", True) and "outputs" not in aux:
        unobserved = f"the capture was not observed: {aux.get('capture_error', 'no capture recorded')}"
    elif case.trained_outputs is not None and aux.get("uses_aux", True) and aux.get("runner_uses_aux") is not False:
        # (a runner that set no capture up hands the drafter the last hidden state: runner_capture judges that)
        if sorted(set(case.trained_outputs)) != aux["outputs"]:
            degraded.append(f"captures outputs {aux['outputs']}, trained on {sorted(case.trained_outputs)}")
    outcome = "fails" if fails else "degraded" if degraded else "loads"
    failures = tuple(Failure("forward", kind, "defect") for kind in sorted({kind for kind, _ in fails}))
    reasons = tuple(text for _, text in fails) or tuple(degraded)
    return View(outcome, tensors, parameters, reasons, failures=failures, unobserved=unobserved)


#: A config key an exception names: "no attribute 'x'", KeyError 'x', "'x' is required", "missing ... 'x'".
KEY_IN_MESSAGE = re.compile(
    r"has no attribute '(\w+)'|^'(\w+)'$|'(\w+)' (?:is|are) required|missing[\w ]*?'(\w+)'|(\w+) must be"
)


def engine_failure(result: Mapping[str, Any], names: list[str]) -> Failure:
    """Where the engine's raise happened, and on what: at load, the tensor it was handed last; before that, the
    config key its message names (if it names one)."""
    raised = result["raised"]
    stage = ENGINE_STAGE.get(str(result.get("stage")), "load")
    if stage == "load":
        loading = result.get("loading")
        if loading in names:
            return Failure("load", loading, "tensor", raised["type"])
        return Failure("load", None, "", raised["type"])
    found = KEY_IN_MESSAGE.search(raised["message"].strip())
    key = next((g for g in found.groups() if g), None) if found else None
    return Failure(stage, key, "key" if key else "", raised["type"])


def environment_failure(result: Mapping[str, Any]) -> str | None:
    """What this machine lacks, when the engine's raise is about the machine and not the drafter; else None."""
    raised = result.get("raised")
    if not raised:
        return None
    text = f"{raised.get('message', '')}\n{result.get('traceback', '')}"
    for pattern, what in ENVIRONMENT:
        found = pattern.search(text)
        if found:
            return what.format(*found.groups())
    return None


def _forward_failures(result: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The first forward's defects: (kind, in words)."""
    found = []
    aux = result.get("aux") or {}
    if _fc_applied(aux) and aux.get("fc_in") is not None and "outputs" in aux and not aux.get("setup_raised"):
        if aux.get("runner_uses_aux") is False:  # no capture: the runner hands over the last hidden state
            width, states = HIDDEN, "the last hidden state is"
        else:
            width, states = len(aux["outputs"]) * HIDDEN, f"{len(aux['outputs'])} captured states are"
        if width != aux["fc_in"]:
            found.append(("capture_width", f"fc reads {aux['fc_in']} but {states} {width} wide"))
    if aux.get("setup_raised"):
        kind = "target_class" if TARGET_CLASS_REFUSED.search(aux["setup_raised"]) else "capture_width"
        found.append((kind, f"the target's capture set-up raised {aux['setup_raised']}"))
    for name, (built, now) in sorted(result.get("reshaped", {}).items()):
        found.append(("reshaped", f"{name} was built {built} and now holds {now}"))
    embed = next((p for p in result.get("from_target", []) if p.endswith("embed_tokens.weight")), None)
    width = result.get("embed_width")
    if embed and width is not None and width != HIDDEN:
        found.append(("embed_width", f"the target's {HIDDEN}-wide embedding replaces a {width}-wide one"))
    hot = result.get("hot_token_id")
    if hot and hot.get("rows") is not None and hot["length"] < hot["rows"]:
        found.append(("token_map", f"hot_token_id has {hot['length']} entries for a {hot['rows']}-row head"))
    return found


def _fc_applied(aux: Mapping[str, Any]) -> bool:
    """Whether the first forward runs the drafter's fc over the captured states: not when the drafter itself skips
    it (``uses_aux``: Llama/Qwen3 drafters with use_aux_hidden_state false), nor when vLLM's V2 runner set no
    capture up (its speculator then hands the drafter the last hidden state as is:
    v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py:210, ``if aux_hidden_states`` ... ``else``). The V1
    proposer calls the drafter's combine_hidden_states whatever the runner captured (llm_base_proposer.py:549)."""
    if not aux.get("uses_aux", True):
        return False
    return not (aux.get("runner") == "v2" and aux.get("runner_uses_aux") is False)


def _same_weight(tensor: str, parameter: str) -> bool:
    """Whether a checkpoint name is the parameter's weight (embed_tokens / lm_head), whatever its prefix."""
    return tensor.split(".")[-2:] == parameter.split(".")[-2:]


def ckptdiff_view(entry: Mapping[str, Any], failure_of: Mapping[str, tuple[str, str | None]] | None = None) -> View:
    """What ckptdiff says, from one ``engines[]`` entry of its JSON report (``failure_of``: FAILURE_OF with the
    other families' codes, oracle_families.py)."""
    failure_of = FAILURE_OF if failure_of is None else failure_of
    tensors = {t["name"]: CKPTDIFF_TENSOR.get(t["fate"], t["fate"]) for t in entry.get("tensors", [])}
    shards: dict[str, set[str]] = {}
    for parameter in entry.get("parameters", []):
        name = re.sub(r"\[\w+\]$", "", parameter["name"])
        if ENGINE_DEFAULTS.search(name):  # compared on neither side
            continue
        shards.setdefault(name, set()).add(CKPTDIFF_PARAMETER.get(parameter["fate"], parameter["fate"]))
    parameters = {}
    for name, fates in shards.items():
        if len(fates) == 1:
            parameters[name] = next(iter(fates))
        elif fates <= {"loaded", "unwritten"}:
            parameters[name] = "partial"
        else:
            parameters[name] = "/".join(sorted(fates))
    events = entry.get("events", [])
    codes = tuple(f"{e['severity']} {e['code']}" for e in events if e["severity"] != "info")
    failures, messages = [], {}
    for event in events:
        if event["severity"] != "error":
            continue
        stage, defect = failure_of.get(event["code"], (f"unmapped:{event['code']}", None))
        if defect is not None:
            failures.append(Failure(stage, defect, "defect", event["code"]))
        elif event.get("tensor"):
            failures.append(Failure(stage, event["tensor"], "tensor", event["code"]))
        else:
            failures.append(Failure(stage, None, "", event["code"]))
        messages[stage] = messages.get(stage, "") + " " + str(event.get("message", ""))
    return View(
        entry["outcome"],
        tensors,
        parameters,
        codes,
        raised=entry["outcome"] == "fails",
        failures=tuple(failures),
        messages=messages,
    )
