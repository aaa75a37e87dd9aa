"""Coverage-guided fuzzing (atheris/libFuzzer) of the header, index and config parsers. Not collected by pytest.

    pip install atheris
    python tests/fuzz/fuzz_readers.py /tmp/ckptdiff-corpus -max_total_time=120 -max_len=4096

The first byte of an input picks the parser; the rest is its bytes. Anything but ``CkptdiffError`` escaping
is a crash, which libFuzzer saves as ``crash-*`` for a regression test. Seeds (real headers and indexes from
``fixtures/``) are written to the corpus folder when it is empty.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

with atheris.instrument_imports():
    from ckptdiff.checkpoint import parse_config, parse_index
    from ckptdiff.errors import CkptdiffError
    from ckptdiff.safetensors_header import parse_file_prefix


def one_input(data: bytes) -> None:
    if not data:
        return
    body = data[1:]
    try:
        if data[0] % 3 == 0:
            parse_file_prefix(body, source="fuzz", file_size=len(body))
        elif data[0] % 3 == 1:
            parse_index(body, index_name="fuzz")
        else:
            parse_config(body, config_name="fuzz")
    except CkptdiffError:
        pass


def write_seeds(corpus: Path) -> None:
    """Valid small files (header + data), the fixtures' configs and an index, each behind its selector byte."""
    from fixtures.generate import header_bytes

    corpus.mkdir(parents=True, exist_ok=True)
    if any(corpus.iterdir()):
        return
    files = {
        "two-tensors": ([("w", "F4", [2, 2]), ("b", "BF16", [3])], {"format": "pt"}),
        "scalar-and-empty": ([("s", "F64", []), ("e", "I8", [0, 5])], None),
        "drafter-names": ([("midlayer.self_attn.q_proj.weight", "BF16", [2, 4]), ("d2t", "I64", [2])], None),
    }
    for name, (specs, metadata) in files.items():
        prefix, data_length = header_bytes(specs, metadata)
        (corpus / f"{name}.header").write_bytes(b"\0" + prefix + bytes(data_length))
    index = b'{"metadata": {"total_size": 16}, "weight_map": {"w": "model-00001-of-00002.safetensors"}}'
    (corpus / "index").write_bytes(b"\1" + index)
    for folder in sorted((REPO / "fixtures").glob("*/config.json")):
        (corpus / f"{folder.parent.name}.config").write_bytes(b"\2" + folder.read_bytes())


if __name__ == "__main__":
    folders = [arg for arg in sys.argv[1:] if not arg.startswith("-")]
    if folders:
        write_seeds(Path(folders[0]))
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
