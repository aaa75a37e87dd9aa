"""``python -m ckptdiff``: the same entry as the ``ckptdiff`` command."""

from ._entry import main

main()
