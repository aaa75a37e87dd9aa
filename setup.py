"""The optional C kernel of --values (ckptdiff/values/_fused.c); everything else is in setup.cfg.

Built when a C compiler and the Python headers are there; without them the install goes on and --values uses
the numpy statistics instead (``optional=True``).
"""

import sys

from setuptools import Extension, setup

# -O3: GCC vectorises the lane loops only at -O3; no -ffast-math and no contraction into FMA, so every addition
# happens as written and a sum has the same bits with any CPU feature set (target_clones picks AVX2 at load time).
FLAGS = [] if sys.platform == "win32" else ["-O3", "-ffp-contract=off", "-fno-math-errno"]

setup(
    ext_modules=[
        Extension("ckptdiff.values._fused", ["ckptdiff/values/_fused.c"], extra_compile_args=FLAGS, optional=True)
    ]
)
