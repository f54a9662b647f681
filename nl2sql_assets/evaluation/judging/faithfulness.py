"""Answer faithfulness: does the written answer state only what the returned rows hold?

The rows can be right while the sentence about them invents a number or a name. This
check reads the answer with regular expressions, no model, so it is reproducible:

* every **number** written (1,297 / 1234.5 / $523.06 / -5 / 37.2% / 1.2 million) must be
  backed by the rows, the row count, a column sum, or appear inside a text cell or the
  question;
* every **name** written in quotes ("Jazz", 'Jazz', “Jazz”) or in bold (**Rock**, __Rock__)
  must be found in a text cell, a column name or the question, or contain a text cell.

Each rule sits next to the regular expression that implements it below. A few choices go
past the bare rules, all in the direction of flagging less that a person would accept:
an unsigned number may state a negative value's size ("fell by 5" for -5); numbers may be
rounded half-up or half-even; "1.2 million" is read with its scale word; code spans and
fenced blocks are not prose and are skipped; a text cell only backs a longer name when it
appears there as whole words and has at least two characters.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any


@dataclass(frozen=True)
class Faithfulness:
    """The verdict on one answer; the lists hold the offending text as the answer wrote it."""

    faithful: bool
    unsupported_numbers: list[str] = field(default_factory=list)
    unsupported_entities: list[str] = field(default_factory=list)
    checked: int = 0  # numbers and names checked

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------------------
# Numbers
# --------------------------------------------------------------------------------------

# A number as a person writes it: optional minus, optional currency sign, digits with or
# without thousands separators, optional decimals, optional percent sign ("37.2 %" too).
_NUMBER = re.compile(
    r"(?P<sign>[-−])?(?P<cur>[$€£¥])?"
    r"(?P<body>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"(?P<pct>\s?%)?",
    re.ASCII,
)

# Scale words: "1.2 million" is checked as 1,200,000 written to the nearest 100,000.
_SCALE = re.compile(r"\s+(thousand|million|billion|trillion)\b", re.IGNORECASE)
_SCALES = {"thousand": 3, "million": 6, "billion": 9, "trillion": 12}

# Not a number: a list marker, "1. " or "2) " at the start of a line (markdown lists).
_LIST_MARKER = re.compile(r"^[ \t]*(?:[-*+][ \t]+)?(\d+)[.)](?=\s)", re.MULTILINE | re.ASCII)

# Not a number: the month and day of a date (only the year is checked).
#   ISO dates, with an optional time: 2013-02-01, 2013-02, 2013-02-01 10:30:00
_ISO_DATE = re.compile(
    r"(?<!\d)\d{4}-(?P<md>(?:0?[1-9]|1[0-2])(?:-(?:0?[1-9]|[12]\d|3[01]))?"
    r"(?:[ T]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?)(?![\d-])",
    re.ASCII,
)
#   Slash dates: 2013/02/01 (year first) and 02/01/2013 or 2/1/13 (year last).
_SLASH_YEAR_FIRST = re.compile(r"(?<!\d)\d{4}/(?P<md>\d{1,2}/\d{1,2})(?![\d/])", re.ASCII)
_SLASH_YEAR_LAST = re.compile(r"(?<![\d/])(?P<md>\d{1,2}/\d{1,2}/)(?:\d{4}|(?P<yy>\d{2}))(?![\d/])", re.ASCII)
#   Month names: "February 1, 2013", "Feb 1st", "1 February 2013", "1st of Feb".
_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_MONTH_DAY = re.compile(rf"\b{_MONTH}\.?\s+(?P<md>\d{{1,2}})(?:st|nd|rd|th)?\b(?!\s*%)", re.IGNORECASE)
_DAY_MONTH = re.compile(rf"\b(?P<md>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\b", re.IGNORECASE)

# Not checked at all: code (```fenced``` blocks and `inline` spans) quotes SQL or identifiers,
# not claims about the data.
_CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.DOTALL)

# Numbers found in text cells and in the question: any digit run, with or without
# thousands separators or decimals. A number written in the answer that equals one of them
# is always supported ("Symphony No. 5", "top 5", "in 2013", the year of '2009-01-01').
_TEXT_NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?", re.ASCII)


def _glued_before(text: str, i: int) -> bool:
    """Glued to a word or identifier on the left: MPEG-4, chinook_001, #7, v2, @3."""
    if i < 0:
        return False
    ch = text[i]
    if ch.isalnum() or ch in "_#@&":
        return True
    # A hyphen after a letter joins a word (MPEG-4, COVID-19, top-5).
    return ch in "-−" and i > 0 and (text[i - 1].isalpha() or text[i - 1] == "_")


def _glued_after(text: str, j: int) -> bool:
    """Glued on the right: ordinals (2nd, 5th), units and identifiers (4K, 10x, 3D),
    versions (1.2.3), and hyphenated words (5-star)."""
    if j >= len(text):
        return False
    ch = text[j]
    if ch.isalnum() or ch == "_":
        return True
    nxt = text[j + 1] if j + 1 < len(text) else ""
    if ch == "." and nxt.isdigit():
        return True
    return ch in "-−" and (nxt.isalpha() or nxt == "_")


