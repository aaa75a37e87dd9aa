"""One error type for every defect a user can cause: the CLI prints it as one line and exits 2."""

from __future__ import annotations

import errno
import os
import re
import sys
import threading
import unicodedata
from collections import Counter, OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

#: Longer error lines are cut in the middle (the file at the start and the hint at the end are kept).
MAX_LINE_CHARS = 2000


class CkptdiffError(Exception):
    """A problem with an input (a file, a repo, a flag) rather than a bug in ckptdiff.

    ``where`` names the thing at fault (a file path, ``org/name@rev:file``, a flag);
    ``defect`` says what is wrong with it, and ``hint`` what the user can do.
    """

    def __init__(self, where: str | None, defect: str, hint: str | None = None) -> None:
        self.where = where
        self.defect = defect
        self.hint = hint
        super().__init__(self.line())

    def line(self) -> str:
        # ``where`` names a file, a repo or a flag: written as names are, so it reads as it does in a report
        text = f"{printable_name(self.where)}: {self.defect}" if self.where else self.defect
        if self.hint:
            text += f" ({self.hint})"
        # one line, whatever a hostile file name or server message contains; control characters shown escaped
        if len(text) > MAX_LINE_CHARS:  # a 50 MB dtype string is not a clear line: keep its start and its end
            keep = MAX_LINE_CHARS // 2
            text = f"{text[:keep]} …[{len(text) - 2 * keep} characters]… {text[-keep:]}"
        return printable(" ".join(text.split()))


def closest(word: str, known: Iterable[str]) -> str | None:
    """The known word ``word`` is most likely a typo of (``alow-missing`` → ``allow-missing``), for a "did you
    mean …?"; None when none is close."""
    import difflib

    found = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return found[0] if found else None


