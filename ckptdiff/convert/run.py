"""One conversion end to end: refuse what is hostile, plan, write into ``OUT.partial``, prove, rename.

OUT is named only once its contents are proven: until then everything is in ``OUT.partial/``, which a failed read
or proof leaves for inspection (the message names it), a write the disk refuses removes, and a Ctrl-C leaves
unfinished, with no ``convert.json`` (written last, once proven). SRC is only ever read; each of its local files'
inode, size and modification time is taken before reading and compared after the write and the proof, so a SRC
rewritten meanwhile fails the run.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..checkpoint import INDEX_SUFFIX, Checkpoint
from ..errors import CkptdiffError, printable_name
from ..naming import RenameRule
from ..sources import LocalSpec, SourceOptions, open_source, parse_spec, read_source
from ..sources.base import Source
from ..version import __version__
from .plan import ConvertRefused, Embed, Plan, build_plan
from .prove import Proof, prove
from .targets import TARGETS, TargetLayout
from .write import sync_folder, write_durably, write_plan

PARTIAL_SUFFIX = ".partial"
PROVENANCE_FILE = "convert.json"
#: Exit statuses: done (or a plan printed), not done (a plan that fails, a write or proof that fails).
EXIT_DONE, EXIT_FAILED = 0, 1


@dataclass(frozen=True)
class ConvertRequest:
    src: str
    out: str
    engine: str
    base: str | None = None
    from_base: str | None = None
    embed: Embed | None = None
    plan_only: bool = False
    force: bool = False
    max_shard_size: int | None = None
    allow_tokenizer_change: bool = False
    renames: Sequence[RenameRule] = ()
    allowed_events: Sequence[str] = ()
    command: str = ""


@dataclass
class Outcome:
    plan: Plan
    proof: Proof | None = None
    written_to: Path | None = None  # OUT once renamed, or OUT.partial when left
    failure: str | None = None  # one line: why OUT was not made
    document: dict[str, Any] | None = None  # convert.json's contents, once written

    @property
    def exit_code(self) -> int:
        if self.failure is not None or not self.plan.ok or (self.proof is not None and not self.proof.ok):
            return EXIT_FAILED
        return EXIT_DONE


class ConvertFailed(CkptdiffError):
    """The write or the proof failed: OUT.partial stays, exit 1."""


class ConvertWriteError(CkptdiffError):
    """OUT.partial (or OUT) could not be written: a full disk, a quota, a read-only mount; exit 2."""


def partial_of(out: Path) -> Path:
    """Where OUT is built; OUT itself for a path with no name of its own (".", "/": refused unless --plan)."""
    return out.with_name(out.name + PARTIAL_SUFFIX) if out.name not in ("", "..") else out


def convert(
    request: ConvertRequest,
    options: SourceOptions | None = None,
    advance: Callable[[str, int], Callable[[int], None] | None] | None = None,
) -> Outcome:
    """Plan (and, unless ``plan_only``, write, prove and rename) one conversion. ``advance(label, total)`` gives
    a callback for the bytes written, for a progress bar."""
    options = options or SourceOptions()
    _refuse_flags_without_base(request)
    layout = TARGETS[request.engine]
    if not request.out.strip():  # `"$OUT"` unset, or a space: not the current folder, nor a folder named " "
        raise ConvertRefused(repr(request.out), "is empty: give OUT, the new folder's name, e.g. ./drafter-vllm")
    out = Path(request.out).expanduser()
    here = out.name in ("", "..") or _is_current_folder(out)  # ".", "/", "$PWD": none of its own to build and name
    if here and not request.plan_only:
        raise ConvertRefused(
            str(out),
            "names the current folder or one above it: convert writes OUT as a new folder of its own",
            "give it a name, e.g. ./drafter-vllm",
        )
    partial = partial_of(out)
    _refuse_hostile_paths(request, out, partial)
    src_source = open_source(request.src, options)
    before = snapshot(src_source)
    source = read_source(src_source)
    base_source, base = _read_base(request, options, source)
    tokenizer = _tokenizers(request, source, options)
    plan = _plan(request, source, layout, base)
    plan.tokenizer = tokenizer
    outcome = Outcome(plan)
    if request.plan_only or not plan.ok:
        return outcome
    try:
        if partial.exists():
            shutil.rmtree(partial)  # --force (checked above): a previous run's leftovers
        partial.mkdir()
    except OSError as err:
        raise ConvertWriteError(str(partial), f"cannot be made: {err.strerror or err}") from None
    try:
        return _write_and_prove(request, plan, outcome, src_source, base_source, before, partial, out, advance)
    except OSError as err:  # the disk is full, a quota, a read-only mount: reads say their own line (sources)
        where = err.filename if isinstance(err.filename, str) else str(partial)
        # nothing in it to inspect but where the disk gave out, and it holds the room a rerun needs
        shutil.rmtree(partial, ignore_errors=True)
        left = f"{printable_name(str(partial))} is left"
        hint = "removed; rerun once there is room" if not partial.exists() else left
        raise ConvertWriteError(where, f"cannot be written: {err.strerror or err}", hint) from None


def _write_and_prove(
    request: ConvertRequest,
    plan: Plan,
    outcome: Outcome,
    src_source: Source,
    base_source: Source | None,
    before: Snapshot,
    partial: Path,
    out: Path,
    advance: Callable[[str, int], Callable[[int], None] | None] | None,
) -> Outcome:
    """Write the plan into ``partial``, prove it, write convert.json, and name it ``out`` once proven."""
    sources: dict[str, Source] = {"source": src_source}
    if base_source is not None:
        sources["base"] = base_source
    bar = advance(str(partial), plan.nbytes) if advance else None
    try:
        written = write_plan(plan, partial, sources, bar)
        _unchanged(src_source, before, partial)
        proof = prove(plan, partial, sources, written)
        _unchanged(src_source, before, partial)
    except CkptdiffError as err:  # a read that failed mid-write, SRC rewritten: OUT.partial stays
        outcome.written_to = partial
        outcome.failure = f"{err.line()}; {printable_name(str(partial))} is left for inspection"
        return outcome
    outcome.proof = proof
    outcome.document = provenance_map(plan, request, proof)
    write_durably(partial / PROVENANCE_FILE, json.dumps(outcome.document, indent=2) + "\n")
    if not proof.ok:
        outcome.written_to = partial
        shown = printable_name(str(partial))
        outcome.failure = f"{shown} is not proven ({len(proof.problems)} problems above); left for inspection"
        return outcome
    _put_in_place(partial, out)
    outcome.written_to = out
    return outcome


#: The families convert writes, and the words of its refusal for the others.
CONVERTED = ("eagle3", "mtp")
CONVERTED_WORDS = "EAGLE-3 drafters and DeepSeek-V3/GLM-layout MTP layers"


def _plan(request: ConvertRequest, source: Checkpoint, layout: TargetLayout, base: Checkpoint | None) -> Plan:
    """The plan of SRC's family: EAGLE-3's, or the MTP layers moved; another family's checkpoint is refused rather
    than replayed by EAGLE-3's rules (which would fail it for reasons not its own)."""
    from ..families import detect_family, family

    found = detect_family(source.config) if source.config is not None else None
    if found is not None and found not in CONVERTED:
        raise ConvertRefused(
            source.spec,
            f"its config.json describes {family(found).title}; convert writes {CONVERTED_WORDS}",
            f"ckptdiff {source.spec} --engine ENGINE says whether an engine loads it as it is",
        )
    if found is None and source.config is not None:
        from ..families.eagle3.legacy import eagle1_fc

        legacy = eagle1_fc(source)
        if legacy is not None:
            raise ConvertRefused(
                source.spec,
                f"{legacy[0]} is {legacy[1]}, an fc over [embedding; hidden state] with no d2t or midlayer: an "
                f"EAGLE-1/2 drafter; convert writes {CONVERTED_WORDS}",
                f"ckptdiff {source.spec} --engine ENGINE says where the engines serve it",
            )
    if found == "mtp":
        for flag, given in (("--embed", request.embed), ("--from-base", request.from_base)):
            if given is not None:
                raise ConvertRefused(flag, "applies to EAGLE-3 drafters; MTP layers keep their own tensors")
        from .mtp import build_mtp_plan

        return build_mtp_plan(
            source,
            layout,
            base=base,
            renames=request.renames,
            max_shard_size=request.max_shard_size,
            allowed_events=request.allowed_events,
        )
    return build_plan(
        source,
        layout,
        base=base,
        embed=request.embed,
        renames=request.renames,
        max_shard_size=request.max_shard_size,
        allow_tokenizer_change=request.allow_tokenizer_change,
        allowed_events=request.allowed_events,
    )


