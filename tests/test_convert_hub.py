"""The seed's case end to end against the Hub emulator: AQ-MedAI's Kimi-K2 drafter → a Kimi-K2.5 init checkpoint
for SGLang and vLLM, the embedding grafted from the K2.5 multimodal base (only its bytes read) or dropped, the K2.5
context length, the same d2t after the vocabulary check; and what a run does when SRC changes or is interrupted."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from base_fixtures import KIMI_K25_CONFIG, write_sharded
from safetensors.numpy import load_file
from test_convert import random_drafter

from fixtures.generate import KIMI_K2_BASE_CONFIG, write_config, write_safetensors

DRAFTER, K2, K25 = "AQ-MedAI/Kimi-K2-Instruct-eagle3", "moonshotai/Kimi-K2-Instruct", "moonshotai/Kimi-K2.5"
HIDDEN, VOCAB = 64, 1024  # the scaled-down drafter's (fixtures.generate.small_drafter_config)
EMBED = "language_model.model.embed_tokens.weight"
CHAT_TEMPLATE = "{% for m in messages %}<|im_{{ m.role }}|>{{ m.content }}<|im_end|>{% endfor %}"
SPECIAL = {"163584": {"content": "[BOS]", "special": True}, "163585": {"content": "[EOS]", "special": True}}


def write_tokenizer(folder: Path, *, template: str, special: dict) -> None:
    (folder / "tiktoken.model").write_bytes(b"".join(b"%d %d\n" % (i, i) for i in range(2000)))
    config = {"added_tokens_decoder": special, "bos_token": "[BOS]", "eos_token": "[EOS]", "chat_template": template}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))


def write_k2(folder: Path) -> Path:
    config = dict(copy.deepcopy(KIMI_K2_BASE_CONFIG), hidden_size=HIDDEN, vocab_size=VOCAB)
    write_config(folder, config)
    write_safetensors(folder / "model.safetensors", [("model.embed_tokens.weight", "BF16", [VOCAB, HIDDEN])])
    write_tokenizer(folder, template=CHAT_TEMPLATE, special=SPECIAL)
    return folder


def write_k25(folder: Path, *, special: dict = SPECIAL) -> Path:
    """Kimi-K2.5's layout (KimiK25ForConditionalGeneration, text_config, language_model.*), scaled to the drafter."""
    config = copy.deepcopy(KIMI_K25_CONFIG)
    config["text_config"].update(hidden_size=HIDDEN, vocab_size=VOCAB)
    write_sharded(
        folder,
        config,
        [
            [
                (EMBED, "BF16", [VOCAB, HIDDEN]),
                ("language_model.model.layers.0.input_layernorm.weight", "BF16", [HIDDEN]),
            ],
            [
                ("language_model.lm_head.weight", "BF16", [VOCAB, HIDDEN]),
                ("vision_tower.patch_embed.proj.weight", "BF16", [8, 3, 14, 14]),
            ],
        ],
    )
    first = folder / "model-00001-of-00002.safetensors"
    specs = [
        (EMBED, "BF16", [VOCAB, HIDDEN]),
        ("language_model.model.layers.0.input_layernorm.weight", "BF16", [HIDDEN]),
    ]
    write_safetensors(first, specs, fill="random", seed=25, metadata={"format": "pt"})  # real bytes to graft
    write_tokenizer(folder, template=CHAT_TEMPLATE + "{# K2.5: media #}", special=special)
    return folder


@pytest.fixture
def seed(hub, tmp_path):
    """The three repos on the emulator; the drafter as published (SpecForge names, no embed_tokens)."""
    drafter = random_drafter(tmp_path / "repos" / "drafter")
    hub.add_repo(DRAFTER, drafter)
    hub.add_repo(K2, write_k2(tmp_path / "repos" / "k2"))
    hub.add_repo(K25, write_k25(tmp_path / "repos" / "k25"))
    return tmp_path / "repos"


@pytest.fixture
def ckptdiff(hub, run_cli, tmp_path):
    def run(*args: str):
        return run_cli(*args, env=hub.client_env(tmp_path / "hf-home"))

    return run


def tensor_span(path: Path, name: str) -> tuple[int, tuple[int, int]]:
    """A safetensors file's header length (with its 8-byte prefix) and ``name``'s data offsets."""
    raw = path.read_bytes()
    length = int.from_bytes(raw[:8], "little")
    begin, end = json.loads(raw[8 : 8 + length])[name]["data_offsets"]
    return 8 + length, (begin, end)