def printable(text: str) -> str:
    """Escape what a terminal or markdown viewer would act on (ANSI escapes, newlines, bidi overrides) in text
    that comes from a checkpoint or a server: a name must not repaint the screen or forge a line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def printable_name(text: str) -> str:
    """A tensor name or config key as the table and markdown show it: escaped as :func:`printable` escapes text,
    and a backslash shown doubled, so that ``\\t`` is always a tab and ``\\\\t`` a backslash and a ``t``."""
    return printable(text.replace("\\", "\\\\"))


def quoted_name(text: object) -> str:
    """A name quoted in a sentence or an error line, written as the tables write it: ``'x\\\\tTab.weight'``;
    something that is no string where a name belongs (a malformed index's shard path) as Python writes it."""
    return f"'{printable_name(text)}'" if isinstance(text, str) else printable(repr(text))


#: How each output keeps a ``:`` or ``[`` from forming a workflow command without changing what it says: plain text
#: shows the character escaped (as :func:`printable` shows control characters), JSON and XML by their own escapes.
_INERT_CHARACTERS = {
    "text": {":": "\\x3a", "[": "\\x5b"},
    "json": {":": "\\u003a", "[": "\\u005b"},
    "xml": {":": "&#58;", "[": "&#91;"},
}
#: Characters the runner's line reader may skip or its culture-aware comparison may ignore (spaces, marks, format
#: and control characters): a command is looked for past them.
_IGNORED_CATEGORIES = frozenset(("Mn", "Me", "Cf", "Cc", "Cn", "Co", "Cs", "Zs", "Zl", "Zp"))


def _ignored(character: str) -> bool:
    return character.isspace() or unicodedata.category(character) in _IGNORED_CATEGORIES


def inert_in_ci_log(text: str, style: str = "text") -> str:
    """Text bound for a CI job's log (stdout, stderr) with nothing GitHub's runner would act on as a workflow
    command: a line that starts with ``::`` once leading spaces are trimmed (``::add-mask::…``,
    ``::stop-commands::…``), or ``##[`` anywhere in a line (the runner's legacy form, ``##[error]…``). Their
    ``:`` or ``[`` is escaped in ``style`` (``text``, ``json`` or ``xml``); ckptdiff's own annotations are written
    apart from this text. Lines are split wherever the runner or any reader might split them."""
    inert = _INERT_CHARACTERS[style]
    return "".join(_inert_line(line, inert) for line in text.splitlines(keepends=True))


def _inert_line(line: str, inert: dict[str, str]) -> str:
    return _escaped_at(line, inert_marks(line), inert)


def inert_at(text: str, marks: Iterable[int], style: str = "text") -> str:
    """``text`` with the characters at ``marks`` (from :func:`inert_marks`) escaped as :func:`inert_in_ci_log`
    escapes them."""
    return _escaped_at(text, marks, _INERT_CHARACTERS[style])


def _escaped_at(text: str, marks: Iterable[int], inert: dict[str, str]) -> str:
    for position in sorted(marks, reverse=True):
        text = text[:position] + inert[text[position]] + text[position + 1 :]
    return text


#: ckptdiff's own colour codes (SGR): an escape character in a line is always one of them, since text from a
#: checkpoint or a server reaches the output through :func:`printable`, which shows an escape character escaped.
_COLOR_CODE = re.compile(r"\x1b\[[0-9;]*m")


def inert_marks(line: str) -> list[int]:
    """Where in one line :func:`inert_in_ci_log` escapes a character (a ``:`` or a ``[``), in ascending order; a
    layout that must know its lines' final widths (the table's columns) escapes them itself. The guard reads the
    text as the log shows it, past ckptdiff's own colour codes, and never escapes one of theirs."""
    if "\x1b" not in line:
        return _text_marks(line)
    # the marks of the text without its colour codes, moved back to where each character is in the line
    codes = [(0, 0), *(code.span() for code in _COLOR_CODE.finditer(line)), (len(line), len(line))]
    positions = [at for (_, start), (end, _) in zip(codes, codes[1:]) for at in range(start, end)]
    return [positions[mark] for mark in _text_marks(_COLOR_CODE.sub("", line))]


def _text_marks(line: str) -> list[int]:
    marks: list[int] = []
    first = line.lstrip()[:1]
    if not (first.isascii() and first.isprintable() and first != ":"):  # else the line starts plainly
        start = _next_shown(line, 0)
        if line.startswith(":", start) and line.startswith(":", _next_shown(line, start + 1)):
            marks.append(start)
    at = line.find("[") if "#" in line else -1
    while at >= 0:
        first_before = _previous_shown(line, at - 1)
        second_before = _previous_shown(line, first_before - 1) if first_before >= 0 else -1
        if second_before >= 0 and line[first_before] == line[second_before] == "#":
            marks.append(at)
        at = line.find("[", at + 1)
    return sorted(marks)


def _next_shown(line: str, at: int) -> int:
    while at < len(line) and _ignored(line[at]):
        at += 1
    return at


def _previous_shown(line: str, at: int) -> int:
    """The last character at or before ``at`` that is not ignored; -1 when there is none."""
    while at >= 0 and _ignored(line[at]):
        at -= 1
    return at


class HeaderError(CkptdiffError):
    """A safetensors header breaks the format's rules."""


class IndexError_(CkptdiffError):
    """A sharded checkpoint's index is broken or disagrees with its shards."""


class SourceError(CkptdiffError):
    """A checkpoint cannot be found or read (missing path, repo, revision, network)."""


class ReportWriteError(CkptdiffError):
    """The report could not be written where the user asked."""


class DiskWriteError(CkptdiffError):
    """A file ckptdiff writes on this machine (a download, a scratch copy) could not be written: a full disk, a
    quota, a file-size limit, a read-only mount. Raised with ``where`` None where the writer knows only a file
    descriptor; the code that named the file fills it in (:meth:`at`)."""

    def at(self, where: str, hint: str | None = None) -> DiskWriteError:
        return DiskWriteError(where, self.defect, hint or self.hint)


#: What a write fails with when the trouble is the disk it writes to, not the data or a bug.
DISK_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO})


def disk_write_error(err: OSError, where: str | None = None, hint: str | None = None) -> DiskWriteError:
    """One line for an OSError a write on this machine raised: the system's reason, never a traceback."""
    return DiskWriteError(where, f"cannot be written: {err.strerror or err}", hint)


def write_failure(err: OSError) -> str:
    """Why a write failed, in the system's words; a file size limit (EFBIG: ``ulimit -f``, or the largest file
    the file system holds) said as such, since "File too large" alone reads as the data's fault."""
    reason = err.strerror or str(err)
    if err.errno == errno.EFBIG:
        reason += " (the file size limit was reached: ulimit -f, or the file system's largest file)"
    return reason