def _refuse_flags_without_base(request: ConvertRequest) -> None:
    """``--embed base``, ``--from-base`` and ``--allow-tokenizer-change`` without ``--base`` (the last would change
    nothing), refused before SRC is read (a Hub SRC's listing and
    headers cost requests), not once the plan is built."""
    if request.base is not None:
        return
    if request.embed == "base":
        raise ConvertRefused("--embed base", "needs --base: the model whose embedding is grafted")
    if request.from_base is not None:
        raise ConvertRefused("--from-base", "needs --base: the model whose vocabulary is compared with it")
    if request.allow_tokenizer_change:
        raise ConvertRefused("--allow-tokenizer-change", "needs --base: d2t is carried to its vocabulary")


def _refuse_hostile_paths(request: ConvertRequest, out: Path, partial: Path) -> None:
    """OUT or OUT.partial inside SRC (or BASE), SRC inside an OUT --force would replace, OUT existing without
    --force. A folder or an index is its whole folder; a single weight file is that file (OUT may sit beside it)."""
    resolved_out = out.resolve()
    resolved_partial = partial.resolve()
    for what, spec in (("SRC", request.src), ("--base", request.base), ("--from-base", request.from_base)):
        if spec is None:
            continue
        try:
            parsed = parse_spec(spec)
        except CkptdiffError:
            continue  # reading it says why
        if not isinstance(parsed, LocalSpec):
            continue
        guarded = parsed.path.resolve()
        try:
            if guarded.is_file() and guarded.name.endswith(INDEX_SUFFIX):
                guarded = guarded.parent
        except OSError:
            continue  # a name the system cannot look up (ENAMETOOLONG): reading it says why
        if resolved_out == guarded or guarded in resolved_out.parents:
            raise ConvertRefused(
                str(out), f"is inside {what} {printable_name(spec)}: convert never writes into its input"
            )
        if partial != out and (resolved_partial == guarded or resolved_partial in guarded.parents):
            raise ConvertRefused(
                str(out),
                f"is built in {printable_name(str(partial))}, which holds {what} {printable_name(spec)}: convert never "
                "writes into its input",
            )
        if request.force and (resolved_out in guarded.parents):
            raise ConvertRefused(str(out), f"holds {what} {printable_name(spec)}: --force would replace it")
    if request.plan_only:
        return
    try:
        if not out.parent.is_dir():
            if out.parent.exists():  # a file where the folder goes
                raise ConvertRefused(str(out), f"its parent {out.parent} is not a folder")
            raise ConvertRefused(str(out), "its parent folder does not exist")
        if (out.exists() or out.is_symlink()) and not request.force:
            raise ConvertRefused(str(out), "already exists (--force replaces it once the new one is proven)")
        if out.is_symlink():  # a link is never replaced, even to an earlier output: say so, not "no convert.json"
            raise ConvertRefused(
                str(out),
                f"is a symlink (to {printable_name(os.readlink(out))}): --force replaces only a folder an earlier "
                "convert wrote, or an empty one, never a link",
                "give the folder it names as OUT, or remove the link yourself",
            )
        if out.exists() and not _replaceable(out):
            raise ConvertRefused(
                str(out),
                "exists and is not an earlier convert output (no convert.json): --force replaces only those and "
                "empty folders",
                "remove it yourself, or choose another OUT",
            )
        if partial.exists() and not request.force:
            raise ConvertRefused(str(partial), "exists, left by an earlier run: remove it, or --force")
        if partial.is_dir() and not partial.is_symlink() and (foreign := _not_written_by_convert(partial)):
            shown = ", ".join(printable_name(name) for name in foreign[:3]) + (" …" if len(foreign) > 3 else "")
            raise ConvertRefused(
                str(partial),
                f"exists and holds files convert does not write ({shown}): --force removes only an earlier run's "
                "leftovers",
                "remove it yourself, or choose another OUT",
            )
    except OSError as err:  # a name longer than the file system allows (ENAMETOOLONG): no output could be made
        raise ConvertRefused(str(out), f"cannot be written: {err.strerror or err}") from None


