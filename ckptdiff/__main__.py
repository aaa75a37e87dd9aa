"""``python -m ckptdiff``: the same entry as the ``ckptdiff`` command."""

from .cli import main

main()
