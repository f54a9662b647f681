"""The root of errors caused by what a person gave (a file, a flag, a selector, a baseline).

The CLI prints such an error's message and exits 2; any other exception is a bug and keeps
its traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input: the message says which file, case or field, and what to do."""
