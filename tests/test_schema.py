"""docs/report.schema.json is generated from the report's types, and the documented examples follow it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from report_json import SCHEMA_FILE, validate

from ckptdiff.formats.document import schema

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_the_committed_schema_is_the_generated_one() -> None:
    # regenerate: python -c "import json; from ckptdiff.formats.document import schema; \
    #   open('docs/report.schema.json', 'w').write(json.dumps(schema(), indent=2) + '\n')"
    assert json.loads(SCHEMA_FILE.read_text(encoding="utf-8")) == schema()


def test_every_whole_report_in_the_docs_follows_the_schema() -> None:
    examples = [
        json.loads(block)
        for page in sorted(DOCS.glob("*.md"))
        for block in re.findall(r"```json\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
        if block.lstrip().startswith('{\n  "schema": "ckptdiff/report/v1"')
    ]
    assert examples  # docs/json-schema.md has one
    for example in examples:
        validate(example)
