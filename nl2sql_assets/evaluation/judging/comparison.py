"""Row comparison: does a result set answer a case the way its gold rows do?

Two readings, both deterministic and model-free:

* **strict** (``compare_results``): same number of columns, compared by position (names
  ignored); the same rows as a multiset (duplicates count), in order only when the case
  says order matters.
* **lenient** (``compare_results_lenient``): every gold column is answered by a distinct
  result column in any position, and the rows still line up once the columns are mapped
  (the assignment is searched, so values swapped between rows still fail). Row counts must
  be equal and row order counts only when the case says so. Guardrails: at most
  ``column_cap(g)`` = max(2g, g+2) result columns, and with more than one row a constant
  result column (one value throughout, all-NULL included; 1 and 1.0 are one value) answers
  no gold column. One extra normalisation: a gold 'YYYY', 'YYYY-MM' or 'YYYY-MM-DD' string
  equals a predicted date string that starts with it ('2009' ~ '2009-01-01 00:00:00'); only
  the gold side may be the shorter label, and numbers are never read as years. A constant
  result column may answer a gold column that is itself constant (a count that is 4 on every
  row), never an informative one. A result that passes strictly passes leniently before any
  of this is applied, so lenient accepts everything strict accepts.

Strict names a result whose rows are the gold rows with the columns in another order
``column_order``, so a reader sees at once that lenient forgives it.

Cell equality (both readings):

* NULL equals only NULL: it is not 0 and not ''.
* NaN equals only NaN, and an infinity only the infinity of the same sign: they are values,
  never within a tolerance of a finite number.
* Numbers are equal within a tolerance read off the gold value (``gold_tolerance``): half a
  cent (``TOLERANCE``, 0.005, inclusive) for gold written to at most two decimals, the rule of
  suites whose gold rows are rounded to cents; half a unit of the last decimal for gold that
  carries more (0.125 vs 0.129 differ, 0.001 vs 0.004 differ). Float noise is always forgiven
  (a relative ``FLOAT_NOISE``: 0.30000000000000004 equals 0.3). Two Python ints compare
  exactly, so huge keys never collide through float rounding.
* A number equals a string that spells a number within the same tolerance ('2009' == 2009,
  '3.50' == 3.5), because engines disagree about which of the two they return.
* Two strings compare as strings, exactly: '2009' != '2009.0', 'rock' != 'Rock'.
* ``bool`` is read as the number 1 or 0 (SQLite has no booleans and returns 1/0 where DuckDB
  returns True/False), so True == True == 1 == '1'.
* ``Decimal`` is a number; ``date``/``datetime``/``time`` become their ISO text
  ('2009-01-01', '2009-01-01 00:00:00'), which is how SQLite stores them; ``bytes`` equal
  only equal bytes; anything else is compared through ``str()``.

Unordered comparison is a true multiset match under tolerance. Because tolerance and the
number-vs-string rule are not transitive, sorting alone cannot decide it: a sort-and-zip
fast path accepts the common case, and otherwise rows are grouped by their non-numeric
cells and paired by maximum bipartite matching (Hopcroft-Karp), with candidates found by a
binary search on one numeric column.
"""

from __future__ import annotations

import bisect
import datetime as _dt
import math
import numbers
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any

COMPARATOR_VERSION = 3
"""Bumped whenever a rule changes what passes; every case record carries it. 2: the numeric
tolerance follows the gold value's precision; a constant column may answer a constant gold
column; strict reports ``column_order``. 3: an infinity equals only the infinity of its sign
(no tolerance reaches it: a relative tolerance of an infinite value is infinite); a constant
result column may answer a gold column every value of which equals its one value (``'1'`` and
``'1.0'`` against 1.0), not only a gold column spelled alike throughout, so lenient accepts every
column order strict names."""

TOLERANCE = 0.005
"""Absolute numeric tolerance for gold written to at most two decimals (half a cent)."""

FLOAT_NOISE = 1e-9
"""Relative difference always forgiven: what float arithmetic leaves in the last digits."""

# A hair over the tolerance so that 3.5 vs 3.505 (a float difference of 0.00500000000000012)
# still counts as "within half a cent", as a person would read it.
_TOL = TOLERANCE + 1e-9

# How many column-assignment steps the lenient search may take before giving up; with the
# column cap (at most 2g or g+2 result columns) and pruning it never comes near this.
_SEARCH_LIMIT = 20_000

_INFINITIES = (math.inf, -math.inf)

