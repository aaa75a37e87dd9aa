"""A Hub repo's listing call: its commit and its files with their sizes and LFS sha256s, in one streamed, capped
GET (:class:`.hub.HubSource` makes it to resolve its revision); only the files a checkpoint can use are kept."""

from __future__ import annotations

import re
import time
from typing import Any
from urllib.parse import quote

import msgspec

from ..checkpoint import CONFIG_NAME, WEIGHT_FILE_SUFFIXES
from ..errors import SourceError, display_url
from ..limits import MAX_JSON_BYTES, MIN_BODY_RATE
from .hub_http import MAX_RETRIES, open_get

COMMIT = re.compile(r"^[0-9a-f]{40}$")
#: One file of a listing as the Hub sent it: its path, size and LFS sha256 (checked by the HubSource).
Entry = tuple[Any, Any, Any]


class ListingCall(msgspec.Struct, frozen=True):
    """The listing call of one repo at one revision (None: its default branch), and how messages name them."""

    repo_id: str
    revision: str | None
    #: The repo's API URL on the configured Hub (``HF_ENDPOINT``), without the revision.
    url: str
    #: That Hub as messages show it: an HF_ENDPOINT may carry credentials.
    endpoint: str
    timeout: float

    @classmethod
    def of(cls, repo_id: str, revision: str | None) -> ListingCall:
        """The call as huggingface_hub's configuration (read now) says to make it."""
        from huggingface_hub import constants

        url = f"{constants.ENDPOINT}/api/models/{repo_id}"
        return cls(repo_id, revision, url, display_url(constants.ENDPOINT), float(constants.HF_HUB_DOWNLOAD_TIMEOUT))

    @property
    def where(self) -> str:
        return f"{self.repo_id}@{self.revision}" if self.revision else self.repo_id

    def send(self, headers: dict[str, str]) -> tuple[Any, list[Entry]]:
        """The commit the Hub names and its files."""
        url = self.url + (f"/revision/{quote(self.revision, safe='')}" if self.revision else "")
        deadline = time.monotonic() + (MAX_RETRIES + 1) * self.timeout + MAX_JSON_BYTES / MIN_BODY_RATE
        params = {"blobs": True}
        with open_get(
            url, self.where, headers=headers, params=params, timeout=self.timeout, deadline=deadline
        ) as response:
            body, started = bytearray(), time.monotonic()
            for chunk in response.iter_bytes():  # streamed, so an endless or bloated listing stops at the cap
                body += chunk
                if time.monotonic() > started + self.timeout + len(body) / MIN_BODY_RATE:  # a trickling server
                    raise SourceError(
                        self.where,
                        f"timed out: the Hub at {self.endpoint} sent its file listing slower than "
                        f"{MIN_BODY_RATE // 1024} kB/s",
                        "check the network or raise HF_HUB_DOWNLOAD_TIMEOUT",
                    )
                if len(body) > MAX_JSON_BYTES:
                    raise SourceError(
                        self.where, f"the Hub at {self.endpoint} sent a file listing over {MAX_JSON_BYTES:,} bytes"
                    )
        try:
            info = _INFO.decode(body)
            kept = kept_entries(info.siblings or [])
        except msgspec.DecodeError as err:  # not JSON, or not a model's info
            detail = f"{type(err).__name__}: {err}"
            raise SourceError(
                self.where, f"the Hub at {self.endpoint} sent a model info it cannot read ({detail})"
            ) from None
        return info.sha, kept


class _Lfs(msgspec.Struct):
    sha256: Any = None


class _Sibling(msgspec.Struct):
    """One file of a listing (``?blobs=true``) as decoded: only the fields read, each as sent (checked later)."""

    rfilename: Any
    size: Any = None
    lfs: _Lfs | None = None


class _Info(msgspec.Struct):
    sha: Any = None
    siblings: list[msgspec.Raw] | None = None  # each entry's text, decoded one at a time


#: Decodes a model info into its commit and its entries' texts (views of the body: nothing is copied or built).
_INFO = msgspec.json.Decoder(_Info)
#: Decodes one entry into the few fields a listing needs (the rest is skipped, not built).
_SIBLING = msgspec.json.Decoder(_Sibling)
#: The files a checkpoint is read from, and the formats named when a folder holds no weights ckptdiff reads.
_KEPT_SUFFIXES = (*WEIGHT_FILE_SUFFIXES, ".ckpt", ".gguf", ".h5", ".msgpack", ".onnx", ".npz", ".pkl")
#: Other files kept, in the Hub's order, so that a folder without weights can still be described by what it holds.
MOST_OTHER_FILES = 64


def kept_entries(siblings: list[msgspec.Raw]) -> list[Entry]:
    """The entries a checkpoint can use: weight files, indexes, config.json (at any depth: a subfolder may be the
    checkpoint), other weight formats, and the first :data:`MOST_OTHER_FILES` of the rest. A repo listing 400,000
    images keeps its few model files, not 400,000 entries. An entry whose name is not text is kept, to be refused
    as malformed."""
    kept: list[Entry] = []
    others = 0
    for raw in siblings:
        sibling = _SIBLING.decode(raw)
        name = sibling.rfilename
        if isinstance(name, str) and not (name.endswith(_KEPT_SUFFIXES) or name.rpartition("/")[2] == CONFIG_NAME):
            others += 1
            if others > MOST_OTHER_FILES:
                continue
        lfs = sibling.lfs
        kept.append((name, sibling.size, lfs.sha256 if lfs is not None else None))
    return kept
