"""Hub and network errors (huggingface_hub's classes, httpx2's) turned into one line naming the repo and a fix."""

from __future__ import annotations

from ..errors import SourceError, scrub_secrets

LOGIN_HINT = "set HF_TOKEN or run `hf auth login`"
OFFLINE_HINT = "run once without --offline/HF_HUB_OFFLINE=1 to fill the cache"


def explain_hub_error(err: BaseException, *, where: str, endpoint: str, revision: str | None) -> SourceError | None:
    """Turn a huggingface_hub / network error into one line naming the repo and what to do."""
    import httpx2
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    if isinstance(err, GatedRepoError):
        return SourceError(
            where,
            "gated repo: this account has no access to its files",
            f"accept its conditions on the repo's Hub page, then {LOGIN_HINT}",
        )
    if isinstance(err, RevisionNotFoundError):
        asked = repr(revision) if revision else "the default branch"
        return SourceError(where, f"revision {asked} not found", "check the branch, tag or commit")
    if isinstance(err, RepositoryNotFoundError):
        return SourceError(where, f"repo not found on {endpoint}", f"check the name; if it is private, {LOGIN_HINT}")
    if isinstance(err, RemoteEntryNotFoundError):
        return SourceError(where, "a file the Hub listed could not be downloaded (entry not found)", "retry")
    if isinstance(err, (OfflineModeIsEnabled, LocalEntryNotFoundError)):
        return SourceError(where, "not in the local cache and offline mode is on", OFFLINE_HINT)
    if isinstance(err, HfHubHTTPError):
        status = err.response.status_code if getattr(err, "response", None) is not None else None
        if status in (401, 403):
            return SourceError(where, f"access denied (HTTP {status})", f"{LOGIN_HINT} with a token that can read it")
        if status == 429:
            return SourceError(where, "rate limited by the Hub (HTTP 429)", f"wait and retry, or {LOGIN_HINT}")
        if status is not None and status >= 500:
            return SourceError(where, f"the Hub answered HTTP {status}", "retry later")
        return SourceError(where, f"the Hub answered HTTP {status}", scrub_secrets(str(err).splitlines()[0]))
    if isinstance(err, httpx2.TimeoutException):
        return SourceError(
            where,
            f"timed out talking to {endpoint}",
            "check the network or raise HF_HUB_DOWNLOAD_TIMEOUT; --offline reads only the cache",
        )
    if isinstance(err, httpx2.TooManyRedirects):
        return SourceError(where, f"too many redirects from {endpoint}", "a redirect loop; check HF_ENDPOINT")
    if isinstance(err, (httpx2.ReadError, httpx2.RemoteProtocolError)):
        return SourceError(where, f"the connection to {endpoint} broke off mid-transfer", "retry later")
    elsewhere = _redirect_target(err, endpoint)
    if isinstance(err, httpx2.UnsupportedProtocol) and elsewhere is not None:
        scheme = elsewhere.partition(":")[0]
        return SourceError(
            where, f"{endpoint} redirected to a URL ckptdiff does not follow ({scheme}:)", "check HF_ENDPOINT"
        )
    if isinstance(err, (httpx2.TransportError, ConnectionError)) and elsewhere is not None:
        # the Hub answered; the host it sent the download to did not (a firewall allowing the Hub, not its CDN)
        return SourceError(
            where,
            f"cannot reach {elsewhere}, where {endpoint} redirected the download",
            "check the network, a firewall or proxy may block that host; --offline reads only the cache",
        )
    if isinstance(err, (httpx2.TransportError, ConnectionError)):
        return SourceError(
            where,
            f"cannot reach {endpoint}",
            "check the network or HF_ENDPOINT; --offline reads only the cache",
        )
    return None


def _redirect_target(err: BaseException, endpoint: str) -> str | None:
    """The scheme, host and port a failed request went to, when that is not the Hub's own (a redirect's
    target); None otherwise. Only those parts: a URL's path may hold a signature, its userinfo a password."""
    from urllib.parse import urlsplit

    try:
        url = str(err.request.url)  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):  # httpx raises RuntimeError for an error without its request
        return None
    try:
        target, hub = urlsplit(url), urlsplit(endpoint)
        place = f"{target.scheme}://{target.hostname or ''}" + (f":{target.port}" if target.port else "")
    except ValueError:  # a port out of range
        return None
    if not target.scheme or not target.hostname:  # no place to name (a relative URL)
        return None
    default_ports = {"http": 80, "https": 443}  # https://huggingface.co and https://huggingface.co:443 are one
    if (target.scheme, target.hostname, target.port or default_ports.get(target.scheme)) == (
        hub.scheme,
        hub.hostname,
        hub.port or default_ports.get(hub.scheme),
    ):
        return None
    return scrub_secrets(place)