# Reason codes (``Comparison.reason``).
MATCH = "match"
EMPTY_RESULT = "empty_result"  # gold has rows, the result none
EMPTY_GOLD = "empty_gold"  # gold has no rows, the result some
ROW_COUNT = "row_count"  # different row counts, with rows both missing and extra
MISSING_ROWS = "missing_rows"  # gold rows the result lacks (it may also carry others)
EXTRA_ROWS = "extra_rows"  # every gold row is there, plus more
MISSING_COLUMNS = "missing_columns"  # fewer columns than gold, or a gold column nobody answers
EXTRA_COLUMNS = "extra_columns"  # strict: more columns than gold
COLUMN_ORDER = "column_order"  # strict: the gold rows, with the columns in another order
CELL_DIFFERS = "cell_differs"  # one row differs in its values
TYPE_DIFFERS = "type_differs"  # one row differs only in kind: 2009 vs 'MMIX', '2009' vs '2009.0'
ORDER_DIFFERS = "order_differs"  # the right rows in the wrong order, when order matters
COLUMN_CAP = "column_cap"  # lenient: too many result columns
COLUMN_SEARCH = "column_search"  # lenient: the column-assignment search hit its limit
REASONS = (
    MATCH,
    EMPTY_RESULT,
    EMPTY_GOLD,
    ROW_COUNT,
    MISSING_ROWS,
    EXTRA_ROWS,
    MISSING_COLUMNS,
    EXTRA_COLUMNS,
    COLUMN_ORDER,
    CELL_DIFFERS,
    TYPE_DIFFERS,
    ORDER_DIFFERS,
    COLUMN_CAP,
    COLUMN_SEARCH,
)

def comparator_settings() -> dict[str, Any]:
    """The rules this comparator applies, as a report's settings record them."""
    return {
        "version": COMPARATOR_VERSION,
        "tolerance": "half a cent for gold written to at most two decimals, else half a unit of the gold "
                     "value's last decimal; relative float noise always equal",
        "tolerance_two_decimals": TOLERANCE,
        "float_noise": FLOAT_NOISE,
        "numbers_equal_spelled_numbers": True,
        "null_equals_only_null": True,
        "nan_and_infinities": "NaN equals only NaN, an infinity only the infinity of its sign",
        "lenient_column_cap": "max(2g, g+2)",
        "lenient_constant_columns": "answer only a gold column that is constant too (off on one row)",
        "lenient_period_labels": True,
    }


_SHOW = 3  # rows shown per list in a message
_SHOW_CHARS = 40  # characters shown per text value in a message


@dataclass(frozen=True)
class Comparison:
    """A verdict with a reason code and a sentence a person can act on.

    ``column_map`` (lenient only) gives, for each gold column in order, the 0-based result
    column that answered it; strict comparisons leave it None.
    """

    passed: bool
    reason: str
    message: str
    column_map: tuple[int, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if self.column_map is not None:
            data["column_map"] = list(self.column_map)
        return data


# --------------------------------------------------------------------------------------
# Cells: every value is normalised once into a small tuple (kind, number, payload, sort key).
# kind: 0 NULL, 1 number, 2 text (number set when the text spells one), 3 bytes.
# The sort key orders cells so that equal ones usually sit at the same rank (fast path
# only): NULL first, then numbers and numeric strings by value, then text, then bytes.
# --------------------------------------------------------------------------------------

_NULL, _NUM, _TEXT, _BYTES = 0, 1, 2, 3
Cell = tuple[int, Any, Any, tuple[int, Any]]
_NULL_CELL: Cell = (_NULL, None, None, (0, 0))

# A string "spells a number" when it is a plain decimal literal, nothing around it.
_SPELLED_INT = re.compile(r"[+-]?\d+", re.ASCII)
_SPELLED_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)

# Lenient only: gold period labels and the predicted dates they may stand for.
_PERIOD_LABEL = re.compile(r"\d{4}(?:-\d{2}(?:-\d{2})?)?", re.ASCII)
_DATE_TEXT = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?)?",
    re.ASCII,
)


def _spelled(text: str) -> int | float | None:
    if _SPELLED_INT.fullmatch(text):
        return int(text)
    if _SPELLED_NUMBER.fullmatch(text):
        return float(text)
    return None


def _num(number: int | float) -> Cell:
    return (_NUM, number, None, (1, number))


def _text(text: str) -> Cell:
    number = _spelled(text)
    return (_TEXT, number, text, (2, text) if number is None else (1, number))


def _cell(value: Any) -> Cell:
    """Normalise one database value (see the module docstring for the rules)."""
    kind = type(value)  # exact-type fast paths first: these are nearly all values
    if kind is str:
        return _text(value)
    if kind is int or kind is float:
        return _num(value)
    if value is None:
        return _NULL_CELL
    if isinstance(value, bool):
        return _num(int(value))
    if isinstance(value, int | float):
        return _num(value)
    if isinstance(value, str):
        return _text(str(value))
    if isinstance(value, Decimal):
        if value.is_nan():
            return _num(math.nan)
        if value.is_finite() and value == value.to_integral_value():
            return _num(int(value))
        return _num(float(value))
    if isinstance(value, _dt.datetime):
        return _text(value.isoformat(sep=" "))
    if isinstance(value, _dt.date | _dt.time):
        return _text(value.isoformat())
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
        return (_BYTES, None, data, (3, data))
    if isinstance(value, numbers.Integral):
        return _num(int(value))
    if isinstance(value, numbers.Real):
        return _num(float(value))
    return _text(str(value))


def _decimals(spelled: str) -> int:
    """Decimal places a number is written to: '523.06' 2, '0.125' 3, '1e-05' 5, '2009' 0."""
    mantissa, _, exponent = spelled.lower().partition("e")
    places = len(mantissa.partition(".")[2])
    if exponent:
        try:
            places -= int(exponent)
        except ValueError:
            return 0
    return max(places, 0)