def _is_current_folder(out: Path) -> bool:
    try:
        return out.resolve() == Path.cwd().resolve()
    except OSError:  # a name the system cannot look up, a current folder since removed: others say why
        return False


def _not_written_by_convert(partial: Path) -> list[str]:
    """The entries of a left OUT.partial that no convert run writes there (its weights, index, config.json and
    convert.json, all files): a user's folder of that name is never removed by --force."""
    return sorted(
        entry.name
        for entry in partial.iterdir()
        if entry.is_symlink()
        or not entry.is_file()
        or not (entry.name in ("config.json", "convert.json") or entry.name.endswith((".safetensors", INDEX_SUFFIX)))
    )


def _replaceable(out: Path) -> bool:
    """Whether --force may replace OUT: a folder an earlier convert wrote (its convert.json), or an empty one; a
    user's other folder or file is never removed for a mistyped OUT."""
    if out.is_symlink() or not out.is_dir():
        return False
    return (out / "convert.json").is_file() or not any(out.iterdir())


def _read_base(
    request: ConvertRequest, options: SourceOptions, source: Checkpoint
) -> tuple[Source | None, Checkpoint | None]:
    if request.base is None:
        return None, None
    from ..base_layouts import wanted_groups
    from ..sources.wanted import Wanted

    base_source = open_source(request.base, options)
    wanted: Any = Wanted(wanted_groups(("embedding",))) if request.embed == "base" else set()
    return base_source, read_source(base_source, wanted=wanted)


