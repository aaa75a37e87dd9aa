"""Object-store errors (fsspec's OSError family, botocore's, aiohttp's) turned into one line naming the object."""

from __future__ import annotations

import os

from ..errors import DISK_WRITE_ERRNOS, SourceError, display_url, scrub_secrets

#: Where each store looks for credentials, for the "access denied" hint.
CREDENTIAL_HINTS = {
    "s3": "check the credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE) and the bucket's policy",
    "gs": "check the credentials (GOOGLE_APPLICATION_CREDENTIALS or `gcloud auth application-default login`)",
    "az": "check the credentials (AZURE_STORAGE_ACCOUNT_NAME with a key, SAS token or `az login`)",
    "http": "the server refused the request; a signed URL may have expired",
}
_FAMILY = {"gcs": "gs", "abfs": "az", "abfss": "az", "https": "http"}
#: Exception class names (botocore, aiohttp, httpx, google-auth) by what they mean, so none is imported here.
_NO_CREDENTIALS = (
    "NoCredentialsError",
    "PartialCredentialsError",
    "DefaultCredentialsError",
    "CredentialRetrievalError",
)
_UNREACHABLE = (
    "EndpointConnectionError",
    "ConnectTimeoutError",
    "ClientConnectorError",
    "ServerDisconnectedError",
    "ClientOSError",
    "ConnectError",
)
_TIMEOUT = ("ReadTimeoutError", "ServerTimeoutError")
#: A body that ended before its length: the connection broke mid-transfer (aiohttp's, botocore's names).
_BROKEN_OFF = ("ClientPayloadError", "ContentLengthError", "IncompleteReadError", "ResponseStreamingError")
_REFUSED = ("ClientError", "ClientResponseError", "BotoCoreError", "HttpResponseError")


def explain_store_error(err: BaseException, *, where: str, scheme: str) -> SourceError | None:
    """One line for what went wrong reaching an object, or None for an error that is a bug in ckptdiff."""
    family = _FAMILY.get(scheme, scheme)
    if isinstance(err, OSError) and err.filename is not None and err.errno in DISK_WRITE_ERRNOS:
        return None  # a file on this machine (a copy's folder) the disk could not take: the CLI names that file
    answered = _http_answer(err)
    if answered is not None:
        return _explain_status(answered, where, family)
    if isinstance(err, FileNotFoundError):
        cause = connection_failure(err)  # fsspec's http client reports a connection that failed as a missing file
        if cause is not None:
            return explain_store_error(cause, where=where, scheme=scheme)
        if family == "http":  # fsspec's http client raises it for a 404 (and a HEAD and GET that both failed)
            return SourceError(where, "not found (HTTP 404)", "check the URL")
        return SourceError(where, "no such bucket, object or prefix", "check the URL")
    if isinstance(err, PermissionError):
        return SourceError(where, "access denied", CREDENTIAL_HINTS[family])
    name = type(err).__name__
    names = {cls.__name__ for cls in type(err).__mro__}
    if name in _NO_CREDENTIALS:
        return SourceError(where, "no credentials found for the store", CREDENTIAL_HINTS[family])
    if names & set(_UNREACHABLE) or isinstance(err, ConnectionError):
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        endpoint = endpoint if family == "s3" else None
        target = f"the store's endpoint {display_url(endpoint)}" if endpoint else "the store"
        return SourceError(where, f"cannot reach {target}", "check the network and the endpoint URL")
    if names & set(_BROKEN_OFF):
        return SourceError(where, "the connection broke while the store was sending", "check the network, then retry")
    if isinstance(err, TimeoutError) or name in _TIMEOUT:
        return SourceError(where, "the store did not answer in time", "check the network, then retry")
    if isinstance(err, OSError) or names & set(_REFUSED):  # botocore's ParamValidationError: a BotoCoreError
        detail = scrub_secrets(" ".join(str(err).split()))[:200]
        return SourceError(where, f"the store refused the request ({detail})")
    return None


def connection_failure(err: BaseException) -> BaseException | None:
    """The connection error or timeout a FileNotFoundError was raised from, if any."""
    seen = err.__cause__ or err.__context__
    for _ in range(4):
        if seen is None:
            return None
        names = {cls.__name__ for cls in type(seen).__mro__}  # aiohttp's DNS error subclasses its connector error
        if names & {*_UNREACHABLE, *_TIMEOUT} or isinstance(seen, (ConnectionError, TimeoutError)):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def answered_status(err: BaseException) -> int | str | None:
    """The HTTP status other than 404 the server answered (or "redirects"), if the server answered one: the object
    is there but could not be read, which is not the same as absent."""
    return _http_answer(err)


def _http_answer(err: BaseException) -> int | str | None:
    """The HTTP status a web server or S3 answered (aiohttp's error, or the one fsspec wrapped in FileNotFoundError
    after a HEAD and a GET both failed; botocore's under s3fs's OSError), or "redirects" for a redirect loop; None
    if there was no answer."""
    seen: BaseException | None = err
    for _ in range(4):
        if seen is None:
            return None
        if type(seen).__name__ == "TooManyRedirects":
            return "redirects"
        status = getattr(seen, "status", None)
        response = getattr(seen, "response", None)  # botocore's ClientError, which s3fs's OSError was raised from
        if status is None and isinstance(response, dict):  # s3fs words 403 and 404 itself; the rest it leaves bare
            code = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            status = code if isinstance(code, int) and (code >= 500 or code == 429) else None
        if isinstance(status, int) and status >= 400 and status != 404:
            return status
        seen = seen.__cause__ or seen.__context__
    return None


def _explain_status(answered: int | str, where: str, family: str) -> SourceError:
    if answered == "redirects":
        return SourceError(where, "a redirect loop: the server redirected too many times", "check the URL")
    if answered in (401, 403):
        return SourceError(where, f"access denied (HTTP {answered})", CREDENTIAL_HINTS[family])
    if answered == 429:
        return SourceError(where, "rate limited by the server (HTTP 429)", "wait and retry")
    return SourceError(where, f"the server answered HTTP {answered}", "retry later" if int(answered) >= 500 else None)