def base_shard_gets(hub) -> list:
    return [e for e in hub.log if e.path.endswith("model-00001-of-00002.safetensors") and e.method == "GET"]


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_the_k2_drafter_becomes_a_k25_init_checkpoint_with_the_bases_embedding(ckptdiff, hub, seed, tmp_path, engine):
    out = tmp_path / f"k25-{engine}"
    hub.reset_counters()

    result = ckptdiff(
        "convert", DRAFTER, str(out), "--to", engine, "--base", K25, "--from-base", K2, "--embed", "base", "-q"
    )

    assert result.returncode == 0, result.stderr
    written, drafter = load_file(out / "model.safetensors"), load_file(seed / "drafter" / "model.safetensors")
    base = load_file(seed / "k25" / "model-00001-of-00002.safetensors")
    assert written["embed_tokens.weight"].tobytes() == base[EMBED].tobytes()
    assert written["d2t"].tobytes() == drafter["d2t"].tobytes()  # the same d2t, after the vocabulary check
    config = json.loads((out / "config.json").read_text())
    assert config["max_position_embeddings"] == 262144  # K2.5's context length
    assert config["target_hidden_size"] == HIDDEN
    provenance = json.loads((out / "convert.json").read_text())
    graft = next(t for t in provenance["tensors"] if t["name"] == "embed_tokens.weight")
    assert graft["from"] == {
        "checkpoint": "base",
        "spec": K25,
        "revision": graft["from"]["revision"],
        "name": EMBED,
        "file": "model-00001-of-00002.safetensors",
        "dtype": "BF16",
        "shape": [VOCAB, HIDDEN],
    }
    assert provenance["tokenizer"]["same"] is True
    # every tensor came from the Hub: each compared with what was received (by sha256)
    assert provenance["proof"]["tensors_compared_by_sha256"] == 16
    # the base's weights: its first shard's header, then exactly the embedding's byte range, nothing else
    gets = base_shard_gets(hub)
    header_length, (begin, end) = tensor_span(seed / "k25" / "model-00001-of-00002.safetensors", EMBED)
    assert [e.range for e in gets][-1] == f"bytes={header_length + begin}-{header_length + end - 1}"
    assert gets[-1].bytes_sent == end - begin
    assert not any(
        e.path.endswith("model-00002-of-00002.safetensors") and e.range and "bytes=0-" not in e.range for e in hub.log
    )
    # the vocabularies compared by the Hub's hashes: no tokenizer file downloaded but the two configs' special tokens
    assert not any(e.path.endswith("tiktoken.model") for e in hub.log if e.method == "GET")


def test_the_embedding_can_be_dropped_for_the_engine_to_inject(ckptdiff, hub, seed, tmp_path):
    out = tmp_path / "k25-dropped"

    result = ckptdiff(
        "convert", DRAFTER, str(out), "--to", "vllm", "--base", K25, "--from-base", K2, "--embed", "drop", "-q"
    )

    assert result.returncode == 0, result.stderr
    assert "embed_tokens.weight" not in load_file(out / "model.safetensors")
    assert json.loads((out / "config.json").read_text())["max_position_embeddings"] == 262144
    assert base_shard_gets(hub) == [] or all(e.range.startswith("bytes=0-") for e in base_shard_gets(hub))


def test_different_vocabularies_are_refused_unless_allowed(ckptdiff, hub, seed, tmp_path):
    other = dict(SPECIAL, **{"163606": {"content": "<|media_start|>", "special": True}})
    hub.push(K25, write_k25(tmp_path / "k25-new-tokens", special=other))
    out = tmp_path / "out"

    refused = ckptdiff(
        "convert", DRAFTER, str(out), "--to", "sglang", "--base", K25, "--from-base", K2, "--embed", "base"
    )

    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "tokenizer_config.json: added_tokens_decoder differs" in lines[0]
    assert not out.exists() and not (tmp_path / "out.partial").exists()
    allowed = ckptdiff(
        "convert",
        DRAFTER,
        str(out),
        "--to",
        "sglang",
        "--base",
        K25,
        "--from-base",
        K2,
        "--embed",
        "base",
        "--allow-tokenizer-change",
        "-q",
    )
    assert allowed.returncode == 0, allowed.stderr


def test_carrying_d2t_to_a_base_without_a_vocabulary_check_is_refused(ckptdiff, seed, tmp_path):
    result = ckptdiff("convert", DRAFTER, str(tmp_path / "out"), "--to", "sglang", "--base", K25)

    assert result.returncode == 2
    assert "give --from-base" in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.fixture