def _tokenizers(request: ConvertRequest, source: Checkpoint, options: SourceOptions) -> Any:
    """The vocabulary check when SRC's d2t/t2d are carried to BASE: required unless --allow-tokenizer-change."""
    if request.base is None or not any(n.rpartition(".")[2] in ("d2t", "t2d") for n in source.tensors):
        return None
    if request.from_base is None:
        if request.allow_tokenizer_change:
            return None
        raise ConvertRefused(
            "--base",
            f"carries {source.spec}'s d2t to {request.base}, whose vocabulary is not checked",
            "give --from-base ORG/MODEL (the model the drafter was trained for), or --allow-tokenizer-change",
        )
    from .tokenizers import compare_tokenizers

    check = compare_tokenizers(request.from_base, request.base, options)
    if not check.same and not request.allow_tokenizer_change:
        raise ConvertRefused(
            f"{check.from_base} → {check.base}",
            f"the vocabularies differ ({'; '.join(check.differences)}): d2t would map to the wrong tokens",
            "--allow-tokenizer-change converts anyway",
        )
    return check


Snapshot = dict[str, "tuple[object, ...] | None"]


def snapshot(source: Source) -> Snapshot:
    """Each file of SRC by what a rewrite during the run changes: (inode, size, mtime) on disk, the version an
    object store reports; a Hub SRC is read at one commit, which does not change."""
    if source.at_one_commit:
        return {}
    return {name: source.fingerprint(name) for name in source.list_files().files}


def _unchanged(source: Source, before: Snapshot, partial: Path) -> None:
    for name, state in before.items():
        if source.fingerprint(name) != state:
            raise ConvertFailed(source.name_of(name), "changed while it was converted (its version, size or mtime)")


def _put_in_place(partial: Path, out: Path) -> None:
    """OUT.partial → OUT; an OUT being replaced (--force) is moved aside first and removed only after. Wherever the
    swap is cut (Ctrl-C or SIGTERM unwinding the run, a failed rename), what is on disk says how far it got: an OUT
    moved aside while OUT is missing goes back, and once the new OUT is in place the old one is removed to its end."""
    sync_folder(partial)  # every file and entry of the output is on disk before the old OUT can go
    aside = out.with_name(f"{out.name}.replaced-{os.getpid()}")
    try:
        if out.exists() or out.is_symlink():
            os.rename(out, aside)
        os.rename(partial, out)
        sync_folder(out.parent)
    finally:
        if os.path.lexists(aside):
            if os.path.lexists(out):
                _remove(aside)
            else:
                os.rename(aside, out)  # the user's OUT goes back where it was


def _remove(path: Path) -> None:
    """A replaced OUT removed whole: cut halfway (an interrupt in the removal), the rest goes too before the run
    unwinds, so no gutted ``OUT.replaced-PID`` is left."""
    if not path.is_dir() or path.is_symlink():
        path.unlink()
        return
    try:
        shutil.rmtree(path)
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise


def provenance_map(plan: Plan, request: ConvertRequest, proof: Proof | None) -> dict[str, Any]:
    """convert.json: where every output tensor came from, the config patch, the checks and the proof."""
    from .render import plan_document

    document = plan_document(plan)
    document["command"] = request.command
    document["ckptdiff_version"] = __version__
    if proof is not None:
        document["proof"] = proof.to_dict()
    return document
