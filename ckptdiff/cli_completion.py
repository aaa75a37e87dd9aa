"""Shell completion of ``ckptdiff convert``: convert is a command beside the comparison, chosen by its first word,
which a completing shell passes in COMP_WORDS rather than in argv."""

from __future__ import annotations

import os


def completing_convert() -> bool:
    """Shell completion of ``ckptdiff convert …`` (the words are in COMP_WORDS, for bash, zsh and fish alike, not
    in argv): the words are handed to convert's command without ``convert``, so its options and choices complete
    (they completed as file names, the comparison's A being "convert")."""
    if not os.environ.get("_CKPTDIFF_COMPLETE") or "COMP_WORDS" not in os.environ:
        return False
    from click.shell_completion import split_arg_string

    words = split_arg_string(os.environ["COMP_WORDS"])
    try:
        current = int(os.environ.get("COMP_CWORD", ""))
    except ValueError:
        return False
    if current < 2 or words[1:2] != ["convert"]:  # the word being typed is convert itself: not yet
        return False
    from .cli_convert import is_convert

    if not is_convert(words[1:]):  # a folder named convert: the comparison's A, unless --to follows
        return False
    import shlex

    os.environ["COMP_WORDS"] = " ".join(shlex.quote(word) for word in words[:1] + words[2:])
    os.environ["COMP_CWORD"] = str(current - 1)
    return True