_TOKEN_PATTERN = re.compile(r"hf_[A-Za-z0-9]{8,}")
_HF_TOKEN_VARIABLES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_TOKEN")
#: Object stores' standard credential variables (an access key id is not secret, but it names an account).
_STORE_SECRET_VARIABLES = (
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_CONNECTION_STRING",
    "AZURE_CLIENT_SECRET",
    "GOOGLE_OAUTH_ACCESS_TOKEN",
)
#: Signatures, keys and tokens that travel inside URLs (presigned S3, Azure SAS, GCS signed URLs, OAuth tokens in a
#: query string or a fragment): any parameter whose name says token, key, secret, password, signature or credential.
_URL_SECRETS = re.compile(
    r"(?i)([?&#;](?:[\w.-]*(?:token|key|secret|passw(?:or)?d|pwd|signature|credential|auth)[\w.-]*|sig|code)=)"
    r"[^&#\s\"']+"
)
#: ``user:password@``, ``:password@`` and ``token@`` in a URL's authority, and a ``user:password@`` whose password
#: holds a ``/`` (:func:`split_userinfo`): after the ``:`` comes no port number, and the ``@`` is further on.
_URL_USERINFO = re.compile(
    r"(?i)\b([a-z][a-z0-9+.-]*://)(?:[^/@\s\"']+@|[^/@\s\"':\[]*:(?![0-9]*(?:[/?#\s\"']|$))[^@\s\"']*@)"
)


def split_userinfo(rest: str) -> tuple[str, str]:
    """A URL after its ``scheme://`` as (its ``user:password``, the rest from the host on); ``("", rest)`` without
    credentials. RFC 3986 ends the authority at the first ``/``, but a secret pasted into a URL unencoded may hold
    one (AWS secret keys and Azure account keys often do): an authority with a ``:`` followed by no port number and
    an ``@`` further on is credentials up to that ``@``, so that such a key is never printed as a host or a path."""
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if "@" in authority:  # everything up to the authority's last '@' is credentials
        at = authority.rindex("@")
        return rest[:at], rest[at + 1 :]
    port = authority.rpartition(":")[2]
    if ":" in authority and not port.isdigit() and not authority.startswith("[") and "@" in rest:
        at = rest.index("@")
        return rest[:at], rest[at + 1 :]
    return "", rest


def display_url(url: str, hash_in_path: bool = False) -> str:
    """A URL as reports may print it: no ``user:password@``, no query string, no fragment (where signatures and
    tokens travel). ``hash_in_path``: a ``#`` is part of the path (an S3 key's), not a fragment."""
    scheme, separator, rest = url.partition("://")
    if not separator:
        return url
    authority, slash, path = split_userinfo(rest)[1].partition("/")
    host = re.split(r"[?#]", authority, maxsplit=1)[0]
    if host != authority:
        slash, path = "", ""
    return f"{scheme}://{host}{slash}{re.split(r'[?]' if hash_in_path else r'[?#]', path, maxsplit=1)[0]}"


def hf_token_beyond_environment() -> bool:
    """Whether huggingface_hub's ``get_token`` may find a token outside HF_TOKEN: its token file (``hf auth login``),
    an OIDC exchange (HF_OIDC_RESOURCE) or Colab's secrets. Only then is its auth module worth loading (it loads
    PyYAML and filelock)."""
    from huggingface_hub import constants

    return bool(
        os.environ.get("HF_OIDC_RESOURCE") or os.path.exists(constants.HF_TOKEN_PATH) or "google.colab" in sys.modules
    )


#: Endpoints read from the environment, whose ``user:password@`` or ``token@`` would be a secret.
_ENDPOINT_VARIABLES = ("HF_ENDPOINT", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "DASK_SCHEDULER_ADDRESS")
#: The credentials this process was given inside URLs (a spec's, an ``--scheduler`` address's): a library may
#: quote them anywhere in a message, without the URL around them (botocore: ``Invalid bucket name
#: "KEY:SECRET@bucket"``), so they are scrubbed as strings. The most recent :data:`MOST_URL_CREDENTIALS` forms are
#: kept, one given again moving to the end: a long-lived process (a notebook calling ``compare()`` with a new token
#: each hour) does not grow without bound, and a hostile listing or index cannot either. A command line's are
#: pinned apart for as long as its run lasts (:func:`url_credentials_pinned`), however many it holds: among the
#: most recent alone, the first of ~40 credentialed URLs fell out and could be printed.
_URL_CREDENTIALS: OrderedDict[str, None] = OrderedDict()
_URL_CREDENTIALS_LOCK = threading.Lock()
MOST_URL_CREDENTIALS = 256
#: The pinned forms, counted by the runs that pinned them (runs in threads of one process each unpin their own).
_PINNED_URL_CREDENTIALS: Counter[str] = Counter()
_URL_SCHEME = re.compile(r"(?i)[a-z][a-z0-9+.-]*://")
_NOT_SPACE = re.compile(r"\S*")


