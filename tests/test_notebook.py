"""`ckptdiff.compare()` in a notebook: what IPython's display machinery makes of the Result (a short repr, the
markdown and HTML reports), ``to_dict()`` equal to the JSON report, and each finding's words in its message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from browser import body_data, dump_dom

import ckptdiff
from ckptdiff import Report, render
from fixtures.generate import HERE as FIXTURES

PUBLISHED = str(FIXTURES / "kimi-k2-eagle3-published")
TWO_AUX = str(FIXTURES / "kimi-k25-eagle3-two-aux")


@pytest.fixture(scope="module")
def result() -> ckptdiff.Result:
    return ckptdiff.compare(PUBLISHED, TWO_AUX, engines=["vllm"])


def test_the_repr_is_one_short_line_naming_what_fails(result: ckptdiff.Result) -> None:
    text = repr(result)
    assert "\n" not in text and len(text) < 300
    assert text.startswith(f"<ckptdiff incompatible: {PUBLISHED} vs {TWO_AUX}; 14 match, 1 injected, 1 shape_mismatch;")
    assert "failing: fc.weight shape_mismatch, vllm B aux_count_mismatch, vllm B aux_ids_default>" in text
    assert isinstance(result, Report) and result.exit_code == 1  # still the report, every field and property


def test_the_repr_counts_an_engine_event_met_again(tmp_path: Path) -> None:
    """As the verdict line does: "vllm A random_init ×2", not the same words twice."""
    fp8 = ckptdiff.compare(str(FIXTURES / "drafters" / "fp8-qwen3-8b"), engines=["vllm"])
    assert repr(fp8).endswith("; failing: vllm A random_init ×2>")
    assert fp8.failing() == ["vllm A random_init", "vllm A random_init"]  # the list keeps one entry per event


def test_ipython_displays_markdown_and_html(result: ckptdiff.Result, tmp_path: Path) -> None:
    formatters = pytest.importorskip("IPython.core.formatters")
    shown, _ = formatters.DisplayFormatter().format(result)
    assert shown["text/plain"] == repr(result)
    assert shown["text/markdown"] == render(result, "markdown")
    html = shown["text/html"]
    assert html.startswith('<iframe srcdoc="') and "<script" not in html  # the page is inside the attribute
    # the frame shows the report: its verdict and table, as a notebook would
    page = tmp_path / "notebook.html"
    page.write_text(
        f"""<!doctype html><html><body>{html}<script>
        const frame = document.querySelector("iframe");
        frame.addEventListener("load", () => {{
          const inner = frame.contentDocument;
          document.body.dataset.verdict = inner.querySelector("#verdict h1").textContent;
          document.body.dataset.rows = inner.querySelectorAll("#tensors tr.row").length;
        }});
        </script></body></html>""",
        encoding="utf-8",
    )
    seen = body_data(dump_dom(page))
    assert seen == {"verdict": "ckptdiff: incompatible", "rows": "16"}


def _frame_heights(html: str, tmp_path: Path, name: str) -> dict[str, int]:
    """The notebook frame's height and its report's, as loaded and once the "match" rows are hidden, in a window
    1600 px tall, and 80 % of the window's height (``room``)."""
    page = tmp_path / f"{name}.html"
    page.write_text(
        f"""<!doctype html><html><body style="margin: 0"><div style="width: 900px">{html}</div><script>
        const frame = document.querySelector("iframe");
        const later = (then) => setTimeout(then, 100);
        const measure = (key) => {{
          document.body.dataset.room = Math.round(0.8 * window.innerHeight);
          document.body.dataset[key + "Frame"] = frame.getBoundingClientRect().height;
          document.body.dataset[key + "Report"] = Math.ceil(frame.contentDocument.body.getBoundingClientRect().height);
        }};
        frame.addEventListener("load", () => later(() => {{
          measure("loaded");
          const box = frame.contentDocument.querySelector("input[value=match]");
          box.checked = false;
          box.dispatchEvent(new Event("input", {{ bubbles: true }}));  // as a click on it does
          later(() => measure("filtered"));
        }}));
        </script></body></html>""",
        encoding="utf-8",
    )
    return {key: int(float(value)) for key, value in body_data(dump_dom(page, height=1600)).items()}


def test_the_notebook_frame_fits_the_report(result: ckptdiff.Result, tmp_path: Path) -> None:
    from fixtures.generate import write_safetensors

    write_safetensors(tmp_path / "a.safetensors", [("w", "F32", [2]), ("v", "F32", [2])])
    write_safetensors(tmp_path / "b.safetensors", [("w", "F32", [2]), ("v", "F32", [3])])
    small = ckptdiff.compare(tmp_path / "a.safetensors", tmp_path / "b.safetensors")
    seen = _frame_heights(small._repr_html_(), tmp_path, "small")
    # as tall as the report (and its 1 px borders): no empty space under it, no scrolling inside
    assert seen["loadedFrame"] == seen["loadedReport"] + 2 < seen["room"]
    # the match row hidden: the frame follows the report
    assert seen["filteredFrame"] == seen["filteredReport"] + 2 < seen["loadedFrame"]
    # a report taller than most of the window scrolls inside a frame of 80 % of the window's height
    seen = _frame_heights(result._repr_html_(), tmp_path, "tall")
    assert seen["loadedFrame"] == seen["room"] + 2 < seen["loadedReport"]


def test_to_dict_is_the_json_report(result: ckptdiff.Result) -> None:
    data = result.to_dict()
    assert data == json.loads(render(result, "json"))
    assert json.loads(json.dumps(data)) == data


def test_each_finding_carries_its_words(result: ckptdiff.Result) -> None:
    messages = {finding.code: finding.message for finding in result.findings}
    assert messages["aux_layer_ids_differ"] == (
        "eagle_config.eagle_aux_hidden_state_layer_ids differs: A [2, 30, 58], B [2, 30]"
    )
    assert all(messages.values())
    as_json = {f["code"]: f["message"] for f in result.to_dict()["findings"]}
    assert as_json == messages
