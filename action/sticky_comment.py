"""The GitHub Action's sticky PR comment: post the report as one comment, or update the one posted before.

Run by action.yml with only the standard library (it needs nothing of ckptdiff): the comment is found by a
marker on its first line, so each run replaces its own comment instead of adding one. The REST API is the one the
runner names (GITHUB_API_URL: github.com's or a GitHub Enterprise Server's), with the job's token.

Exit status: 0 posted or updated; 3 the token may not write to the pull request (a pull request from a fork gets a
read-only token; or the workflow grants no ``pull-requests: write``); 2 anything else. One line says which.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from typing import Any

NOT_PERMITTED = 3
TROUBLE = 2
#: Comments read per page while looking for the one posted before (the API's largest page).
PAGE = 100


class Refused(Exception):
    """The API said no: its HTTP status and message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


def call(method: str, url: str, token: str, payload: dict[str, Any] | None = None) -> Any:
    data = json.dumps(payload).encode() if payload is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Accept", "application/vnd.github+json")
    request.add_header("X-GitHub-Api-Version", "2022-11-28")
    request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as err:
        try:
            message = json.loads(err.read()).get("message", err.reason)
        except (ValueError, AttributeError):
            message = err.reason
        raise Refused(err.code, str(message)) from None


def find(api: str, repo: str, number: int, token: str, marker: str) -> dict[str, Any] | None:
    """The first comment on the pull request whose body starts with ``marker``."""
    page = 1
    while True:
        comments = call("GET", f"{api}/repos/{repo}/issues/{number}/comments?per_page={PAGE}&page={page}", token)
        for comment in comments:
            if str(comment.get("body", "")).startswith(marker):
                return dict(comment)
        if len(comments) < PAGE:
            return None
        page += 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--body", required=True, help="the markdown file to post")
    parser.add_argument("--marker", required=True, help="the comment's first line, which finds it again")
    parser.add_argument("--pull-request", type=int, required=True)
    args = parser.parse_args(argv)
    api = os.environ.get("GITHUB_API_URL", "https://api.github.com").rstrip("/")
    repo, token = os.environ.get("GITHUB_REPOSITORY", ""), os.environ.get("CKPTDIFF_TOKEN", "")
    if not repo or not token:
        print("ckptdiff action: comment: no GITHUB_REPOSITORY or token", file=sys.stderr)
        return TROUBLE
    with open(args.body, encoding="utf-8") as handle:
        body = f"{args.marker}\n{handle.read()}"
    try:
        found = find(api, repo, args.pull_request, token, args.marker)
        if found is None:
            made = call("POST", f"{api}/repos/{repo}/issues/{args.pull_request}/comments", token, {"body": body})
            print(f"ckptdiff action: comment posted: {made.get('html_url', '')}")
        else:
            made = call("PATCH", f"{api}/repos/{repo}/issues/comments/{found['id']}", token, {"body": body})
            print(f"ckptdiff action: comment updated: {made.get('html_url', '')}")
    except Refused as err:
        permitted = err.status not in (401, 403, 404)
        print(f"ckptdiff action: comment: {err}", file=sys.stderr)
        return TROUBLE if permitted else NOT_PERMITTED
    except (OSError, ValueError) as err:
        print(f"ckptdiff action: comment: {err}", file=sys.stderr)
        return TROUBLE
    return 0


if __name__ == "__main__":
    sys.exit(main())
