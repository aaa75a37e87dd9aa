"""The JSON report as tests read it: rendered by the json format and validated against docs/report.schema.json."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from ckptdiff.formats import render
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


def json_document(report: Report) -> dict[str, Any]:
    """The report's JSON document, parsed and validated."""
    return validate(json.loads(render(report, "json")))  # type: ignore[no-any-return]
