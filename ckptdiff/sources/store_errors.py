"""Object-store errors (fsspec's OSError family, botocore's, aiohttp's) turned into one line naming the object."""

from __future__ import annotations

import os

from ..errors import SourceError, scrub_secrets

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
_REFUSED = ("ClientError", "ClientResponseError", "BotoCoreError", "HttpResponseError")


def explain_store_error(err: BaseException, *, where: str, scheme: str) -> SourceError | None:
    """One line for what went wrong reaching an object, or None for an error that is a bug in ckptdiff."""
    family = _FAMILY.get(scheme, scheme)
    if isinstance(err, FileNotFoundError):
        return SourceError(where, "no such bucket, object or prefix", "check the URL")
    if isinstance(err, PermissionError):
        return SourceError(where, "access denied", CREDENTIAL_HINTS[family])
    name = type(err).__name__
    if name in _NO_CREDENTIALS:
        return SourceError(where, "no credentials found for the store", CREDENTIAL_HINTS[family])
    if name in _UNREACHABLE or isinstance(err, ConnectionError):
        endpoint = os.environ.get("AWS_ENDPOINT_URL") if family == "s3" else None
        target = f"the store's endpoint {endpoint}" if endpoint else "the store"
        return SourceError(where, f"cannot reach {target}", "check the network and the endpoint URL")
    if isinstance(err, TimeoutError) or name in _TIMEOUT:
        return SourceError(where, "the store did not answer in time", "check the network, then retry")
    if isinstance(err, OSError) or name in _REFUSED:
        detail = scrub_secrets(" ".join(str(err).split()))[:200]
        return SourceError(where, f"the store refused the request ({detail})")
    return None
