"""`--format html`: one self-contained file, loaded in headless Chromium with every host unreachable — the verdict
on screen, the table filtered by its own script, pattern rows that expand into exactly their names, and with
--values a drift point per layer for each tensor family."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from browser import body_data, dump_dom, screenshot

from ckptdiff.formats.collapse import expand_pattern
from fixtures.generate import HERE as FIXTURES
from fixtures.generate import header_bytes

np = pytest.importorskip("numpy")

PUBLISHED = str(FIXTURES / "kimi-k2-eagle3-published")
TWO_AUX = str(FIXTURES / "kimi-k25-eagle3-two-aux")
LAYERS = 6


def save(folder: Path, tensors: dict[str, np.ndarray]) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    specs = [(name, "F32", list(array.shape)) for name, array in tensors.items()]
    prefix, _ = header_bytes(specs)
    (folder / "model.safetensors").write_bytes(
        prefix + b"".join(a.astype(np.float32).tobytes() for a in tensors.values())
    )
    return str(folder)


def drifting_pair(root: Path) -> tuple[str, str]:
    """A six-layer model fine-tuned more the deeper the layer: B = A + noise × (layer + 1) / 100 for the MLP,
    the attention untouched but in layer 3, and an unindexed head that did not change."""
    rng = np.random.default_rng(0)
    a: dict[str, np.ndarray] = {"lm_head.weight": rng.standard_normal((16, 8), dtype=np.float32)}
    for layer in range(LAYERS):
        for name in ("mlp.down_proj.weight", "self_attn.q_proj.weight"):
            a[f"model.layers.{layer}.{name}"] = rng.standard_normal((8, 8), dtype=np.float32)
    b = {}
    for name, array in a.items():
        layer = int(name.split(".")[2]) if name.startswith("model.layers.") else -1
        scale = (layer + 1) / 100 if "mlp" in name else 0.5 if layer == 3 else 0.0
        b[name] = array + rng.standard_normal(array.shape, dtype=np.float32) * scale
    return save(root / "a", a), save(root / "b", b)


def probe(page: Path, script: str) -> dict[str, str]:
    """Load the report with ``script`` run after its own, and read back what the script measured."""
    text = page.read_text(encoding="utf-8")
    probed = page.with_name(page.stem + "-probe.html")
    probed.write_text(text.replace("</body>", f"<script>{script}</script></body>"), encoding="utf-8")
    return body_data(dump_dom(probed))


MEASURE = """
const box = (el) => el.getBoundingClientRect();
const d = document.body.dataset;
d.viewport = innerHeight;
d.verdictBottom = box(document.getElementById("verdict")).bottom;
const rows = [...document.querySelectorAll("#tensors tbody tr.row")];
d.rows = rows.length;
d.firstFailing = rows.findIndex((r) => r.dataset.fails === "1");
d.firstMatch = rows.findIndex((r) => r.dataset.status === "match");
const filter = document.getElementById("filter");
const visible = () => rows.filter((r) => !r.hidden).map((r) => r.dataset.name).join(" ");
filter.value = "fc.*"; filter.dispatchEvent(new Event("input"));
d.filtered = visible();
d.shown = document.getElementById("shown").textContent;
filter.value = ""; filter.dispatchEvent(new Event("input"));
document.getElementById("failing-only").click();
d.failingOnly = visible();
"""


def test_a_failing_pair_in_the_browser(run_cli, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    result = run_cli(PUBLISHED, TWO_AUX, "--engine", "all", "-o", str(page))
    assert result.returncode == 1 and result.stdout == ""
    text = page.read_text(encoding="utf-8")
    # self-contained: nothing to load, and a policy that forbids loading anything
    assert not re.search(r"""<(link|img|iframe|object|embed)\b|\bsrc=|url\(|@import""", text)
    assert "default-src 'none'" in text
    assert '<a href="https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/worker/gpu/spec_decode/eagle/' in text

    seen = probe(page, MEASURE)
    assert 0 < float(seen["verdictBottom"]) <= float(seen["viewport"]), seen
    assert seen["rows"] == "16" and seen["firstFailing"] == "0" and int(seen["firstMatch"]) > 0, seen
    assert seen["filtered"] == "fc.weight" and seen["shown"] == "1", seen
    assert seen["failingOnly"] == "fc.weight", seen
    shot = screenshot(page, tmp_path / "report.png")
    assert shot.stat().st_size > 10_000


def test_pattern_rows_expand_into_exactly_their_names(run_cli, tmp_path: Path) -> None:
    from test_markdown_report import pair_with_1500_differences

    a, b = pair_with_1500_differences(tmp_path / "pair")
    page = tmp_path / "p.html"
    assert run_cli(a, b, "-o", str(page), "--format", "html").returncode == 1
    patterns = re.findall(
        r'<tr class="row" data-status="match" data-fails="0" data-count="(\d+)" data-name="([^"]+)"', page.read_text()
    )
    assert patterns and all(int(count) == len(expand_pattern(name)) for count, name in patterns)
    seen = probe(
        page,
        """
        const row = [...document.querySelectorAll("tr.row")].find((r) => r.dataset.count !== "1");
        row.querySelector("button.expand").click();
        const members = [];
        for (let m = row.nextElementSibling; m && m.classList.contains("member"); m = m.nextElementSibling)
          members.push(m.dataset.name);
        document.body.dataset.pattern = row.dataset.name;
        document.body.dataset.members = members.join(" ");
        const filter = document.getElementById("filter");
        filter.value = "model.layers.7.*k_proj*"; filter.dispatchEvent(new Event("input"));
        const hidden = [...document.querySelectorAll("tr.member")].filter((m) => m.hidden).length;
        document.body.dataset.visibleMembers = members.length - hidden;
        document.body.dataset.shown = document.getElementById("shown").textContent;
        """,
    )
    assert seen["members"].split(" ") == expand_pattern(seen["pattern"])
    assert seen["pattern"] == "model.layers.{0..59}.self_attn.k_proj.weight"
    assert seen["visibleMembers"] == "1" and seen["shown"] == "1", seen  # the glob's * crosses dots


def test_values_draw_one_point_per_layer_for_each_family(run_cli, tmp_path: Path) -> None:
    a, b = drifting_pair(tmp_path)
    page = tmp_path / "drift.html"
    result = run_cli(a, b, "--values", "--format", "html", "-o", str(page))
    assert result.returncode == 0, result.stderr
    stats = {
        row["name"]: row["values"]
        for row in json.loads(run_cli(a, b, "--values", "--format", "json").stdout)["tensors"]
    }

    seen = probe(
        page,
        """
        const plots = [...document.querySelectorAll("svg.plot")];
        document.body.dataset.plots = JSON.stringify(plots.map((svg) => ({
          family: svg.dataset.family, metric: svg.dataset.metric,
          points: [...svg.querySelectorAll("circle.point")].map((c) => ({
            layer: Number(c.dataset.layer), value: Number(c.dataset.value), y: c.getBBox().y,
            tensor: c.querySelector("title").textContent.split(":")[0] })),
        })));
        """,
    )
    plots = json.loads(seen["plots"])
    families = {"model.layers.*.mlp.down_proj.weight", "model.layers.*.self_attn.q_proj.weight"}
    assert {(p["family"], p["metric"]) for p in plots} == {(f, m) for f in families for m in ("rel_l2", "cosine")}
    for plot in plots:
        assert [point["layer"] for point in plot["points"]] == list(range(LAYERS)), plot  # one point per layer
        for point in plot["points"]:
            expected = stats[point["tensor"]]
            want = 0.0 if expected["equal"] and plot["metric"] == "rel_l2" else expected[plot["metric"]]
            want = 1.0 if expected["equal"] and plot["metric"] == "cosine" else want
            assert point["value"] == pytest.approx(want, rel=1e-9, abs=1e-12)
    mlp = next(p for p in plots if p["family"].endswith("mlp.down_proj.weight") and p["metric"] == "rel_l2")
    by_value = sorted(mlp["points"], key=lambda point: point["value"])
    assert [p["y"] for p in by_value] == sorted((p["y"] for p in by_value), reverse=True)  # more drift: higher up
    assert by_value[0]["layer"] == 0  # the least fine-tuned layer drifts least
    shot = screenshot(page, tmp_path / "drift.png", height=1400)
    assert shot.stat().st_size > 10_000


def test_hostile_names_stay_text(tmp_path: Path) -> None:
    from ckptdiff.checkpoint import Checkpoint, TensorInfo
    from ckptdiff.comparison import compare_checkpoints
    from ckptdiff.formats import render

    names = ['<script>document.body.dataset.owned="1"</script>', '" onmouseover="x', "a.{0..3}.b", "</td></tr>"]
    side = Checkpoint("x<b>", "local", "x", None, {n: TensorInfo(n, "F32", (4,), "m", (0, 16)) for n in names})
    other = Checkpoint("y", "local", "y", None, {n: TensorInfo(n, "F32", (8,), "m", (0, 32)) for n in names})
    page = tmp_path / "hostile.html"
    page.write_text(render(compare_checkpoints(side, other), "html"), encoding="utf-8")
    seen = probe(
        page,
        "const rows = [...document.querySelectorAll('tr.row')];"
        "document.body.dataset.names = JSON.stringify(rows.map((r) => r.dataset.name));",
    )
    assert "owned" not in seen and sorted(json.loads(seen["names"])) == sorted(names)


def test_long_names_and_layer_patterns_wrap_inside_the_page(run_cli, tmp_path: Path) -> None:
    from fixtures.generate import write_config, write_safetensors

    # every other layer's MLP in another dtype: one pattern row, model.layers.{1,3,5,…,79}.mlp.down_proj.weight
    long_name = "x" * 300 + ".weight"  # no dot to wrap at for 300 characters
    layers = [f"model.layers.{i}.mlp.down_proj.weight" for i in range(80)]
    for side, dtype in (("a", "BF16"), ("b", "F16")):
        tensors = [(n, dtype if i % 2 else "BF16", [4, 4]) for i, n in enumerate(layers)]
        write_safetensors(tmp_path / side / "model.safetensors", [*tensors, (long_name, "BF16", [4])])
        write_config(tmp_path / side, {"model_type": "llama", "_name_or_path": f"/{side}" + "y" * 400})
    page = tmp_path / "report.html"
    assert run_cli(str(tmp_path / "a"), str(tmp_path / "b"), "-o", str(page)).returncode == 1
    seen = probe(
        page,
        """
        const d = document.body.dataset;
        d.pageWidth = document.documentElement.scrollWidth;
        d.viewWidth = document.documentElement.clientWidth;
        const pattern = [...document.querySelectorAll("tr.row")].find((r) => r.dataset.count !== "1");
        d.pattern = pattern.dataset.name;
        d.shown = pattern.querySelector("code").textContent;
        """,
    )
    assert (
        seen["pattern"]
        == seen["shown"]
        == "model.layers.{" + ",".join(map(str, range(1, 80, 2))) + "}.mlp.down_proj.weight"
    )
    assert int(seen["pageWidth"]) <= int(seen["viewWidth"]), seen  # no column pushed past the right edge


def test_a_long_name_quoted_in_a_note_or_a_message_wraps_inside_the_page(run_cli, tmp_path: Path) -> None:
    """The tensor column wrapped a long name, but a note quoting one ("did you mean B's model.layers.61.mlp.experts.
    0.down_proj.weight_scale_inv?") did not: an MTP pair's report was 884 px wide in an 800 px window, its notes and
    the verdict's reasons cut off at the right edge."""
    from fixtures.generate import write_safetensors

    for side, letter in (("a", "x"), ("b", "y")):
        write_safetensors(tmp_path / side / "model.safetensors", [(letter * 300 + ".weight", "BF16", [4])])
    page = tmp_path / "report.html"
    assert run_cli(str(tmp_path / "a"), str(tmp_path / "b"), "-o", str(page)).returncode == 1
    assert "did you mean B&#x27;s " + "y" * 300 in page.read_text()
    seen = probe(
        page,
        "document.body.dataset.pageWidth = document.documentElement.scrollWidth;"
        "document.body.dataset.viewWidth = document.documentElement.clientWidth;",
    )
    assert int(seen["pageWidth"]) <= int(seen["viewWidth"]), seen


def test_a_config_status_stays_on_one_line_beside_long_values(run_cli, tmp_path: Path) -> None:
    """The config table's status is its last column, which wrapped anywhere: beside two long values `only_in_b`
    broke into "only_i" / "n_b"."""
    from fixtures.generate import write_config, write_safetensors

    for side, letter in (("a", "y"), ("b", "z")):
        write_safetensors(tmp_path / side / "model.safetensors", [("w", "BF16", [1])])
        config = {"long": letter * 500} | ({"new_key": "x"} if side == "b" else {})
        write_config(tmp_path / side, config)
    page = tmp_path / "report.html"
    assert run_cli(str(tmp_path / "a"), str(tmp_path / "b"), "-o", str(page)).returncode == 0
    seen = probe(
        page,
        """
        const cells = [...document.querySelectorAll("td")].filter((td) => td.textContent === "only_in_b");
        const range = document.createRange();
        range.selectNodeContents(cells[0]);
        document.body.dataset.lines = new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;
        document.body.dataset.cells = cells.length;
        """,
    )
    assert seen["cells"] == "1" and seen["lines"] == "1", seen


def test_save_writes_more_formats_from_one_run_and_refuses_an_unknown_extension(run_cli, tmp_path: Path) -> None:
    result = run_cli(
        PUBLISHED,
        TWO_AUX,
        "--save",
        str(tmp_path / "r.json"),
        "--save",
        str(tmp_path / "r.html"),
        "--save",
        str(tmp_path / "r.md"),
    )
    assert result.returncode == 1 and result.stdout.rstrip().endswith("14 match, 1 injected")
    assert json.loads((tmp_path / "r.json").read_text())["verdict"] == "incompatible"
    assert (tmp_path / "r.html").read_text().startswith("<!doctype html>")
    assert (tmp_path / "r.md").read_text().startswith("## ckptdiff: incompatible ❌")
    refused = run_cli(PUBLISHED, TWO_AUX, "--save", str(tmp_path / "r.pdf"))
    assert refused.returncode == 2 and refused.stdout == "" and "no report format is written as .pdf" in refused.stderr


def test_a_conditional_verdict_says_its_condition_beside_the_engine_not_folded(run_cli) -> None:
    page = run_cli(str(FIXTURES / "kimi-k2-eagle3-published"), "--engine", "vllm", "--format", "html").stdout
    folded = "".join(re.findall(r"<details>.*?</details>", page, re.S))
    assert "aux_capture_conditional" in page and "aux_capture_conditional" not in folded
    assert "from_target" in folded
