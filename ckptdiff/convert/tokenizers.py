"""Do two models share a vocabulary? Their vocabulary files and special tokens, compared by content hash.

A drafter's ``d2t``/``t2d`` map draft ids to the ids of the tokenizer it was trained with. Carried to another
base, they are right only if that base tokenizes the same way. Compared: the vocabulary files (``tokenizer.json``,
``tokenizer.model``, ``tiktoken.model``, ``vocab.json``, ``merges.txt``, ...) and the special tokens
(``special_tokens_map.json``, ``added_tokens.json``, and ``tokenizer_config.json``'s special-token keys), never
the chat template. A Hub repo's files are compared by the hashes its listing gives (git blob id, LFS sha256),
without downloading them; a local file or an object by its bytes. ``tokenizer_config.json`` is read only when its
hashes differ, to tell a changed chat template (not a vocabulary change) from changed special tokens.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from ..errors import CkptdiffError, printable_name
from ..sources import HubSpec, SourceOptions, open_source, parse_spec

VOCABULARY_FILES = (
    "tokenizer.json",
    "tokenizer.model",
    "tiktoken.model",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
    "qwen.tiktoken",
)
SPECIAL_TOKEN_FILES = ("special_tokens_map.json", "added_tokens.json")
TOKENIZER_CONFIG = "tokenizer_config.json"
#: tokenizer_config.json's keys that define tokens (the rest, chat_template first, do not change ids).
SPECIAL_TOKEN_KEYS = (
    "added_tokens_decoder",
    "additional_special_tokens",
    "bos_token",
    "eos_token",
    "pad_token",
    "unk_token",
    "sep_token",
    "cls_token",
    "mask_token",
)
#: The biggest tokenizer file read whole (a tokenizer.json of a 250 k vocabulary is ~20 MB).
MAX_TOKENIZER_FILE = 64 * 1024 * 1024

Hashes = dict[str, str]  # kind ("git", "sha256") → hex


@dataclass
class TokenizerCheck:
    from_base: str
    base: str
    compared: list[str] = field(default_factory=list)  # "tiktoken.model (Hub hashes)"
    differences: list[str] = field(default_factory=list)

    @property
    def same(self) -> bool:
        return not self.differences

    def to_dict(self) -> dict[str, Any]:
        return {
            "from_base": self.from_base,
            "base": self.base,
            "same": self.same,
            "compared": self.compared,
            "differences": self.differences,
        }


class _Side:
    """One model's tokenizer files: their hashes (from the Hub's listing, or computed from the bytes)."""

    def __init__(self, spec: str, options: SourceOptions) -> None:
        self.spec = spec
        self.source = open_source(spec, options)
        parsed = parse_spec(spec)
        self.hub = isinstance(parsed, HubSpec)
        self.hashes: dict[str, Hashes] = {}
        wanted = {*VOCABULARY_FILES, *SPECIAL_TOKEN_FILES, TOKENIZER_CONFIG}
        if self.hub:
            assert isinstance(parsed, HubSpec)
            self.hashes = _hub_hashes(parsed, wanted)
            self.source.list_files()  # pins the commit for any read
        else:
            listing = self.source.list_files()
            for name in wanted & set(listing.files):
                self.hashes[name] = _content_hashes(self.read(name))

    def read(self, name: str) -> bytes:
        listed = self.source.stat(name) or self.source.list_files().files.get(name)
        if listed is None:
            raise CkptdiffError(self.source.name_of(name), "is not there")
        if listed.size is not None and listed.size > MAX_TOKENIZER_FILE:
            raise CkptdiffError(self.source.name_of(name), f"is {listed.size} bytes, more than a tokenizer file")
        return self.source.read_range(name, 0, (listed.size or MAX_TOKENIZER_FILE) + 1)


def _content_hashes(data: bytes) -> Hashes:
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324 - git's object id, not security
    return {"git": blob, "sha256": hashlib.sha256(data).hexdigest()}


def _hub_hashes(parsed: HubSpec, wanted: set[str]) -> dict[str, Hashes]:
    """The listing's hashes of these files: an LFS file's sha256, a plain file's git blob id."""
    from huggingface_hub import HfApi

    info = HfApi().model_info(parsed.repo_id, revision=parsed.revision, files_metadata=True)
    prefix = f"{parsed.subfolder.strip('/')}/" if parsed.subfolder else ""
    found: dict[str, Hashes] = {}
    for sibling in info.siblings or []:
        name = sibling.rfilename[len(prefix) :] if sibling.rfilename.startswith(prefix) else None
        if name not in wanted:
            continue
        lfs = getattr(sibling, "lfs", None)
        sha256 = getattr(lfs, "sha256", None) if lfs is not None else None
        found[name] = {"sha256": sha256} if sha256 else {"git": sibling.blob_id} if sibling.blob_id else {}
    return found


