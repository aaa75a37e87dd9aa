"""A Hub repo's listing call: its commit and every file with its size and LFS sha256, in one streamed, capped GET
(:class:`.hub.HubSource` makes it to resolve its revision)."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from ..errors import SourceError, display_url
from ..limits import MAX_JSON_BYTES, MIN_BODY_RATE
from .hub_http import MAX_RETRIES, open_get

COMMIT = re.compile(r"^[0-9a-f]{40}$")
#: One file of a listing as the Hub sent it: its path, size and LFS sha256 (checked by the HubSource).
Entry = tuple[Any, Any, Any]


@dataclass(frozen=True)
class ListingCall:
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
            info = json.loads(body)
            siblings = info.get("siblings") or []
            return info.get("sha"), [_entry(sibling) for sibling in siblings]
        except (AttributeError, KeyError, TypeError, ValueError) as err:  # not JSON, or not a model's info
            detail = f"{type(err).__name__}: {err}"
            raise SourceError(
                self.where, f"the Hub at {self.endpoint} sent a model info it cannot read ({detail})"
            ) from None


def _entry(sibling: dict[str, Any]) -> Entry:
    """One entry of the listing (``?blobs=true``): its path, size and, for an LFS file, its sha256."""
    lfs = sibling.get("lfs")
    return sibling["rfilename"], sibling.get("size"), lfs["sha256"] if lfs is not None else None