def _masked_spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for m in _LIST_MARKER.finditer(text):
        spans.append(m.span(1))
    for pattern in (_ISO_DATE, _SLASH_YEAR_FIRST, _SLASH_YEAR_LAST, _MONTH_DAY, _DAY_MONTH):
        for m in pattern.finditer(text):
            spans.append(m.span("md"))
            if pattern is _SLASH_YEAR_LAST and m.group("yy"):
                spans.append(m.span("yy"))  # a two-digit year is not a year we can check
    return spans


def _inside(span: tuple[int, int], spans: Iterable[tuple[int, int]]) -> bool:
    a, b = span
    return any(a < y and x < b for x, y in spans)


@dataclass(frozen=True)
class _Written:
    text: str  # as written, for the report
    value: Decimal  # the value written, sign included, scale applied
    places: int  # decimal places written, less the scale (1.2 million -> -5)
    percent: bool
    signed: bool


def _numbers_in_answer(text: str) -> list[_Written]:
    masked = _masked_spans(text)
    found: list[_Written] = []
    for m in _NUMBER.finditer(text):
        if _inside(m.span("body"), masked):
            continue
        sign = m.group("sign")
        start = m.start()
        negative = False
        if sign:
            before = text[start - 1] if start > 0 else ""
            if before.isdigit():
                start += 1  # a range (2009-2013): the hyphen is not a minus sign
            elif before.isalpha() or before == "_":
                continue  # glued: MPEG-4
            else:
                negative = True
        if _glued_before(text, start - 1) or _glued_after(text, m.end()):
            continue
        body = m.group("body").replace(",", "")
        places = len(body.split(".")[1]) if "." in body else 0
        value = Decimal(body)
        written = text[start : m.end()].strip()
        scale = _SCALE.match(text, m.end())
        if scale and not m.group("pct"):
            exponent = _SCALES[scale.group(1).lower()]
            value = value.scaleb(exponent)
            places -= exponent
            written = text[start : scale.end()]
        found.append(
            _Written(
                text=written,
                value=-value if negative else value,
                places=places,
                percent=bool(m.group("pct")),
                signed=negative,
            )
        )
    return found


def _text_numbers(texts: Iterable[str]) -> set[Decimal]:
    out: set[Decimal] = set()
    for text in texts:
        for m in _TEXT_NUMBER.finditer(text):
            out.add(Decimal(m.group(0).replace(",", "")))
    return out


def _to_decimal(value: Any) -> Decimal | None:
    """Numeric cells: numbers and strings that spell one. A bool reads as 1 or 0, as the
    comparator reads it (SQLite returns 1/0 where DuckDB returns True/False), so a column
    sum of flags counts the True ones."""
    if value is None:
        return None
    if isinstance(value, int):  # bool included
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value)) if value == value and abs(value) != float("inf") else None
    if isinstance(value, Decimal):
        return value if value.is_finite() else None
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"[+-]?(?:\d+\.?\d*|\.\d+)", text, re.ASCII):
            return Decimal(text)
    return None


def _rounded(value: Decimal, places: int) -> set[Decimal]:
    """The value as a person may write it to ``places`` decimals (half-up or half-even)."""
    quantum = Decimal(1).scaleb(-places)
    try:
        return {value.quantize(quantum, ROUND_HALF_UP), value.quantize(quantum, ROUND_HALF_EVEN)}
    except InvalidOperation:  # more digits than the context holds: compare as is
        return {value}


class _NumberSupport:
    """Which written numbers the rows back, with the rounded candidates cached per precision."""

    def __init__(self, rows: Sequence[Sequence[Any]], texts: Iterable[str]) -> None:
        values: list[Decimal] = []
        sums: dict[int, Decimal] = {}
        non_numeric: set[int] = set()
        for row in rows:
            for c, cell in enumerate(row):
                d = _to_decimal(cell)
                if d is not None:
                    values.append(d)
                    sums[c] = sums.get(c, Decimal(0)) + d
                elif cell is not None:
                    non_numeric.add(c)
        # Rule: a number equals a value in the rows, the row count, or the sum of a numeric
        # column (every non-NULL value of it a number), each at the precision written.
        self._plain = [*values, Decimal(len(rows)), *(s for c, s in sums.items() if c not in non_numeric)]
        # Rule (percentages): also a share in the rows times 100 (0.3718 -> 37.18 -> "37.2%").
        self._shares = [v * 100 for v in values]
        self._cache: dict[tuple[bool, int], set[Decimal]] = {}
        # Rule: a number inside a text cell or the question is always supported.
        self._text = _text_numbers(texts)

    def _candidates(self, percent: bool, places: int) -> set[Decimal]:
        key = (percent, places)
        if key not in self._cache:
            pool = self._plain + self._shares if percent else self._plain
            out: set[Decimal] = set()
            for v in pool:
                out |= _rounded(v, places)
            self._cache[key] = out
        return self._cache[key]

    def supports(self, n: _Written) -> bool:
        if abs(n.value) in self._text:
            return True
        candidates = self._candidates(n.percent, n.places)
        if n.value in candidates:
            return True
        # Unsigned, a number may state a negative value's size ("fell by 5" for -5).
        return not n.signed and -n.value in candidates


