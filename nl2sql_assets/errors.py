"""The root of errors caused by what a person gave (a file, a flag, a selector, a baseline).

The CLI prints such an error's message and exits 2; any other exception is a bug and keeps
its traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input: the message says which file, case or field, and what to do."""


class UsageError(UserError):
    """A problem with the command line itself: reported on stderr, exit 2."""


class RunRefused(UserError, RuntimeError):
    """A run or a seeding cannot start as asked (mode full without a cost cap, a case without a
    plan in mode plans, an llm section given to a mode that runs no model, a reviewed suite as
    the target of drafts). Nothing was spent."""


class CapRefused(RunRefused):
    """A dollar cap that cannot be held as asked (against an engine that reports no cost): the
    CLI exits 3, as for a run stopped at its cap. Nothing was spent."""


def validation_summary(exc: Exception) -> str:
    """A pydantic ValidationError as one line: the first problem (field and message) and how
    many more there are, without pydantic's multi-line dump and help links. Any other
    exception is its own message, first line only."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    problems = errors(include_url=False)
    if not problems:
        return str(exc).splitlines()[0]
    first = problems[0]
    where = ".".join(str(part) for part in first["loc"])
    message = first["msg"]
    message = message[:1].lower() + message[1:]
    if first["type"] == "extra_forbidden":
        message = "unknown key"
    more = f" (and {len(problems) - 1} more problem{'s' if len(problems) > 2 else ''})" if len(problems) > 1 else ""
    return f"{where}: {message}{more}" if where else f"{message}{more}"