def release():
    event = threading.Event()
    yield event
    event.set()


def on_embedding_get(hub, action):
    """A hook running ``action`` when the base's embedding range is asked for (during the write), then serving it."""

    def hook(request) -> bool:
        ranged = request.headers.get("Range", "")
        if request.path.endswith("model-00001-of-00002.safetensors") and ranged and not ranged.startswith("bytes=0-"):
            action()
        return False

    hub.hooks.append(hook)


def test_a_src_changed_during_the_write_fails_and_leaves_only_the_partial_output(ckptdiff, hub, seed, tmp_path):
    src = random_drafter(tmp_path / "local-drafter")
    weights = src / "model.safetensors"
    on_embedding_get(hub, lambda: os.utime(weights, ns=(time.time_ns(), time.time_ns() + 10**9)))
    out = tmp_path / "out"

    result = ckptdiff(
        "convert", str(src), str(out), "--to", "sglang", "--base", K25, "--from-base", K2, "--embed", "base"
    )

    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert f"{weights}: changed while it was converted" in last and f"{out}.partial is left for inspection" in last
    assert not out.exists() and not (tmp_path / "out.partial" / "convert.json").exists()


def test_ctrl_c_during_the_write_leaves_nothing_that_looks_complete(hub, seed, tmp_path, run_cli_subprocess, release):
    entered = threading.Event()

    def stall() -> None:
        entered.set()
        release.wait(60)

    on_embedding_get(hub, stall)
    out = tmp_path / "out"
    import subprocess
    import sys

    from conftest import cli_env

    env = cli_env(tmp_path, hub.client_env(tmp_path / "hf-home"))
    args = ["convert", DRAFTER, str(out), "--to", "sglang", "--base", K25, "--from-base", K2, "--embed", "base", "-q"]
    process = subprocess.Popen(
        [sys.executable, "-m", "ckptdiff", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert entered.wait(120), process.communicate(timeout=5)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    release.set()

    assert process.returncode == 130, stderr
    assert f"interrupted: {out}.partial is incomplete" in stderr
    assert not out.exists()
    assert not (tmp_path / "out.partial" / "convert.json").exists()


def test_ctrl_c_ends_the_run_when_its_line_outgrows_an_unread_stderr_pipe(hub, seed, tmp_path, release):
    """The interrupted line names OUT.partial; OUT's folders here are control characters, each shown as four, so
    the line is longer than the one page of room left in a stderr pipe nobody reads. The run still ends (130), and
    the pipe holds a whole line, cut to what a pipe takes at once, or nothing: never a write left waiting."""
    import select
    import subprocess
    import sys

    from conftest import cli_env
    from request_gate import HANG

    entered = threading.Event()

    def stall() -> None:
        entered.set()
        release.wait(HANG)

    on_embedding_get(hub, stall)
    out = tmp_path.joinpath(*["\x01" * 200] * 6, "out")  # a 1.2 kB path, a 4.8 kB line
    out.parent.mkdir(parents=True)
    reading, writing = os.pipe()
    os.set_blocking(writing, False)
    with contextlib.suppress(BlockingIOError):
        while True:
            os.write(writing, b"x" * 4096)
    os.set_blocking(writing, True)  # as a pipe is: a write waits for room
    os.read(reading, 4096)  # one page of room: the pipe takes a write again, but not all of a 4.8 kB one
    env = cli_env(tmp_path, hub.client_env(tmp_path / "hf-home"))
    args = ["convert", DRAFTER, str(out), "--to", "sglang", "--base", K25, "--from-base", K2, "--embed", "base", "-q"]
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "ckptdiff", *args], env=env, stdout=subprocess.DEVNULL, stderr=writing
        )
        try:
            assert entered.wait(HANG)
            process.send_signal(signal.SIGINT)
            returncode = process.wait(timeout=HANG)  # only a guard: a run whose last write waits never ends
        finally:
            process.kill()
            release.set()
        os.set_blocking(reading, False)
        told = b"".join(iter(lambda: os.read(reading, 65536) if select.select([reading], [], [], 0)[0] else b"", b""))
    finally:
        os.close(writing)
        os.close(reading)

    assert returncode == 130
    line = told.lstrip(b"x")
    assert line == b"" or (line.startswith(b"ckptdiff: interrupted: ") and line.endswith(b" is incomplete\n"))
    assert len(line) <= select.PIPE_BUF and line.count(b"\n") <= 1