# --------------------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------------------

# Names are checked only when marked: bold (**Rock** or __Rock__) or quoted ("Jazz", “Jazz”,
# 'Jazz'). A single quote opens only after a non-word character, so apostrophes (it's,
# customers') never start a quote.
_BOLD = re.compile(r"\*\*(?=\S)(?P<n>.+?)(?<=\S)\*\*|(?<!\w)__(?=\S)(?P<u>.+?)(?<=\S)__(?!\w)")
_QUOTED = re.compile(
    r'"(?P<d>[^"\n]{1,200})"|“(?P<c>[^”\n]{1,200})”|(?<![\w\'’])[\'‘](?P<s>[^\'’\n]{1,200})[\'’](?!\w)'
)
_STRIP = " \t\"'“”‘’*_.,;!?()[]"
_MAX_BOLD_WORDS = 6


def _norm(text: str) -> str:
    return " ".join(text.replace("’", "'").casefold().split())


def _bold_is_a_name(inner: str) -> bool:
    """Bold is also used for emphasis and labels, so skip spans with a digit, ending in ':'
    ("**Note:**"), or longer than six words."""
    stripped = inner.strip()
    if any(ch.isdigit() for ch in stripped) or stripped.endswith(":"):
        return False
    return len(stripped.split()) <= _MAX_BOLD_WORDS


def _names_in_answer(text: str) -> list[str]:
    names: list[tuple[int, str]] = []
    bold_spans: list[tuple[int, int]] = []
    for m in _BOLD.finditer(text):
        bold_spans.append(m.span())
        inner = m.group("n") if m.group("n") is not None else m.group("u")
        if _bold_is_a_name(inner):
            names.append((m.start(), inner))
    for m in _QUOTED.finditer(text):
        if _inside(m.span(), bold_spans):
            continue  # **"Rock"** is one name, read through the bold span
        inner = next(g for g in (m.group("d"), m.group("c"), m.group("s")) if g is not None)
        if _NUMBER.fullmatch(inner.strip()):
            continue  # "1297" in quotes is a number, and the number rule checks it
        names.append((m.start(), inner))
    names.sort()
    return [inner.strip(_STRIP) for _, inner in names if inner.strip(_STRIP)]


class _NameSupport:
    def __init__(self, texts: list[str], columns: Sequence[str], question: str) -> None:
        cells = {_norm(t) for t in texts}
        cells.discard("")
        # Rule: supported when a text cell, a column name or the question contains the name.
        self._haystack = "\x00".join([*cells, *(_norm(c) for c in columns), _norm(question)])
        # ...or the name contains a text cell (on word boundaries, cells of two or more
        # characters, so a one-letter code like 'M' does not back every name).
        self._cells = sorted((c for c in cells if len(c) >= 2), key=len, reverse=True)

    def supports(self, name: str) -> bool:
        n = _norm(name)
        if n in self._haystack:
            return True
        for cell in self._cells:
            if len(cell) > len(n):
                continue
            a = n.find(cell)
            while a != -1:
                b = a + len(cell)
                if (a == 0 or not n[a - 1].isalnum()) and (b == len(n) or not n[b].isalnum()):
                    return True
                a = n.find(cell, a + 1)
        return False


# --------------------------------------------------------------------------------------
# The check
# --------------------------------------------------------------------------------------


def _cell_texts(rows: Sequence[Sequence[Any]]) -> list[str]:
    """Text cells, with dates and datetimes read as their ISO text."""
    out: list[str] = []
    for row in rows:
        for cell in row:
            if isinstance(cell, str):
                out.append(cell)
            elif isinstance(cell, _dt.datetime):
                out.append(cell.isoformat(sep=" "))
            elif isinstance(cell, _dt.date | _dt.time):
                out.append(cell.isoformat())
    return out


def _dedupe(items: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return list(seen)


def check_faithfulness(
    answer: str | None,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]] | None,
    question: str = "",
) -> Faithfulness:
    """Checks every number and marked name in ``answer`` against ``rows`` (see the module doc).

    ``checked`` counts each number and name occurrence checked; the unsupported lists hold
    each distinct offending text once, in the order written.
    """
    if not answer:
        return Faithfulness(faithful=True)
    rows = list(rows or [])
    texts = _cell_texts(rows)
    prose = _CODE.sub(lambda m: " " * len(m.group(0)), answer)

    numbers = _numbers_in_answer(prose)
    number_support = _NumberSupport(rows, [*texts, question or ""])
    bad_numbers = [n.text for n in numbers if not number_support.supports(n)]

    names = _names_in_answer(prose)
    name_support = _NameSupport(texts, list(columns or []), question or "")
    bad_names = [name for name in names if not name_support.supports(name)]

    return Faithfulness(
        faithful=not bad_numbers and not bad_names,
        unsupported_numbers=_dedupe(bad_numbers),
        unsupported_entities=_dedupe(bad_names),
        checked=len(numbers) + len(names),
    )
