"""`--values-only GLOB`: only the tensors it matches are compared by value, and a Hub repo (or store) is read by
each tensor's byte range — counted by the Hub emulator's byte counters — never whole files; `--values --base`
reads only the base's embedding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixtures.generate import header_bytes, small_drafter_config, write_config

np = pytest.importorskip("numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)


def save(folder: Path, tensors: dict[str, np.ndarray]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    names = {BF16: "BF16", np.dtype(np.int64): "I64"}
    prefix, _ = header_bytes([(name, names[array.dtype], list(array.shape)) for name, array in tensors.items()])
    (folder / "model.safetensors").write_bytes(prefix + b"".join(array.tobytes() for array in tensors.values()))
    return folder


def randn(seed: int, *shape: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32).astype(BF16)


def drafter_pair(root: Path) -> tuple[Path, Path, int]:
    """A drafter and its fine-tuned copy, 11 MiB each, in which fc.weight (1.5 MiB) is one tensor of several."""
    published = {
        "embed_tokens.weight": randn(1, 4096, 512),
        "fc.weight": randn(2, 512, 1536),
        "lm_head.weight": randn(3, 4096, 512),
        "midlayer.mlp.up_proj.weight": randn(4, 1536, 512),
        "norm.weight": np.ones(512, dtype=BF16),
        "d2t": np.arange(256, dtype=np.int64),
    }
    tuned = dict(published)
    tuned["fc.weight"] = (published["fc.weight"].astype(np.float32) * 1.01).astype(BF16)
    tuned["midlayer.mlp.up_proj.weight"] = randn(5, 1536, 512)
    return save(root / "published", published), save(root / "tuned", tuned), published["fc.weight"].nbytes


@pytest.fixture
def ckptdiff_hub(hub, run_cli, tmp_path):
    """The CLI with huggingface_hub pointed at the emulator, each call with a fresh HF cache (nothing cached
    from an earlier call), and the bytes the emulator sent for that call."""
    calls = iter(range(1000))

    def run(*args: str):
        hub.reset_counters()
        result = run_cli(*args, env=hub.client_env(tmp_path / f"hf-home-{next(calls)}"))
        return result, hub.total_bytes

    return run


def test_values_only_reads_one_tensor_of_a_hub_repo(hub, ckptdiff_hub, tmp_path: Path) -> None:
    published, tuned, fc_bytes = drafter_pair(tmp_path)
    hub.add_repo("org/tuned", tuned)
    file_bytes = (tuned / "model.safetensors").stat().st_size

    headers, headers_sent = ckptdiff_hub(str(published), "org/tuned", "--format", "json")
    assert headers.returncode == 0, headers.stderr
    targeted, sent = ckptdiff_hub(str(published), "org/tuned", "--values-only", "fc.weight", "--format", "json")
    assert targeted.returncode == 0, targeted.stderr

    # the Done-when: that tensor's bytes (to 1 %) plus what the same run reads without values (the headers)
    assert fc_bytes <= sent - headers_sent <= 1.01 * fc_bytes, (sent, headers_sent, fc_bytes)
    assert sent < file_bytes / 4
    assert (
        "--values: reading 1 tensor(s) of B (org/tuned@" in targeted.stderr
        and "by their byte ranges" in targeted.stderr
    )

    rows = {row["name"]: row.get("values") for row in json.loads(targeted.stdout)["tensors"]}
    assert [name for name, values in rows.items() if values is not None] == ["fc.weight"]
    # the statistics are those of the whole-file pass
    full, full_sent = ckptdiff_hub(str(published), "org/tuned", "--values", "--format", "json")
    assert full_sent >= file_bytes  # --values downloads the file
    whole = {row["name"]: row.get("values") for row in json.loads(full.stdout)["tensors"]}
    assert rows["fc.weight"] == whole["fc.weight"] and not rows["fc.weight"]["equal"]


def test_a_glob_crosses_dots_and_repeats(run_cli, tmp_path: Path) -> None:
    published, tuned, _ = drafter_pair(tmp_path)
    result = run_cli(
        str(published), str(tuned), "--values-only", "*.up_proj.*", "--values-only", "n*", "--format", "json"
    )
    assert result.returncode == 0, result.stderr
    compared = sorted(row["name"] for row in json.loads(result.stdout)["tensors"] if "values" in row)
    assert compared == ["midlayer.mlp.up_proj.weight", "norm.weight"]


def test_a_glob_that_matches_nothing_is_one_line(run_cli, tmp_path: Path) -> None:
    published, tuned, _ = drafter_pair(tmp_path)
    result = run_cli(str(published), str(tuned), "--values-only", "fc.weigth")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        "ckptdiff: --values-only: fc.weigth matches no tensor both sides store with one shape (check the names)\n"
    )


def test_values_with_a_hub_base_reads_only_its_embedding(hub, ckptdiff_hub, tmp_path: Path) -> None:
    """A drafter that saved a random embedding instead of the base's: --values --base catches it, reading the
    base's embedding by its byte range and nothing else of the base's 20 MiB shard."""
    config = small_drafter_config(
        vocab_size=4096,
        hidden_size=512,
        intermediate_size=1536,
        num_attention_heads=8,
        num_key_value_heads=8,
        head_dim=64,
    )
    embed = randn(7, 4096, 512)
    base = save(
        tmp_path / "base",
        {
            "lm_head.weight": randn(8, 4096, 512),
            "model.embed_tokens.weight": embed,
            "model.norm.weight": randn(9, 16384, 512),
        },
    )
    hub.add_repo("org/base", base)
    ours = save(tmp_path / "ours", {"embed_tokens.weight": randn(10, 4096, 512), "fc.weight": randn(2, 512, 1536)})
    copied = save(tmp_path / "copied", {"embed_tokens.weight": embed, "fc.weight": randn(2, 512, 1536)})
    for folder in (ours, copied):
        write_config(folder, config)

    plain, plain_sent = ckptdiff_hub(str(copied), str(ours), "--base", "org/base", "--format", "json")
    fail_or_pass(plain)
    checked, sent = ckptdiff_hub(
        str(copied), str(ours), "--base", "org/base", "--values-only", "embed_tokens.weight", "--format", "json"
    )
    assert fail_or_pass(checked) == "incompatible"
    assert embed.nbytes <= sent - plain_sent <= 1.01 * embed.nbytes, (sent, plain_sent, embed.nbytes)
    findings = {(f["code"], f["params"].get("side")) for f in json.loads(checked.stdout)["findings"]}
    assert ("embed_matches_base", "A") in findings and ("embed_differs_from_base", "B") in findings

    # --values without -only: the drafters are local, the base still gives only its embedding
    whole, whole_sent = ckptdiff_hub(str(copied), str(ours), "--base", "org/base", "--values", "--format", "json")
    assert fail_or_pass(whole) == "incompatible"
    assert embed.nbytes <= whole_sent - plain_sent <= 1.01 * embed.nbytes


def fail_or_pass(result) -> str:
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)["verdict"]


def test_values_only_reads_one_tensor_of_an_s3_object(s3, run_cli, tmp_path: Path) -> None:
    published, tuned, fc_bytes = drafter_pair(tmp_path)
    s3.upload(tuned, "drafters/tuned")
    key = "drafters/tuned/model.safetensors"

    plain = run_cli(str(published), "s3://drafters/tuned", "--format", "json", env=s3.env)
    assert plain.returncode == 0, plain.stderr
    headers_sent = s3.bytes_sent[key]
    s3.reset_counters()
    targeted = run_cli(
        str(published), "s3://drafters/tuned", "--values-only", "fc.weight", "--format", "json", env=s3.env
    )
    assert targeted.returncode == 0, targeted.stderr
    assert fc_bytes <= s3.bytes_sent[key] - headers_sent <= 1.01 * fc_bytes, (s3.bytes_sent[key], headers_sent)
    rows = {row["name"]: row.get("values") for row in json.loads(targeted.stdout)["tensors"]}
    assert [name for name, values in rows.items() if values is not None] == ["fc.weight"]
