"""The JSON report as tests read it: rendered by the json format and validated against docs/report.schema.json."""

from __future__ import annotations

import json
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from ckptdiff.formats import RenderOptions, render
from ckptdiff.report import Report

SCHEMA_FILE = Path(__file__).resolve().parent.parent / "docs" / "report.schema.json"


@cache
def validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def validate(document: Any) -> Any:
    """``document`` after checking it against the published schema (every JSON report the suite reads)."""
    validator().validate(document)
    return document


@lru_cache(maxsize=4)  # the repeats come one after another; a report text can be megabytes
def validate_text(text: str) -> None:
    """Validates the JSON report ``text``: once per text, as the same text passes here more than once (rendered,
    then printed; the same report written to a file and to stdout). A text that fails fails each time it comes."""
    validate(json.loads(text))


def validate_if_report(text: str) -> None:
    """Validates ``text`` when it is a JSON report (a CLI's stdout, a file it wrote)."""
    if text.startswith('{\n  "schema": "ckptdiff/report/v1"'):
        validate_text(text)


@pytest.fixture(autouse=True)
def _every_json_report_follows_the_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each report the json format renders in a test is validated as it is rendered."""
    from ckptdiff.formats import json as json_format

    render_json = json_format.render

    def render_and_validate(report: Report, options: RenderOptions) -> str:
        text = render_json(report, options)
        validate_text(text)
        return text

    monkeypatch.setattr(json_format, "render", render_and_validate)


def json_document(report: Report) -> dict[str, Any]:
    """The report's JSON document, parsed and validated."""
    text = render(report, "json")
    validate_text(text)
    return json.loads(text)  # type: ignore[no-any-return]