def url_credentials(text: str) -> list[str]:
    """The secrets in the ``user:password@``/``token@`` of every URL in ``text``: the password (or the token) and
    a user name long enough to be an access key, as typed and percent-decoded."""
    from urllib.parse import unquote

    found = []
    for scheme in _URL_SCHEME.finditer(text):  # each URL, one run on from another without a space too
        url = _NOT_SPACE.match(text, scheme.end())
        userinfo = split_userinfo(url.group() if url else "")[0]
        if not userinfo:
            continue
        user, colon, password = userinfo.partition(":")
        parts = [userinfo, password] if colon else [user]  # the longest first: each is replaced in turn
        parts += [user] if colon and len(user) >= 8 else []  # an access key id; "user" or "admin" is no secret
        found += [form for part in parts for form in {part, unquote(part)} if len(form) >= 4]
    return found


def remember_url_credentials(text: str) -> None:
    """Scrub the credentials of every URL in ``text`` from all later output (:func:`scrub_secrets`)."""
    found = url_credentials(text)
    with _URL_CREDENTIALS_LOCK:
        for form in found:
            _URL_CREDENTIALS[form] = None
            _URL_CREDENTIALS.move_to_end(form)
        while len(_URL_CREDENTIALS) > MOST_URL_CREDENTIALS:
            _URL_CREDENTIALS.popitem(last=False)


@contextmanager
def url_credentials_pinned(text: str) -> Iterator[None]:
    """Scrub the credentials of every URL in ``text`` (a command line) from all output while the block runs,
    never forgotten for newer ones meanwhile. Bounded by ``text``, which the system's argument limit bounds, and
    let go at the end of the run."""
    found = set(url_credentials(text))
    with _URL_CREDENTIALS_LOCK:
        _PINNED_URL_CREDENTIALS.update(found)
    try:
        yield
    finally:
        with _URL_CREDENTIALS_LOCK:
            _PINNED_URL_CREDENTIALS.subtract(found)
            for form in found:
                if _PINNED_URL_CREDENTIALS[form] <= 0:
                    del _PINNED_URL_CREDENTIALS[form]


def scrub_secrets(text: str) -> str:
    """Remove tokens and keys from anything we print, even one a server reflected into a message."""
    tokens: list[str | None] = [os.environ.get(variable) for variable in _HF_TOKEN_VARIABLES]
    for variable in _ENDPOINT_VARIABLES:  # http://token@host or http://user:password@host
        tokens += url_credentials(os.environ.get(variable, ""))
    with _URL_CREDENTIALS_LOCK:  # a copy: another thread may be remembering a spec's meanwhile
        remembered = list(_URL_CREDENTIALS.keys() | _PINNED_URL_CREDENTIALS.keys())
    remembered.sort(key=len, reverse=True)  # user:password before its parts
    tokens += remembered
    if "huggingface_hub" in sys.modules and hf_token_beyond_environment():  # a stored login, in no hf_ shape
        from huggingface_hub import get_token

        tokens.append(get_token())
    for token in tokens:
        if token and len(token) >= 4:  # as given, and as an error line writes it (a file or repo name's escapes)
            text = text.replace(token, "***").replace(printable_name(token), "***")
    for variable in _STORE_SECRET_VARIABLES:  # real keys are long; a short one ("test", LocalStack's) is no secret
        value = os.environ.get(variable)
        if value and len(value) >= 8:
            text = text.replace(value, "***")
    text = _URL_USERINFO.sub(r"\1***@", _URL_SECRETS.sub(r"\1***", text))
    return _TOKEN_PATTERN.sub("hf_***", text)