def _same(a: Hashes, b: Hashes) -> bool | None:
    """Equal content (True), different (False), or no hash of one kind on both sides (None)."""
    common = set(a) & set(b)
    return all(a[kind] == b[kind] for kind in common) if common else None


def compare_tokenizers(from_base: str, base: str, options: SourceOptions | None = None) -> TokenizerCheck:
    """Whether ``base`` tokenizes as ``from_base`` (the model the drafter was trained for) does."""
    options = options or SourceOptions()
    old, new = _Side(from_base, options), _Side(base, options)
    check = TokenizerCheck(old.source.display, new.source.display)
    how = "Hub hashes" if old.hub and new.hub else "hashes and bytes"
    vocabulary = [n for n in VOCABULARY_FILES if n in old.hashes or n in new.hashes]
    if not vocabulary:
        raise CkptdiffError(
            f"{old.source.display} and {new.source.display}",
            "have no vocabulary files to compare (tokenizer.json, tokenizer.model, tiktoken.model, vocab.json, ...)",
            "give --from-base the repo that holds the drafter's tokenizer, or --allow-tokenizer-change",
        )
    for name in (*vocabulary, *(n for n in SPECIAL_TOKEN_FILES if n in old.hashes or n in new.hashes)):
        _compare_file(name, old, new, check, how)
    if TOKENIZER_CONFIG in old.hashes or TOKENIZER_CONFIG in new.hashes:
        _compare_special_tokens(old, new, check, how)
    return check


def _compare_file(name: str, old: _Side, new: _Side, check: TokenizerCheck, how: str) -> None:
    if name not in old.hashes or name not in new.hashes:
        where = old.source.display if name in old.hashes else new.source.display
        check.differences.append(f"{name} only in {printable_name(where)}")
        return
    same = _same(old.hashes[name], new.hashes[name])
    if same is None:  # one side's hash is LFS, the other's git: compare the bytes
        same = old.read(name) == new.read(name)
    check.compared.append(f"{name} ({how})")
    if not same:
        check.differences.append(f"{name} differs")


def _compare_special_tokens(old: _Side, new: _Side, check: TokenizerCheck, how: str) -> None:
    if TOKENIZER_CONFIG not in old.hashes or TOKENIZER_CONFIG not in new.hashes:
        where = old.source.display if TOKENIZER_CONFIG in old.hashes else new.source.display
        check.differences.append(f"{TOKENIZER_CONFIG} only in {printable_name(where)}")
        return
    if _same(old.hashes[TOKENIZER_CONFIG], new.hashes[TOKENIZER_CONFIG]):
        check.compared.append(f"{TOKENIZER_CONFIG} ({how})")
        return
    tokens = [_special_tokens(side) for side in (old, new)]
    check.compared.append(f"{TOKENIZER_CONFIG}: special tokens (read; chat template not compared)")
    for key in SPECIAL_TOKEN_KEYS:
        if tokens[0].get(key) != tokens[1].get(key):
            check.differences.append(f"{TOKENIZER_CONFIG}: {key} differs")


def _special_tokens(side: _Side) -> dict[str, Any]:
    try:
        data = json.loads(side.read(TOKENIZER_CONFIG))
    except ValueError as err:
        raise CkptdiffError(side.source.name_of(TOKENIZER_CONFIG), f"is not JSON: {err}") from None
    if not isinstance(data, dict):
        raise CkptdiffError(side.source.name_of(TOKENIZER_CONFIG), "is not a JSON object")
    return {key: data.get(key) for key in SPECIAL_TOKEN_KEYS}