@lru_cache(maxsize=65536)
def _tolerance(number: int | float, spelled: str | None) -> float:
    if spelled is None:
        if type(number) is int or number != number or number in (math.inf, -math.inf):
            return _TOL
        spelled = repr(float(number))
    places = _decimals(spelled)
    return _TOL if places <= 2 else 0.5 * 10.0**-places * (1 + 1e-9)


def gold_tolerance(gold: int | float | str) -> float:
    """The absolute tolerance a gold number is compared with: half a cent when it is written
    to at most two decimals, else half a unit of its last decimal (float noise aside)."""
    if isinstance(gold, str):
        number = _spelled(gold)
        if number is None:
            raise ValueError(f"{gold!r} spells no number")
        return _tolerance(number, gold)
    return _tolerance(gold, None)


def _num_eq(gold: int | float, got: int | float, spelled: str | None = None) -> bool:
    """``gold`` (written ``spelled`` when it came as text) against ``got``."""
    if gold == got:
        return True
    if type(gold) is int and type(got) is int:
        return False  # exact integers: no float rounding, no tolerance needed
    if gold != gold or got != got:  # NaN: equal only to NaN
        return gold != gold and got != got
    if gold in _INFINITIES or got in _INFINITIES:
        return False  # an infinity equals only itself (caught above): no tolerance reaches it
    try:
        diff = abs(gold - got)
    except OverflowError:  # an int too large for a float against a float
        return False
    if diff <= _TOL and diff <= _tolerance(gold, spelled):
        return True
    try:
        return diff <= FLOAT_NOISE * max(abs(gold), abs(got))
    except OverflowError:
        return False


@lru_cache(maxsize=8192)
def _label_matches(gold: str, got: str) -> bool:
    """Lenient only: gold 'YYYY' / 'YYYY-MM' / 'YYYY-MM-DD' equals a predicted date that starts
    with it. The date pattern puts every prefix of those shapes on a component boundary, so
    '2009' matches '2009-01-01' and '2009-01-01 00:00:00' but never '20091'."""
    return (
        len(got) > len(gold)
        and got.startswith(gold)
        and _PERIOD_LABEL.fullmatch(gold) is not None
        and _DATE_TEXT.fullmatch(got) is not None
    )


def _cell_eq(gold: Cell, got: Cell, lenient: bool) -> bool:
    kg, kh = gold[0], got[0]
    if kg == _TEXT and kh == _TEXT:
        # Two strings compare as strings ('2009' != '2009.0'); lenient adds period labels.
        return gold[2] == got[2] or (lenient and _label_matches(gold[2], got[2]))
    if kg == _NULL or kh == _NULL:
        return kg == kh
    if kg == _BYTES or kh == _BYTES:
        return kg == kh and gold[2] == got[2]
    # A number against a number, or against a string that spells one.
    ng, nh = gold[1], got[1]
    if ng is None or nh is None:
        return False
    return _num_eq(ng, nh, gold[2] if kg == _TEXT else None)


def _row_eq(gold: Sequence[Cell], got: Sequence[Cell], lenient: bool) -> bool:
    return all(_cell_eq(a, b, lenient) for a, b in zip(gold, got, strict=True))


def _is_dateish(text: str) -> bool:
    return _PERIOD_LABEL.fullmatch(text) is not None or _DATE_TEXT.fullmatch(text) is not None


def _token(cell: Cell, lenient: bool) -> Any:
    """A grouping token with the property: equal cells have equal tokens.

    Numbers and numeric strings share the token "N" (they may be equal across kinds); in the
    lenient reading period labels and dates join them. Everything else is its own token.
    """
    kind = cell[0]
    if kind == _NULL:
        return None
    if cell[1] is not None:
        return "N"
    if kind == _TEXT:
        if lenient and _is_dateish(cell[2]):
            return "N"
        return ("T", cell[2])
    return ("B", cell[2])


def _window_value(cell: Cell) -> float:
    """For "N" cells: a number such that equal cells are within the tolerance of each other
    (a date or period label contributes its year). Raises OverflowError for huge ints."""
    if cell[1] is not None:
        return float(cell[1])
    return float(cell[2][:4])


# --------------------------------------------------------------------------------------
# Multiset matching
# --------------------------------------------------------------------------------------


