"""JUnit XML: one testsuite per comparison, one testcase per tensor and finding, one failure per breaking tensor."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ckptdiff import compare
from ckptdiff.checkpoint import Checkpoint, TensorInfo
from ckptdiff.comparison import compare_checkpoints
from ckptdiff.formats import render
from ckptdiff.policy import Policy
from fixtures.generate import HERE as FIXTURES

PUBLISHED = str(FIXTURES / "kimi-k2-eagle3-published")
OURS = str(FIXTURES / "kimi-k25-eagle3-ours")
TWO_AUX = str(FIXTURES / "kimi-k25-eagle3-two-aux")

# What the common JUnit schema (Jenkins' junit-10.xsd, read by Jenkins, GitLab and the GitHub reporters) allows.
ALLOWED_ATTRIBUTES = {
    "testsuites": {"name", "time", "tests", "failures", "disabled", "errors"},
    "testsuite": set(
        "name tests failures errors group time skipped timestamp hostname id package file log url version".split()
    ),
    "properties": set(),
    "property": {"name", "value"},
    "testcase": {"name", "assertions", "time", "classname", "status", "class", "file", "line", "log", "group", "url"},
    "failure": {"message", "type"},
    "error": {"message", "type"},
    "skipped": {"message"},
    "system-out": set(),
    "system-err": set(),
}
CHILD_ORDER = {
    "testsuites": ["testsuite"],
    "testsuite": ["properties", "testcase", "system-out", "system-err"],
    "properties": ["property"],
    "testcase": ["skipped", "error", "failure", "system-out", "system-err"],
}


def checkpoint(tensors: dict[str, tuple[list[int], str]], spec: str) -> Checkpoint:
    infos = {n: TensorInfo(n, d, tuple(s), "model.safetensors", (0, 0)) for n, (s, d) in tensors.items()}
    return Checkpoint(spec=spec, kind="local", location=spec, revision=None, tensors=infos, config=None)


A = checkpoint(
    {
        "fc.weight": ([8, 24], "BF16"),
        "lm_head.weight": ([32, 8], "BF16"),
        "norm.weight": ([8], "BF16"),
        "q.weight": ([8, 8], "BF16"),
    },
    "a",
)
B = checkpoint(
    {
        "fc.weight": ([8, 16], "BF16"),
        "norm.weight": ([8], "F32"),
        "value_head.weight": ([1, 8], "BF16"),
        "q.weight": ([8, 8], "BF16"),
    },
    "b",
)


def assert_schema_shape(element: ET.Element) -> None:
    """Every element, attribute and child order is one the common JUnit schema allows; counts are integers."""
    assert set(element.attrib) <= ALLOWED_ATTRIBUTES[element.tag], (element.tag, element.attrib)
    for count in ("tests", "failures", "errors", "skipped"):
        if count in element.attrib:
            assert element.attrib[count].isdigit()
    if element.tag in ("testsuite", "testcase", "property"):
        assert element.attrib.get("name")
    if element.tag in ("failure", "error"):
        assert element.attrib.get("message") and element.attrib.get("type")
    order = [CHILD_ORDER[element.tag].index(child.tag) for child in element] if element.tag in CHILD_ORDER else []
    assert order == sorted(order), element.tag
    for child in element:
        assert_schema_shape(child)


def parse(report) -> tuple[ET.Element, ET.Element]:
    text = render(report, "junit")
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n')
    root = ET.fromstring(text.encode())
    assert root.tag == "testsuites" and [child.tag for child in root] == ["testsuite"]
    assert_schema_shape(root)
    return root, root[0]


def cases(suite: ET.Element, classname: str) -> dict[str, ET.Element]:
    return {case.get("name"): case for case in suite.iter("testcase") if case.get("classname") == classname}


def test_one_failure_per_mismatching_tensor_with_the_reason():
    report = compare_checkpoints(A, B)
    root, suite = parse(report)
    tensors = cases(suite, "tensors")
    assert list(tensors) == [row.name for row in report.tensors]  # a testcase per tensor, in report order
    failed = {name: case.find("failure") for name, case in tensors.items() if case.find("failure") is not None}
    assert {name: f.get("type") for name, f in failed.items()} == {
        "fc.weight": "shape_mismatch",
        "lm_head.weight": "only_in_a",
        "norm.weight": "dtype_mismatch",
        "value_head.weight": "only_in_b",
    }
    assert failed["fc.weight"].get("message") == "shape_mismatch: dim 1: 24 vs 16"
    assert failed["fc.weight"].text == "A: [8, 24] BF16\nB: [8, 16] BF16"
    assert suite.get("failures") == root.get("failures") == "4"
    testcases = len(report.tensors) + len(report.findings) + 1  # + config.json
    assert int(suite.get("tests")) == len(list(suite.iter("testcase"))) == testcases


def test_a_compatible_comparison_has_no_failures():
    report = compare(PUBLISHED, OURS)
    assert report.verdict == "compatible"
    _, suite = parse(report)
    assert suite.get("failures") == "0" and not list(suite.iter("failure"))
    injected = cases(suite, "tensors")["embed_tokens.weight"]
    assert injected.find("system-out").text.startswith("injected: ")


def test_rows_a_rule_accepts_are_skipped_with_the_rule():
    rules = {"allow_missing": ("lm_head.*",), "allow_extra": ("value_head.*",), "allow_dtype_change": ("BF16:F32",)}
    policy = Policy(**rules, flags=True)  # as the CLI builds it from its flags: the words name them
    _, suite = parse(compare_checkpoints(A, B, policy=policy))
    tensors = cases(suite, "tensors")
    assert tensors["lm_head.weight"].find("skipped").get("message") == (
        "only_in_a, allowed by --allow-missing 'lm_head.*'"
    )
    assert suite.get("skipped") == "3" and suite.get("failures") == "1"  # fc.weight's shape still fails
    rules = {p.get("name"): p.get("value") for p in suite.iter("property") if p.get("name").startswith("rule.")}
    assert rules["rule.1"] == "--allow-missing 'lm_head.*': 1 tensor accepted as missing from B"


def test_findings_are_testcases_and_fail_only_when_the_gate_says_so():
    _, lenient = parse(compare(PUBLISHED, TWO_AUX))
    warning = cases(lenient, "findings")["aux_layer_ids_differ"]
    assert warning.find("failure") is None and warning.find("system-out").text.startswith("warning: ")

    _, strict = parse(compare(PUBLISHED, TWO_AUX, policy=Policy(fail_on="warning")))
    failure = cases(strict, "findings")["aux_layer_ids_differ"].find("failure")
    assert failure.get("type") == "aux_layer_ids_differ"
    assert "eagle_aux_hidden_state_layer_ids" in failure.get("message")
    assert strict.get("failures") == "2"  # fc.weight and the warning


def test_hostile_names_still_make_well_formed_xml():
    a = checkpoint({'evil"<&>\x01\x1b[31m.weight': ([1], "F32")}, "a")
    b = checkpoint({}, "b")
    _, suite = parse(compare_checkpoints(a, b))
    (name,) = cases(suite, "tensors")
    assert name == 'evil"<&>\\x01\\x1b[31m.weight'


def test_the_same_inputs_give_the_same_bytes():
    assert render(compare(PUBLISHED, TWO_AUX), "junit") == render(compare(PUBLISHED, TWO_AUX), "junit")
