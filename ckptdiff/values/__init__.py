"""Value statistics (``--values``): did training change a tensor, and by how much? numba; torch for .bin/.pt.

For every tensor both sides store with the same shape: exactly equal?, max |b−a|, mean |b−a|, cosine
similarity and relative L2 ‖b−a‖/‖a‖, computed in one fused pass over the stored bits (numba; numpy where numba
is missing) and summed in float64; in threads, local processes (``--jobs``) or on Dask (``--scheduler``).
Files whose sha256 is known on both sides and equal are reported equal unread.
A Hub side's other files are downloaded into the HF cache, only under ``--values``, after announcing the total.
"""

import os
import sys

if "numpy" not in sys.modules:
    # A pass is split across our own threads; OpenBLAS's threads (one per core, started when numpy is imported)
    # would only compete with them, and starting them costs ~0.15 s of every run.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from .base import embed_pairs_for  # noqa: E402
from .compare import ValuesOptions, ValuesResult, compare_values  # noqa: E402
from .files import fetch_files, file_sha256, identical_files  # noqa: E402
from .findings import TOP_CHANGES, attach_values, value_findings  # noqa: E402
from .readers import TORCH_INSTALL_HINT, require_torch  # noqa: E402
from .statistics import IDENTICAL_BY_HASH, ValueStats  # noqa: E402

__all__ = [
    "IDENTICAL_BY_HASH",
    "TOP_CHANGES",
    "TORCH_INSTALL_HINT",
    "ValueStats",
    "ValuesOptions",
    "ValuesResult",
    "attach_values",
    "compare_values",
    "embed_pairs_for",
    "fetch_files",
    "file_sha256",
    "identical_files",
    "require_torch",
    "value_findings",
]