def _hopcroft_karp(adj: list[list[int]], n_right: int) -> list[int]:
    """Maximum bipartite matching; returns, per left vertex, its right vertex or -1."""
    n_left = len(adj)
    match_l = [-1] * n_left
    match_r = [-1] * n_right
    for u in range(n_left):  # greedy start: most graphs here are nearly perfect already
        for v in adj[u]:
            if match_r[v] == -1:
                match_l[u] = v
                match_r[v] = u
                break
    inf = n_left + 1
    while True:
        dist = [inf] * n_left
        queue = [u for u in range(n_left) if match_l[u] == -1]
        for u in queue:
            dist[u] = 0
        found = False
        head = 0
        while head < len(queue):
            u = queue[head]
            head += 1
            for v in adj[u]:
                w = match_r[v]
                if w == -1:
                    found = True
                elif dist[w] == inf:
                    dist[w] = dist[u] + 1
                    queue.append(w)
        if not found:
            return match_l
        augmented = False
        pos = [0] * n_left
        for start in range(n_left):
            if match_l[start] != -1 or dist[start] != 0:
                continue
            stack = [start]
            while stack:
                u = stack[-1]
                edges = adj[u]
                moved = False
                while pos[u] < len(edges):
                    v = edges[pos[u]]
                    w = match_r[v]
                    if w == -1:
                        for x in stack:  # flip the path: each vertex takes the edge it stands on
                            vx = adj[x][pos[x]]
                            match_l[x] = vx
                            match_r[vx] = x
                        stack = []
                        augmented = True
                        moved = True
                        break
                    if dist[w] == dist[u] + 1:
                        stack.append(w)
                        moved = True
                        break
                    pos[u] += 1
                if not moved:
                    dist[u] = inf  # a dead end for the rest of this phase
                    stack.pop()
                    if stack:
                        pos[stack[-1]] += 1
        if not augmented:
            return match_l


def _match(
    gold: list[tuple[Cell, ...]], got: list[tuple[Cell, ...]], lenient: bool
) -> tuple[list[int], list[int], list[tuple[int, int]]]:
    """Pairs gold rows with equal result rows, as many as possible.

    Returns (unmatched gold indices, unmatched result indices, matched pairs).
    """
    n, m = len(gold), len(got)
    if n == m:
        # Fast path: sort both sides the same way and zip. Any pairing that holds is a valid
        # matching, so a success here is final; a failure only means "look harder".
        gk = sorted(range(n), key=lambda i: tuple(c[3] for c in gold[i]))
        hk = sorted(range(m), key=lambda i: tuple(c[3] for c in got[i]))
        if all(_row_eq(gold[i], got[j], lenient) for i, j in zip(gk, hk, strict=True)):
            return [], [], list(zip(gk, hk, strict=True))

    groups: dict[tuple[Any, ...], tuple[list[int], list[int]]] = {}
    for i, row in enumerate(gold):
        groups.setdefault(tuple(_token(c, lenient) for c in row), ([], []))[0].append(i)
    for j, row in enumerate(got):
        key = tuple(_token(c, lenient) for c in row)
        if key in groups:
            groups[key][1].append(j)

    matched_g: set[int] = set()
    matched_h: set[int] = set()
    pairs: list[tuple[int, int]] = []
    for key, (gi, hj) in groups.items():
        if not gi or not hj:
            continue
        numeric_cols = [p for p, t in enumerate(key) if t == "N"]
        if not numeric_cols:
            # Every cell is text/NULL/bytes and equal by token: any pairing works.
            for i, j in zip(gi, hj, strict=False):
                pairs.append((i, j))
            continue
        window = _pick_window(numeric_cols, gold, gi, got, hj)
        adj: list[list[int]] = []
        if window is None:
            for i in gi:
                adj.append([b for b, j in enumerate(hj) if _row_eq(gold[i], got[j], lenient)])
        else:
            order = sorted(range(len(hj)), key=lambda b: _window_value(got[hj[b]][window]))
            values = [_window_value(got[hj[b]][window]) for b in order]
            for i in gi:
                w = _window_value(gold[i][window])
                half = max(_TOL, 2 * FLOAT_NOISE * abs(w))  # the widest any tolerance can be
                lo = bisect.bisect_left(values, w - half)
                hi = bisect.bisect_right(values, w + half)
                adj.append([order[x] for x in range(lo, hi) if _row_eq(gold[i], got[hj[order[x]]], lenient)])
        match_l = _hopcroft_karp(adj, len(hj))
        for a, b in enumerate(match_l):
            if b != -1:
                pairs.append((gi[a], hj[b]))
    for i, j in pairs:
        matched_g.add(i)
        matched_h.add(j)
    pairs.sort()
    return (
        [i for i in range(n) if i not in matched_g],
        [j for j in range(m) if j not in matched_h],
        pairs,
    )


def _pick_window(
    cols: list[int], gold: list[tuple[Cell, ...]], gi: list[int], got: list[tuple[Cell, ...]], hj: list[int]
) -> int | None:
    """The numeric column with the most distinct gold values, free of NaN and of ints too
    large for a float (binary search needs ordered floats); None means compare every pair."""
    best, best_distinct = None, 0
    for p in cols:
        try:
            gv = [_window_value(gold[i][p]) for i in gi]
            hv = [_window_value(got[j][p]) for j in hj]
        except OverflowError:
            continue
        if any(v != v or v in _INFINITIES for v in gv) or any(v != v or v in _INFINITIES for v in hv):
            continue  # a window around an infinity is every value: compare every pair instead
        distinct = len(set(gv))
        if distinct > best_distinct:
            best, best_distinct = p, distinct
    return best


def _rows_match(
    gold: list[tuple[Cell, ...]], got: list[tuple[Cell, ...]], order_matters: bool, lenient: bool
) -> bool:
    if len(gold) != len(got):
        return False
    if order_matters:
        return all(_row_eq(a, b, lenient) for a, b in zip(gold, got, strict=True))
    unmatched_g, _, _ = _match(gold, got, lenient)
    return not unmatched_g


