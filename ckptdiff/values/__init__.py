"""Value statistics (``--values``): did training change a tensor, and by how much? numpy; torch for .bin/.pt.

For every tensor both sides store with the same shape: exactly equal?, max |b−a|, mean |b−a|, cosine
similarity and relative L2 ‖b−a‖/‖a‖, computed in one fused pass over the stored bits (a C kernel; numpy where
it was not built) and summed in float64; in threads, local processes (``--jobs``) or on Dask (``--scheduler``).
Files whose sha256 is known on both sides and equal are reported equal unread.
A Hub side's other files are downloaded into the HF cache, only under ``--values``, after announcing the total.
"""

from .base import embed_pairs_for
from .compare import ValuesOptions, ValuesResult, compare_values
from .files import fetch_files, file_sha256, identical_files
from .findings import TOP_CHANGES, attach_values, value_findings
from .readers import TORCH_INSTALL_HINT, require_torch
from .statistics import IDENTICAL_BY_HASH, ValueStats

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
