"""Small databases built for what a query leans on (its ``focus``), rather than drawn at random.

A database here is a few real rows of each table the query reads (and of the tables those point
at), edited by *strategies*, each one kind of data that tells near-miss SQL apart:

- ``literal``: the values the query compares columns with, and what sits beside each (one either
  side, other letter cases, a LIKE pattern's wildcards filled in);
- ``threshold``: for an aggregate compared with a number, a group of exactly that many rows (or one
  either side), copies of one row under fresh keys (the table's row cap does not apply);
- ``join``: rows without a partner on each side of a join (a parent no row points at; a NULL
  foreign key where the column allows it);
- ``order``: ties on the sort keys (equal values; groups of equal size under an aggregate sort);
- ``distinct``: repeated values and rows (copies under fresh keys; one row's name given to another);
- ``null``: NULL in the nullable columns a predicate or an aggregate reads;
- ``spread``: numbers an aggregate reads pushed off their usual value (a quantity that is not 1).

Keys stay unique and foreign keys point at rows that are there: a copy gets a fresh key (a fresh
parent row where the key is itself a reference), a reference whose parent was not drawn is pointed
at one that was (the same one for every row that shared it, so a group stays a group), and the
database itself refuses a row that breaks a constraint. Deterministic for a given random stream.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from nl2sql_assets.evaluation.neighbours.focus import Focus, LikePattern, resolve
from nl2sql_assets.evaluation.neighbours.formats import Source, Table, in_format, moment_of

#: the most rows a group built for a threshold may hold (a larger threshold is left to the data)
MAX_GROUP = 5000
#: rows drawn of each table before the strategies edit them
SIZES = (1, 2, 2, 3, 4, 6, 10)


class Builder:
    """The rows of one database under construction, with fresh keys on demand."""

    def __init__(self, source: Source, focus: Focus, rng: random.Random, turn: int | None = None,
                 memo: dict[Any, Any] | None = None) -> None:
        self.source = source
        self.focus = focus
        self.rng = rng
        #: what ``values`` worked out, kept across the databases of one search (same source, same focus)
        self.memo = memo if memo is not None else {}
        #: the witness search's first candidates try each strategy in turn: ``turn`` makes that
        #: strategy's choices systematic (a threshold's exact size, then one above, one below)
        self.turn = turn
        self.by_name = {t.name: t for t in source.tables}
        names = {t.name.lower() for t in source.tables}
        read = {t for t in focus.tables if t in names}
        if not read or read != focus.tables:  # a view or an unknown name: every table may matter
            read = names
        scope = set(read)
        for table in source.tables:  # what the tables read point at, so every reference can hold
            if table.name.lower() in scope:
                scope |= {parent.lower() for parent, _ in table.references.values()}
        while True:  # references of references
            grown = scope | {parent.lower() for t in source.tables if t.name.lower() in scope
                             for parent, _ in t.references.values()}
            if grown == scope:
                break
            scope = grown
        self.read = [t for t in source.tables if t.name.lower() in read]
        self.scope = [t for t in source.tables if t.name.lower() in scope]
        self.rows: dict[str, list[list[Any]]] = {}
        self._next: dict[tuple[str, int], int] = {}

    # -------------------------------------------------------------- drawing and copying

    def draw(self) -> None:
        """A few real rows of each table in scope."""
        for table in self.scope:
            size = min(len(table.rows), self.rng.choice(SIZES))
            self.rows[table.name] = [list(r) for r in self.rng.sample(table.rows, size)] if size else []

    def fresh(self, table: Table, index: int, template: Any) -> Any:
        """A key value no row of ``table`` has yet."""
        column = table.columns[index]
        key = (table.name, index)
        if key not in self._next:
            known = [r[index] for r in table.rows] + [r[index] for r in self.rows.get(table.name, [])]
            numbers = [v for v in known if isinstance(v, int) and not isinstance(v, bool)]
            self._next[key] = max(numbers, default=0) + 1
        n = self._next[key]
        self._next[key] += 1
        if column.integer or isinstance(template, int) or template is None:
            return n
        return f"{template}~{n}"

    def copy_row(self, table: Table, row: Sequence[Any], depth: int = 0) -> list[Any] | None:
        """``row`` again under a fresh key: a key column of its own gets a new value; a key that is
        a reference points at a fresh copy of a parent row (None where that cannot be made). A
        key column the focus groups by is the last one changed (the copy stays in its group)."""
        copy = list(row)
        keys = [i for i, c in enumerate(table.columns) if c.primary_key]
        if not keys:
            return copy
        own = [i for i in keys if table.columns[i].name not in table.references]
        if own:
            i = self.rng.choice(own)
            copy[i] = self.fresh(table, i, row[i])
            return copy
        if depth > 3:
            return None
        grouped = {name for _, name in self.focus.distinct_columns}
        free = [i for i in keys if table.columns[i].name.lower() not in grouped]
        i = self.rng.choice(free or keys)
        parent_name, parent_column = table.references[table.columns[i].name]
        parent = self.by_name.get(parent_name)
        if parent is None or parent is table:
            return None
        pool = self.rows.get(parent.name) or [list(r) for r in parent.rows[:1]]
        if not pool:
            return None
        new_parent = self.copy_row(parent, self.rng.choice(pool), depth + 1)
        if new_parent is None:
            return None
        self.rows.setdefault(parent.name, []).append(new_parent)
        copy[i] = new_parent[parent.index(parent_column)]
        return copy

    def anchor(self, table: Table, row: list[Any], depth: int = 0) -> None:
        """The rows ``row`` points at made part of the database (from the source's rows) where they
        were not drawn, or ``row`` pointed at one that was, so ``row`` and its copies keep parents
        of their own: a group stays together and a copy's fresh parent never takes the place of
        the template's."""
        for column, (parent_name, parent_column) in table.references.items():
            parent = self.by_name.get(parent_name)
            i = table.index(column)
            if parent is None or parent is table or row[i] is None or depth > 3:
                continue
            key = parent.index(parent_column)
            kept = self.rows.setdefault(parent.name, [])
            if any(r[key] == row[i] for r in kept):
                continue
            found = next((list(r) for r in parent.rows if r[key] == row[i]), None)
            if found is None:  # not among the rows read of the source: one that is
                found = list(self.rng.choice(kept)) if kept else (list(parent.rows[0]) if parent.rows else None)
                if found is None:
                    continue
                row[i] = found[key]
                if any(r[key] == row[i] for r in kept):
                    continue
            kept.append(found)
            self.anchor(parent, found, depth + 1)

    def copies(self, table: Table, template: list[Any], count: int) -> list[list[Any]]:
        self.anchor(table, template)
        out = []
        for _ in range(count):
            copy = self.copy_row(table, template)
            if copy is None:
                break
            out.append(copy)
        return out

    def values(self, table: Table, index: int, wanted: Sequence[Any]) -> tuple[list[Any], list[Any]]:
        """``values_for``, worked out once per column and values."""
        key = (table.name, index, tuple((type(v).__name__, v) for v in wanted))
        if key not in self.memo:
            self.memo[key] = values_for(table, index, wanted)
        return self.memo[key]

    # -------------------------------------------------------------- finishing

    def finish(self) -> dict[str, list[tuple[Any, ...]]]:
        """The rows, every reference pointed at a row that is there: a value whose parent row was
        not drawn is given one drawn parent, the same for every row that had it."""
        out: dict[str, list[tuple[Any, ...]]] = {}
        for table in self.scope:
            rows = self.rows.get(table.name, [])
            for column, (parent, parent_column) in table.references.items():
                if parent not in self.by_name:
                    continue
                i = table.index(column)
                nullable = not table.columns[i].not_null
                if parent == table.name:
                    key = table.index(parent_column)
                    earlier: list[Any] = []
                    for row in rows:
                        if row[i] is not None and row[i] not in earlier:
                            row[i] = self.rng.choice(earlier) if earlier else None
                        earlier.append(row[key])
                    continue
                pool = [r[self.by_name[parent].index(parent_column)] for r in self.rows.get(parent, [])]
                present = set(pool)
                mapped: dict[Any, Any] = {}
                for row in rows:
                    if (row[i] is None and nullable) or row[i] in present:
                        continue
                    if row[i] not in mapped:
                        mapped[row[i]] = self.rng.choice(pool) if pool else None
                    row[i] = mapped[row[i]]
            keys = [i for i, c in enumerate(table.columns) if c.primary_key]
            seen: set[tuple[Any, ...]] = set()
            kept: list[tuple[Any, ...]] = []
            for row in rows:  # a key taken twice (two rows re-pointed at one parent): the first stays
                key = tuple(row[i] for i in keys)
                if keys and key in seen:
                    continue
                seen.add(key)
                kept.append(tuple(row))
            self.rows[table.name] = [list(r) for r in kept]
            out[table.name] = kept
        return out

    # -------------------------------------------------------------- the focus's columns in scope

    def columns(self, refs: Iterable[tuple[str | None, str]]) -> list[tuple[Table, int]]:
        """The (table, column index) pairs the focus's columns may be, in a fixed order (a set's
        order changes from one process to the next; the random stream must not)."""
        out: list[tuple[Table, int]] = []
        for ref in sorted(refs, key=lambda r: (r[0] or "", r[1])):
            for table, i in resolve(ref, self.scope):
                if (table, i) not in out:
                    out.append((table, i))
        return out

    def leaves(self) -> list[Table]:
        """The tables read that point at another table read and that no table read points at:
        where a join's rows multiply (what COUNT(*) counts)."""
        read = {t.name for t in self.read}
        pointed = {p for t in self.read for p, _ in t.references.values() if p in read and p != t.name}
        out = [t for t in self.read if t.name not in pointed
               and any(p in read and p != t.name for p, _ in t.references.values())]
        return out or list(self.read)


def _plain(table: Table, index: int) -> bool:
    """A column that is neither a key nor a reference: free to take any value of its kind."""
    column = table.columns[index]
    return not column.primary_key and column.name not in table.references


def _day_shifts(text: str) -> list[str]:
    """An ISO date or timestamp string one day either side, written the same way."""
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        return []
    out = []
    for step in (-1, 1):
        shifted = moment + dt.timedelta(days=step)
        out.append(shifted.isoformat(sep=" ")[:len(text)] if len(text) > 10 else shifted.date().isoformat())
    return out


def like_spellings(pattern: str) -> list[str]:
    """Strings a LIKE pattern tells apart from its near misses: first the pattern with each
    wildcard filled (a plain match), then filled in other ways (empty, after a space), each in
    other letter cases too (SQLite's LIKE ignores case; ``=`` does not)."""
    filled = [pattern.replace("%", "x").replace("_", "x"), pattern.replace("%", "").replace("_", "x"),
              pattern.replace("%", " x").replace("_", "x"), pattern.replace("%", "").replace("_", "")]
    out: list[str] = []
    for text in filled:
        for variant in (text, text.lower(), text.upper()):
            if variant not in out:
                out.append(variant)
    return out


def text_spellings(value: str) -> list[str]:
    """A compared string and what sits beside it: itself, in other letter cases, one letter short,
    one letter longer (``=`` against ``LIKE``, prefixes, case-insensitive matches)."""
    out = [value]
    for variant in (value.lower(), value.upper(), value[:-1], value + "x"):
        if variant not in out:
            out.append(variant)
    return out


def values_for(table: Table, index: int, wanted: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """The focus's values for one column, written as the column writes its values: the values
    themselves, and what sits beside them (numbers and dates one either side; strings in other
    letter cases, one letter short or long; a LIKE pattern's wildcards filled in other ways)."""
    column = table.columns[index]
    present = [r[index] for r in table.rows if r[index] is not None]
    texts = [v for v in present if isinstance(v, str)]
    moments = [v for v in present if isinstance(v, dt.date)]
    exact: list[Any] = []
    near: list[Any] = []

    def text(values: Sequence[str], into: list[Any]) -> None:
        for v in values:
            formatted = in_format(v, texts) if texts else v
            if formatted is not None and formatted not in into:
                into.append(formatted)

    for value in wanted:
        if isinstance(value, int | float) and not isinstance(value, bool):
            whole = column.integer and float(value).is_integer()
            exact.append(int(value) if whole else value)
            near += [int(v) if whole else v for v in (value - 1, value + 1)]
            if texts and not column.numeric:  # compared as text in a text column
                text([str(value)], exact)
        elif isinstance(value, str):
            if moments:
                moment = moment_of(value, type(moments[0]))
                if moment is not None:
                    exact.append(moment)
                    near += [moment + dt.timedelta(days=1), moment - dt.timedelta(days=1)]
                continue
            if column.numeric and not texts:
                continue
            if isinstance(value, LikePattern):
                spellings = like_spellings(value)
                text(spellings[:1], exact)
                text(spellings[1:], near)
            else:
                text([value], exact)
                text([*text_spellings(value)[1:], *_day_shifts(value)], near)
    if column.checked:  # a CHECK would refuse the row: stay within the real range
        numbers = [v for v in present if isinstance(v, int | float)]
        if numbers:
            exact, near = ([v for v in values if not isinstance(v, int | float) or min(numbers) <= v <= max(numbers)]
                           for values in (exact, near))
    return exact, near


# ---------------------------------------------------------------- strategies


def literal(b: Builder) -> None:
    """Each compared column given the focus's values (and those beside them) in some rows; now and
    then one value in every row (each row then passes the filter, so what other strategies built
    shows through it: two playlists both named as the question says)."""
    for table in b.scope:
        rows = b.rows.get(table.name, [])
        for i, column in enumerate(table.columns):
            wanted = b.focus.literals.get(column.name.lower())
            if not wanted or not _plain(table, i) or not rows:
                continue
            exact, near = b.values(table, i, wanted)
            if not exact and not near:
                continue
            if exact and b.rng.random() < ALL_ROWS:
                value = b.rng.choice(exact)
                for row in rows:
                    row[i] = value
                continue
            for row in rows:
                if b.rng.random() < 0.6:
                    row[i] = b.rng.choice(exact if exact and (not near or b.rng.random() < 0.6) else near)


#: chance the literal strategy writes one compared value into every row of its column
ALL_ROWS = 0.3


def threshold(b: Builder) -> None:
    """For an aggregate compared with a number: a group of that many rows, or one either side."""
    if not b.focus.thresholds:
        return
    found = b.rng.choice(b.focus.thresholds)
    targets = b.columns([found.column]) if found.column is not None else []
    tables = [t for t, _ in targets] or b.leaves()
    table = b.rng.choice(tables)
    source = b.rows.get(table.name) or [list(r) for r in table.rows[:3]]
    if not source:
        return
    template = list(b.rng.choice(source))
    if found.aggregate == "count":
        step = (0, 1, -1)[b.turn % 3] if b.turn is not None else b.rng.choice((-1, 0, 0, 1))
        size = int(found.value) + step
        if not 1 <= size <= MAX_GROUP:
            return
        rows = [template, *b.copies(table, template, size - 1)]
        if b.turn is None and b.rng.random() < 0.5:  # a second group beside it, of the size one step off
            other = list(b.rng.choice(source))
            rows += [other, *b.copies(table, other, max(0, size - 1 + b.rng.choice((-1, 1))))]
    else:  # SUM, AVG, MIN, MAX: one row of the number (or beside it) makes the aggregate equal it
        rows = [template]
        for _, i in targets:
            if _plain(table, i):
                exact, near = b.values(table, i, [found.value])
                if exact or near:
                    template[i] = b.rng.choice(exact + near)
    b.rows[table.name] = rows


def join(b: Builder) -> None:
    """Rows without a partner: a parent row no child points at; a NULL reference where allowed."""
    read = {t.name for t in b.read}
    for table in b.read:
        for column, (parent_name, _) in table.references.items():
            parent = b.by_name.get(parent_name)
            if parent is None or parent_name not in read:
                continue
            pool = b.rows.get(parent.name) or [list(r) for r in parent.rows[:1]]
            if pool and b.rng.random() < 0.7:
                template = b.rng.choice(pool)
                b.anchor(parent, template)
                copy = b.copy_row(parent, template)
                if copy is not None:
                    b.rows.setdefault(parent.name, []).append(copy)
            i = table.index(column)
            rows = b.rows.get(table.name, [])
            if rows and not table.columns[i].not_null and b.rng.random() < 0.7:
                b.rng.choice(rows)[i] = None


def _grow(b: Builder, table: Table, size: int) -> list[list[Any]]:
    """``table``'s rows, grown by copies under fresh keys to at least ``size``."""
    rows = b.rows.setdefault(table.name, [])
    if not rows and table.rows:
        rows.append(list(b.rng.choice(table.rows)))
    while rows and len(rows) < size:
        copy = b.copy_row(table, b.rng.choice(rows))
        if copy is None:
            break
        rows.append(copy)
    return rows


def order(b: Builder) -> None:
    """Ties on the sort keys: a value shared by several rows; under an aggregate sort, groups of
    equal size over equal values, one group per parent row. Tables get more rows than the LIMIT
    (and OFFSET) keep, so a tie can sit at the cut."""
    enough = b.focus.cut + 2 if b.focus.cut else 0
    for table, i in b.columns(b.focus.sort_columns):
        rows = _grow(b, table, enough) if enough else b.rows.get(table.name, [])
        if len(rows) < 2 or not _plain(table, i):
            continue
        tie = b.rng.choice(rows)[i]
        for row in b.rng.sample(rows, max(2, len(rows) // 2)):
            row[i] = tie
    if b.focus.aggregate_sort or b.rng.random() < 0.3:
        table = b.rng.choice(b.leaves())
        rows = _grow(b, table, enough) if enough else b.rows.get(table.name) or []
        if rows:
            each = b.rng.choice((1, 2, 3))
            groups = max(enough, b.rng.choice((2, 3, 4)))
            templates = b.rng.sample(rows, min(len(rows), groups))
            _spread_parents(b, table, templates)
            b.rows[table.name] = [r for t in templates for r in [t, *b.copies(table, t, each - 1)]]
        for table, i in b.columns(b.focus.aggregated_columns):  # equal groups of equal values: equal sums
            rows = b.rows.get(table.name, [])
            if rows and _plain(table, i) and b.rng.random() < 0.7:
                shared = b.rng.choice(rows)[i]
                for row in rows:
                    row[i] = shared


def _spread_parents(b: Builder, table: Table, templates: list[list[Any]]) -> None:
    """Each template pointed at a parent row of its own (in every table read it points at), so
    each makes a group of its own."""
    read = {t.name for t in b.read}
    for column, (parent_name, parent_column) in table.references.items():
        parent = b.by_name.get(parent_name)
        i = table.index(column)
        if parent is None or parent_name not in read or parent is table or table.columns[i].primary_key:
            continue
        parents = _grow(b, parent, len(templates))
        key = parent.index(parent_column)
        for template, row in zip(templates, parents, strict=False):
            template[i] = row[key]


def distinct(b: Builder) -> None:
    """Repeated values and rows: copies under fresh keys, and one row's value given to another in
    the columns DISTINCT, COUNT(DISTINCT) or GROUP BY reach (or any plain column)."""
    targets = b.columns(b.focus.distinct_columns | b.focus.aggregated_columns)
    for table, i in targets or [(t, i) for t in b.read for i in range(len(t.columns)) if _plain(t, i)]:
        rows = b.rows.get(table.name, [])
        if len(rows) >= 2 and _plain(table, i) and b.rng.random() < 0.5:
            a, c = b.rng.sample(rows, 2)
            c[i] = a[i]
    for table in b.read:
        rows = b.rows.get(table.name, [])
        if rows and b.rng.random() < 0.5:
            rows += b.copies(table, b.rng.choice(rows), b.rng.choice((1, 1, 2)))


def null(b: Builder) -> None:
    """NULL in nullable columns the predicates and aggregates read (any nullable column where the
    focus names none)."""
    targets = b.columns(b.focus.predicate_columns) or [(t, i) for t in b.read for i in range(len(t.columns))]
    for table, i in targets:
        if table.columns[i].not_null or table.columns[i].primary_key:
            continue
        for row in b.rows.get(table.name, []):
            if b.rng.random() < 0.4:
                row[i] = None


def spread(b: Builder) -> None:
    """Numbers an aggregate reads pushed off their usual value: 0, 2, 3, -1 or another row's."""
    for table, i in b.columns(b.focus.aggregated_columns | b.focus.predicate_columns):
        if not _plain(table, i) or not table.columns[i].numeric:
            continue
        rows = b.rows.get(table.name, [])
        present = [r[i] for r in table.rows if isinstance(r[i], int | float)]
        choices = [0, 2, 3, -1, *present[:5]]
        if table.columns[i].checked and present:
            choices = [v for v in choices if min(present) <= v <= max(present)]
        for row in rows:
            if choices and b.rng.random() < 0.5:
                row[i] = b.rng.choice(choices)


#: Every strategy by the kind of data it builds (focus kinds map onto these in ``STRATEGIES_FOR``).
STRATEGIES: dict[str, Callable[[Builder], None]] = {
    "literal": literal, "threshold": threshold, "join": join, "order": order, "distinct": distinct,
    "null": null, "spread": spread,
}
#: The strategies each kind of edit between two queries leans on.
STRATEGIES_FOR: dict[str, tuple[str, ...]] = {
    "literal": ("literal",), "comparison": ("literal",), "predicate": ("literal", "null", "distinct"),
    "null": ("null",), "join": ("join", "null"), "aggregate": ("spread", "distinct", "null"),
    "threshold": ("threshold", "literal"), "order": ("order",), "limit": ("order",),
    "distinct": ("distinct",), "group": ("distinct",), "function": ("literal", "spread", "null"),
    "other": tuple(STRATEGIES),
}
#: Chance that a strategy the difference leans on is applied to a candidate; of any other.
LEANED_ON, OTHERWISE = 0.75, 0.2


def chosen(kinds: Iterable[str], rng: random.Random, focus: Focus | None = None) -> list[str]:
    """The strategies one candidate applies, in a fixed order: those the kinds lean on most often,
    and the compared values nearly always (a WHERE the data never meets hides every other edit)."""
    leaned = {s for kind in kinds for s in STRATEGIES_FOR.get(kind, ())}
    if focus is not None and focus.literals:
        leaned.add("literal")
    picked = [name for name in STRATEGIES if rng.random() < (LEANED_ON if name in leaned else OTHERWISE)]
    if not picked and leaned:
        picked = [rng.choice(sorted(leaned))]
    return ordered(picked)


def ordered(strategies: Iterable[str]) -> list[str]:
    """Strategies in the order they apply: a threshold's group replaces its table's rows, so it
    comes first; the compared values last, so the rows a filter keeps are among those edited."""
    rank = {"threshold": 0, "literal": 2}
    return sorted(set(strategies), key=lambda name: (rank.get(name, 1), name))


def build(source: Source, focus: Focus, rng: random.Random, strategies: Sequence[str] | None = None,
          turn: int | None = None, memo: dict[Any, Any] | None = None) -> dict[str, list[tuple[Any, ...]]]:
    """One targeted database's rows: a few real rows of each table in scope, edited by
    ``strategies`` (by default those the focus's kinds lean on, drawn from ``rng``); ``turn``: the
    round of a strategy tried alone (its choices made systematic)."""
    b = Builder(source, focus, rng, turn, memo)
    b.draw()
    for name in strategies if strategies is not None else chosen(focus.kinds or focus.targets, rng, focus):
        STRATEGIES[name](b)
    return b.finish()


def table_rows(rows: Mapping[str, Sequence[tuple[Any, ...]]]) -> dict[str, int]:
    return {name: len(r) for name, r in rows.items()}