# --------------------------------------------------------------------------------------
# Messages
# --------------------------------------------------------------------------------------


def _fmt(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        text = value if len(value) <= _SHOW_CHARS else value[: _SHOW_CHARS - 1] + "…"
        return repr(text)
    text = repr(value)
    return text if len(text) <= _SHOW_CHARS else text[: _SHOW_CHARS - 1] + "…"


def _fmt_row(row: Sequence[Any]) -> str:
    return "[" + ", ".join(_fmt(v) for v in row) + "]"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _list_rows(label: str, indices: list[int], rows: Sequence[Sequence[Any]]) -> str:
    """'2 rows missing: [..], [..]' or '1 extra row: [..]', at most ``_SHOW`` rows listed."""
    shown = ", ".join(_fmt_row(rows[i]) for i in indices[:_SHOW])
    more = f" (+{len(indices) - _SHOW} more)" if len(indices) > _SHOW else ""
    head = (
        f"{_plural(len(indices), 'row')} missing"
        if label == "missing"
        else (f"{len(indices)} extra {'row' if len(indices) == 1 else 'rows'}")
    )
    return f"{head}: {shown}{more}"


def _kind_name(cell: Cell) -> str:
    return {_NULL: "NULL", _NUM: "number", _TEXT: "text", _BYTES: "bytes"}[cell[0]]


def _is_type_difference(gold: Cell, got: Cell) -> bool:
    """Unequal cells that differ in kind rather than value: a number against text that
    spells no number, bytes against anything else, or two strings spelling one number."""
    if gold[0] == _NULL or got[0] == _NULL:
        return False
    if gold[0] == _TEXT and got[0] == _TEXT:
        return gold[1] is not None and got[1] is not None and _num_eq(gold[1], got[1], gold[2])
    if gold[0] == _BYTES or got[0] == _BYTES:
        return gold[0] != got[0]
    return gold[1] is None or got[1] is None


def _describe_pair(
    gi: int,
    hj: int,
    g_raw: Sequence[Any],
    h_raw: Sequence[Any],
    g: tuple[Cell, ...],
    h: tuple[Cell, ...],
    lenient: bool,
) -> tuple[str, str]:
    """Reason and message for one gold row against the one result row left for it."""
    cols = [p for p in range(len(g)) if not _cell_eq(g[p], h[p], lenient)]
    reason = TYPE_DIFFERS if all(_is_type_difference(g[p], h[p]) for p in cols) else CELL_DIFFERS
    where = f"row {gi + 1}" if gi == hj else f"gold row {gi + 1} (result row {hj + 1})"

    if len(cols) == 1:
        p = cols[0]
        detail = f"expected {_fmt(g_raw[p])}, got {_fmt(h_raw[p])}"
        if reason == TYPE_DIFFERS:
            detail += (
                f" ({_kind_name(g[p])} vs {_kind_name(h[p])}; two strings compare as text)"
                if (g[p][0] == h[p][0])
                else f" ({_kind_name(g[p])} vs {_kind_name(h[p])})"
            )
        return reason, f"{where}, column {p + 1}: {detail}"
    listed = ", ".join(str(p + 1) for p in cols)
    return reason, f"{where}, columns {listed}: expected {_fmt_row(g_raw)}, got {_fmt_row(h_raw)}"


def _diagnose(
    g_raw: Sequence[Sequence[Any]],
    h_raw: Sequence[Sequence[Any]],
    g: list[tuple[Cell, ...]],
    h: list[tuple[Cell, ...]],
    order_matters: bool,
    lenient: bool,
) -> tuple[bool, str, str]:
    """Full verdict on two row lists of equal width: (passed, reason, message)."""
    n, m = len(g), len(h)
    if order_matters and n == m and all(_row_eq(a, b, lenient) for a, b in zip(g, h, strict=True)):
        return True, MATCH, f"{_plural(n, 'row')} match in order"
    unmatched_g, unmatched_h, _ = _match(g, h, lenient)
    if n != m:
        head = f"expected {_plural(n, 'row')}, got {m}"
        parts = []
        if unmatched_g:
            parts.append(_list_rows("missing", unmatched_g, g_raw))
        if unmatched_h:
            parts.append(_list_rows("extra", unmatched_h, h_raw))
        reason = ROW_COUNT if unmatched_g and unmatched_h else (MISSING_ROWS if unmatched_g else EXTRA_ROWS)
        return False, reason, head + ": " + "; ".join(parts)
    if not unmatched_g:
        if not order_matters:
            return True, MATCH, f"{_plural(n, 'row')} match (order ignored)"
        first = next(i for i in range(n) if not _row_eq(g[i], h[i], lenient))
        return (
            False,
            ORDER_DIFFERS,
            (
                f"the same rows in another order; first out of place at row {first + 1}: "
                f"expected {_fmt_row(g_raw[first])}, got {_fmt_row(h_raw[first])}"
            ),
        )
    if len(unmatched_g) == 1:
        gi, hj = unmatched_g[0], unmatched_h[0]
        reason, message = _describe_pair(gi, hj, g_raw[gi], h_raw[hj], g[gi], h[hj], lenient)
        if order_matters and any(i != gi and not _row_eq(g[i], h[i], lenient) for i in range(n)):
            message += "; other rows are also out of order"
        return False, reason, message
    return (
        False,
        MISSING_ROWS,
        _list_rows("missing", unmatched_g, g_raw) + "; " + _list_rows("extra", unmatched_h, h_raw),
    )


# --------------------------------------------------------------------------------------
# Input handling
# --------------------------------------------------------------------------------------


def _as_rows(rows: Sequence[Sequence[Any]] | None, side: str) -> list[Sequence[Any]]:
    if rows is None:
        return []
    if isinstance(rows, str | bytes) or not isinstance(rows, Sequence):
        raise TypeError(f"{side} rows must be a list of rows, not {type(rows).__name__}")
    out = list(rows)
    for i, row in enumerate(out):
        if isinstance(row, str | bytes) or not isinstance(row, Sequence):
            raise TypeError(
                f"{side} row {i + 1} must be a list of values in column order, not {type(row).__name__}"
                + (" (use rows_from_dicts for {column: value} rows)" if isinstance(row, Mapping) else "")
            )
    if out:
        width = len(out[0])
        for i, row in enumerate(out):
            if len(row) != width:
                raise ValueError(f"{side} row {i + 1} has {len(row)} values; row 1 has {width}")
    return out


def _cells(rows: list[Sequence[Any]]) -> list[tuple[Cell, ...]]:
    return [tuple(_cell(v) for v in row) for row in rows]


def rows_from_dicts(rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """Turns suite rows stored as ``{column: value}`` maps into (columns, value lists).

    The first row's key order is the column order; every row must have the same keys.
    """
    if not rows:
        return [], []
    first = rows[0]
    if not isinstance(first, Mapping):
        raise TypeError(f"row 1 must be a {{column: value}} mapping, not {type(first).__name__}")
    columns = list(first.keys())
    wanted = set(columns)
    out: list[list[Any]] = []
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise TypeError(f"row {i + 1} must be a {{column: value}} mapping, not {type(row).__name__}")
        if len(row) != len(columns) or set(row.keys()) != wanted:
            raise ValueError(f"row {i + 1} has columns {list(row.keys())}; row 1 has {columns}")
        out.append([row[c] for c in columns])
    return columns, out


# --------------------------------------------------------------------------------------
# Strict
# --------------------------------------------------------------------------------------


def _empty_verdict(g: list[Sequence[Any]], h: list[Sequence[Any]]) -> Comparison | None:
    if not g and not h:
        return Comparison(True, MATCH, "both have no rows")
    if not h:
        return Comparison(False, EMPTY_RESULT, f"the result has no rows; expected {_plural(len(g), 'row')}")
    if not g:
        return Comparison(False, EMPTY_GOLD, f"gold has no rows; the result has {_plural(len(h), 'row')}")
    return None


def explain_strict(
    gold: Sequence[Sequence[Any]] | None, got: Sequence[Sequence[Any]] | None, order_matters: bool = False
) -> Comparison:
    """The strict verdict, with its reason code and a message naming what differs."""
    g_raw, h_raw = _as_rows(gold, "gold"), _as_rows(got, "result")
    return _strict(g_raw, h_raw, _cells(g_raw), _cells(h_raw), order_matters)


def _strict(
    g_raw: list[Sequence[Any]],
    h_raw: list[Sequence[Any]],
    g: list[tuple[Cell, ...]],
    h: list[tuple[Cell, ...]],
    order_matters: bool,
) -> Comparison:
    empty = _empty_verdict(g_raw, h_raw)
    if empty is not None:
        return empty
    gw, hw = len(g_raw[0]), len(h_raw[0])
    if gw != hw:
        reason = MISSING_COLUMNS if hw < gw else EXTRA_COLUMNS
        return Comparison(
            False,
            reason,
            f"the result has {_plural(hw, 'column')}; gold has {gw} (strict compares columns by position)",
        )
    passed, reason, message = _diagnose(g_raw, h_raw, g, h, order_matters, False)
    if not passed and gw > 1 and len(g) == len(h):
        moved = _column_permutation(g, h, order_matters)
        if moved is not None:
            pairs = ", ".join(f"{j + 1}<-{k + 1}" for j, k in enumerate(moved))
            return Comparison(False, COLUMN_ORDER,
                              f"the gold rows, with the columns in another order (gold<-result: {pairs}); strict "
                              "compares columns by position, lenient accepts it")
    return Comparison(passed, reason, message)


def _column_permutation(g: list[tuple[Cell, ...]], h: list[tuple[Cell, ...]], order_matters: bool
                        ) -> tuple[int, ...] | None:
    """A reordering of the result's columns (not the identity) under which its rows equal the
    gold rows by the strict rules, or None."""
    width = len(g[0])
    columns_g = [[(row[c],) for row in g] for c in range(width)]
    columns_h = [[(row[c],) for row in h] for c in range(width)]
    candidates = [[k for k in range(width) if not _match(columns_g[j], columns_h[k], False)[0]]
                  for j in range(width)]
    if any(not c for c in candidates):
        return None
    steps = 0

    def search(chosen: list[int]) -> tuple[int, ...] | None:
        nonlocal steps
        j = len(chosen)
        if j == width:
            if chosen != list(range(width)) and _rows_match(g, _project(h, chosen), order_matters, False):
                return tuple(chosen)
            return None
        for k in candidates[j]:
            steps += 1
            if k in chosen or steps > _SEARCH_LIMIT:
                continue
            found = search([*chosen, k])
            if found is not None:
                return found
        return None

    return search([])


def compare_results(
    gold: Sequence[Sequence[Any]] | None, got: Sequence[Sequence[Any]] | None, order_matters: bool = False
) -> bool:
    """Strict execution match: same columns in the same order, same rows (see the module doc)."""
    return explain_strict(gold, got, order_matters).passed


# --------------------------------------------------------------------------------------
# Lenient
# --------------------------------------------------------------------------------------


def column_cap(gold_columns: int) -> int:
    """The most result columns a lenient match allows for ``gold_columns`` gold columns."""
    return max(2 * gold_columns, gold_columns + 2)


def _plain_column(col: list[tuple[Cell]], gold: bool = False) -> bool:
    """True when the column holds only NULLs, real numbers (no NaN) and text that spells no
    number and is no date, and (gold side) its numbers share one tolerance: then equality is
    exact or pure tolerance within each sort class, and pairing the two sorted columns is
    optimal (the classic interval-matching argument)."""
    tolerances = set()
    for (cell,) in col:
        kind = cell[0]
        if kind == _NUM:
            if cell[1] != cell[1]:
                return False
            if gold:
                tolerances.add(_tolerance(cell[1], None))
                if len(tolerances) > 1:
                    return False
        elif kind == _TEXT:
            if cell[1] is not None or _is_dateish(cell[2]):
                return False
        elif kind == _BYTES:
            return False
    return True


def _columns_equal_as_multisets(
    g_col: list[tuple[Cell]],
    h_col: list[tuple[Cell]],
    g_tokens: Counter,
    h_tokens: Counter,
    g_sorted: list[int],
    h_sorted: list[int],
    plain: bool,
) -> bool:
    if g_tokens != h_tokens:  # equal cells share tokens, so the token counts must agree
        return False
    if all(_cell_eq(g_col[i][0], h_col[j][0], True) for i, j in zip(g_sorted, h_sorted, strict=True)):
        return True
    if plain:  # the sorted pairing was optimal, so no pairing exists
        return False
    unmatched, _, _ = _match(g_col, h_col, True)
    return not unmatched


def _constant(col: list[tuple[Cell]]) -> bool:
    """Whether a column holds one value throughout, read as values compare (1, 1.0 and '1' are one
    value; all-NULL is one value)."""
    first = col[0][0]
    return all(_cell_eq(first, cell, False) and _cell_eq(cell, first, False) for (cell,) in col)


def _all_equal(col: list[tuple[Cell]], value: Cell) -> bool:
    """Whether every cell of a gold column equals ``value`` (the lenient cell rules)."""
    return all(_cell_eq(cell, value, True) for (cell,) in col)


def _sample_values(rows: Sequence[Sequence[Any]], col: int) -> str:
    seen: list[Any] = []
    for row in rows:
        if row[col] not in seen:
            seen.append(row[col])
        if len(seen) == 2:
            break
    return ", ".join(_fmt(v) for v in seen)


def _project(rows: list[tuple[Cell, ...]], cols: Sequence[int]) -> list[tuple[Cell, ...]]:
    return [tuple(row[c] for c in cols) for row in rows]


def explain_lenient(
    gold: Sequence[Sequence[Any]] | None, got: Sequence[Sequence[Any]] | None, order_matters: bool = False
) -> Comparison:
    """The lenient verdict; ``column_map`` names the result column used for each gold column."""
    g_raw, h_raw = _as_rows(gold, "gold"), _as_rows(got, "result")
    g, h = _cells(g_raw), _cells(h_raw)
    strict = _strict(g_raw, h_raw, g, h, order_matters)
    if strict.passed:  # lenient is a superset of strict by construction
        width = len(g_raw[0]) if g_raw else 0
        return Comparison(True, MATCH, strict.message, tuple(range(width)))
    if not g_raw or not h_raw:
        return strict
    verdict = _lenient(g_raw, h_raw, g, h, order_matters)
    if not verdict.passed and strict.reason in (CELL_DIFFERS, TYPE_DIFFERS):
        # Columns in place and a single row off: strict's pinpointed cell says it best.
        return Comparison(False, strict.reason, strict.message, tuple(range(len(g_raw[0]))))
    return verdict


def _lenient(
    g_raw: list[Sequence[Any]],
    h_raw: list[Sequence[Any]],
    g: list[tuple[Cell, ...]],
    h: list[tuple[Cell, ...]],
    order_matters: bool,
) -> Comparison:
    n, m = len(g_raw), len(h_raw)
    gw, hw = len(g_raw[0]), len(h_raw[0])
    if n != m:
        return Comparison(False, ROW_COUNT, f"expected {_plural(n, 'row')}, got {m}")
    cap = column_cap(gw)
    if hw > cap:
        return Comparison(
            False,
            COLUMN_CAP,
            f"the result has {hw} columns; at most {cap} are allowed for {_plural(gw, 'gold column')}",
        )
    if hw < gw:
        return Comparison(False, MISSING_COLUMNS, f"the result has {_plural(hw, 'column')}; gold has {gw}")

    g_cols = [[(row[c],) for row in g] for c in range(gw)]
    h_cols = [[(row[c],) for row in h] for c in range(hw)]
    # No constant columns: with more than one row, a column holding one value (all-NULL
    # included) says nothing about the gold column, e.g. a hard-coded literal.
    constant = [n > 1 and _constant(col) for col in h_cols]
    g_tok = [Counter(_token(c[0], True) for c in col) for col in g_cols]
    h_tok = [Counter(_token(c[0], True) for c in col) for col in h_cols]
    g_srt = [sorted(range(n), key=lambda i, col=col: col[i][0][3]) for col in g_cols]
    h_srt = [sorted(range(n), key=lambda i, col=col: col[i][0][3]) for col in h_cols]
    g_plain = [_plain_column(col, gold=True) for col in g_cols]
    h_plain = [_plain_column(col) for col in h_cols]

    def same_values(j: int, k: int) -> bool:
        return _columns_equal_as_multisets(
            g_cols[j], h_cols[k], g_tok[j], h_tok[k], g_srt[j], h_srt[k], g_plain[j] and h_plain[k]
        )

    # ... unless every value of the gold column is that one value too: then the gold column tells
    # no more than the result's does (a count that is 4 on every row; '1' and '1.0' against 1.0).
    candidates = [[k for k in range(hw) if (not constant[k] or _all_equal(g_cols[j], h_cols[k][0][0]))
                   and same_values(j, k)] for j in range(gw)]
    for j, cands in enumerate(candidates):
        if not cands:
            return Comparison(
                False,
                MISSING_COLUMNS,
                f"gold column {j + 1} (values like {_sample_values(g_raw, j)}) is answered by no result column",
            )

    # Backtracking over assignments, most constrained gold column first; each partial
    # assignment must already line up on the columns it maps (a cheap, strong prune).
    order = sorted(range(gw), key=lambda j: len(candidates[j]))
    steps = 0
    first_full: list[int] | None = None

    def search(depth: int, chosen: list[int]) -> list[int] | None:
        nonlocal steps, first_full
        if depth == gw:
            mapping = [0] * gw
            for j, k in zip(order, chosen, strict=True):
                mapping[j] = k
            if first_full is None:
                first_full = mapping
            if _rows_match(g, _project(h, mapping), order_matters, True):
                return mapping
            return None
        j = order[depth]
        for k in candidates[j]:
            if k in chosen:
                continue
            steps += 1
            if steps > _SEARCH_LIMIT:
                return None
            chosen.append(k)
            if depth + 1 < gw and depth > 0:
                cols_g = order[: depth + 1]
                if not _rows_match(_project(g, cols_g), _project(h, chosen), order_matters, True):
                    chosen.pop()
                    continue
            found = search(depth + 1, chosen)
            if found is not None:
                return found
            chosen.pop()
        return None

    mapping = search(0, [])
    if mapping is not None:
        pairs = ", ".join(f"{j + 1}<-{k + 1}" for j, k in enumerate(mapping))
        return Comparison(
            True,
            MATCH,
            f"gold columns answered by result columns (gold<-result: {pairs}); rows line up",
            tuple(mapping),
        )
    if steps > _SEARCH_LIMIT:
        return Comparison(
            False,
            COLUMN_SEARCH,
            f"gave up after {_SEARCH_LIMIT} column assignments without finding one whose rows line up",
        )
    report = first_full or _any_distinct_assignment(candidates)
    if report is None:
        return Comparison(
            False,
            MISSING_COLUMNS,
            (
                "the gold columns cannot each be answered by a distinct result column "
                f"(candidates per gold column: {[[k + 1 for k in c] for c in candidates]})"
            ),
        )
    projected_raw = [[row[k] for k in report] for row in h_raw]
    _, reason, message = _diagnose(g_raw, projected_raw, g, _project(h, report), order_matters, True)
    shown = ", ".join(str(k + 1) for k in report)
    return Comparison(
        False,
        reason,
        f"each gold column has a matching result column ({shown}), but the rows do not line up: {message}",
        tuple(report),
    )


def _any_distinct_assignment(candidates: list[list[int]]) -> list[int] | None:
    n_right = 1 + max((k for c in candidates for k in c), default=-1)
    match = _hopcroft_karp(candidates, n_right)
    return None if -1 in match else match


def compare_results_lenient(
    gold: Sequence[Sequence[Any]] | None, got: Sequence[Sequence[Any]] | None, order_matters: bool = False
) -> bool:
    """Lenient execution match (see the module doc); accepts everything ``compare_results`` does."""
    return explain_lenient(gold, got, order_matters).passed
