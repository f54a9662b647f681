"""Suite files read alike by every YAML reader a user's tooling may use.

Three readers: PyYAML over libyaml (what we load with), PyYAML's pure-Python loader (what it falls
back to without libyaml) and ruamel.yaml (YAML 1.2, pure Python). Every shipped suite, and suites
of random strings written by the writer, must give all three the same data; a file written in the
old style is made so by regenerate once, values unchanged, and then left byte for byte.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from nl2sql_assets.engine.plan import PlanModel
from nl2sql_assets.evaluation.suites import EvalCase, EvalSuite, dump_suite, parse_suite
from nl2sql_assets.evaluation.suites.portable import portable_text
from nl2sql_assets.evaluation.suites.regenerate import regenerate
from nl2sql_assets.paths import packaged_suites_dir

SHIPPED = sorted(packaged_suites_dir().glob("*.yaml"))


def _ruamel(text: str) -> Any:
    return YAML(typ="safe", pure=True).load(io.StringIO(text))


READERS = {
    "libyaml": lambda text: yaml.load(text, Loader=yaml.CSafeLoader),
    "pyyaml-pure": lambda text: yaml.load(text, Loader=yaml.SafeLoader),
    "ruamel-1.2": _ruamel,
}


def _same(a: Any, b: Any) -> bool:
    """Equal data of equal types (1 is not True, 1.0 is not 1), NaN equal to NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


def _read_by_all(text: str) -> Any:
    """The data every reader gets; fails naming the reader that differs or cannot read it."""
    data = {}
    for name, read in READERS.items():
        try:
            data[name] = read(text)
        except Exception as exc:
            pytest.fail(f"{name} cannot read the file: {type(exc).__name__}: {str(exc).splitlines()[0]}")
    for name, got in data.items():
        assert _same(got, data["libyaml"]), f"{name} reads the file differently from libyaml"
    return data["libyaml"]


def test_the_suites_shipped_are_the_ones_checked() -> None:
    assert {p.name for p in SHIPPED} >= {"chinook.yaml", "chinook_policy.yaml", "chinook_clarify.yaml",
                                         "multidomain.yaml", "routing.yaml"}


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_every_shipped_suite_reads_the_same_in_every_reader(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    data = _read_by_all(text)
    assert isinstance(data, dict) and data["cases"]
    assert portable_text(text) == (text, 0)  # nothing left that any reader could misread


# ---------------------------------------------------------------- the writer's quoting, case by case

# (value, how the writer writes it in a flow mapping). Each would be misread by at least one
# reader if it were left plain, except those written plain here.
FLOW_SCALARS = [
    ("Any news on this?", '"Any news on this?"'),  # '?' stops PyYAML's pure scanner in flow
    ("why?", '"why?"'),
    ("a?b", '"a?b"'),
    ("1e3", '"1e3"'),  # a float in YAML 1.2, a string in 1.1
    ("0o17", '"0o17"'),  # an octal int in 1.2
    ("0x1F", '"0x1F"'),
    ("0b101", '"0b101"'),  # a binary int in 1.1
    ("1_000", '"1_000"'),  # an int in 1.1
    ("010", '"010"'),  # 8 in 1.1, 10 in 1.2
    ("1.2.3", '"1.2.3"'),
    ("12:30", '"12:30"'),  # sexagesimal in 1.1
    ("y", '"y"'),  # booleans in the 1.1 spec's list
    ("N", '"N"'),
    ("on", '"on"'),
    ("Off", '"Off"'),
    ("yes", '"yes"'),
    ("NULL", '"NULL"'),
    ("~", '"~"'),
    ("2009-01-01", '"2009-01-01"'),
    ("- x", '"- x"'),
    ("#1", '"#1"'),
    ("a: b", '"a: b"'),
    ("a, b", '"a, b"'),
    ("[x]", '"[x]"'),
    ("=", '"="'),
    ("2012-09", "2012-09"),  # no reader's number or date
    ("Rock & Roll", "Rock & Roll"),
    ("O'Brien", "O'Brien"),
    ("yesterday", "yesterday"),
    ("1983 hits", "1983 hits"),
    ("São Paulo", "São Paulo"),
]


@pytest.mark.parametrize("value,written", FLOW_SCALARS, ids=[v for v, _ in FLOW_SCALARS])
def test_a_value_is_plain_only_when_no_reader_could_misread_it(value: str, written: str) -> None:
    case = EvalCase(id="v", question="q", datasources=["db"], status="approved",
                    outcome={"admin": "allowed"}, sql="SELECT 1", rows=[{"v": value}])
    text = dump_suite(EvalSuite(cases=[case]))
    assert "  - {v: " + written + "}\n" in text
    assert _read_by_all(text)["cases"][0]["rows"] == [{"v": value}]


BLOCK_QUESTIONS = [
    ("Any news on this?", "Any news on this?"),  # '?' is fine outside flow collections
    ("How many, by country?", "How many, by country?"),
    ("yes", '"yes"'),
    ("1e3", '"1e3"'),
    ("What: now", '"What: now"'),
]


@pytest.mark.parametrize("value,written", BLOCK_QUESTIONS, ids=[v for v, _ in BLOCK_QUESTIONS])
def test_a_question_outside_flow_is_quoted_by_the_same_rules(value: str, written: str) -> None:
    case = EvalCase(id="v", question=value, datasources=["db"], status="approved", outcome={"admin": "unanswerable"})
    text = dump_suite(EvalSuite(cases=[case]))
    assert f"  question: {written}\n" in text
    assert _read_by_all(text)["cases"][0]["question"] == value


# ---------------------------------------------------------------- random suites, three readers

TEXT = st.text(max_size=24)
VALUES = st.one_of(
    TEXT,
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=False),
    st.none(),
    st.booleans(),
    st.sampled_from(["?", "a?", "x ?y", "1e3", "0o7", "y", "off", "- a", "a #b", "{a}", "!x", "&a", "*a",
                     "%x", "@x", "`x", "|", ">", "'", '"', "2009-01-01T00:00:00Z", "1:2", ".5", "+1", "-.inf"]),
)


def _plan_with(value: str) -> PlanModel:
    return PlanModel.model_validate({
        "select": [{"expr": {"kind": "column", "name": "body"}}],
        "from": {"name": "Ticket"},
        "where": {"kind": "binary", "op": "=", "left": {"kind": "column", "name": "body"},
                  "right": {"kind": "literal", "value": value}},
    })


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    question=st.text(min_size=1, max_size=40),
    literal=TEXT,
    rows=st.lists(st.dictionaries(st.text(max_size=8), VALUES, max_size=4), max_size=3),
    sql=st.text(min_size=1, max_size=40),
)
def test_random_suites_written_by_the_writer_read_the_same_in_every_reader(
        question: str, literal: str, rows: list[dict[str, Any]], sql: str) -> None:
    case = EvalCase(id="p1", question=question, datasources=["db"], status="approved",
                    outcome={"admin": "allowed"}, sql=sql, rows=rows, plan=_plan_with(literal))
    text = dump_suite(EvalSuite(cases=[case]))
    data = _read_by_all(text)
    back = parse_suite(text, "p.yaml").cases[0]
    assert (back.question, back.sql, back.rows) == (question, sql, rows)
    assert data["cases"][0]["plan"]["where"]["right"]["value"] == literal
    assert portable_text(text) == (text, 0)


# ---------------------------------------------------------------- old files, rewritten once

OLD_STYLE = """\
# A suite written before the writer quoted '?' in flow (a comment to keep).
version: 1
cases:

- id: t1  # and one here
  question: Any news on this?
  datasources: [chinook]
  status: approved
  origin: hand
  outcome: {admin: allowed}
  tables: [Artist]
  columns: [Artist.Name]
  order_matters: false
  sql: SELECT Name FROM Artist WHERE Name = 'AC/DC'
  rows:
  - {Name: AC/DC}
  plan:
    select:
    - {expr: {kind: column, name: Name}}
    from: {name: Artist}
    where: {kind: binary, op: "=", left: {kind: column, name: Name}, right: {kind: literal, value: AC/DC?}}
  tags: [filter, single-table]
"""


class _NoDatabase:
    def get(self, datasource_id: str) -> None:
        return None


def test_portable_text_quotes_only_what_a_reader_could_misread_and_keeps_the_rest() -> None:
    out, quoted = portable_text(OLD_STYLE)
    assert quoted == 1
    assert "right: {kind: literal, value: \"AC/DC?\"}" in out
    assert out.replace('"AC/DC?"', "AC/DC?") == OLD_STYLE  # every other byte, comments included
    assert _same(yaml.load(out, Loader=yaml.CSafeLoader), yaml.load(OLD_STYLE, Loader=yaml.CSafeLoader))
    _read_by_all(out)


PLAIN_FIXES = [
    ("v: 010\n", "v: 8\n"),  # the value our loader reads (8), spelled as every reader reads it
    ("v: 0b11\n", "v: 3\n"),
    ("v: 1_000\n", "v: 1000\n"),
    ("v: yes\n", "v: true\n"),
    ("v: 1e3\n", 'v: "1e3"\n'),
    ("v: [a?, b]  # c\n", 'v: ["a?", b]  # c\n'),
    ("v: 1.50\n", "v: 1.50\n"),  # already read alike: left as written
    ("v: ~\n", "v: ~\n"),
    ("v: 2009-01-01\n", "v: 2009-01-01\n"),
]


@pytest.mark.parametrize("text,fixed", PLAIN_FIXES, ids=[t.strip() for t, _ in PLAIN_FIXES])
def test_portable_text_spells_each_scalar_as_every_reader_reads_it(text: str, fixed: str) -> None:
    assert portable_text(text)[0] == fixed
    assert _same(yaml.load(fixed, Loader=yaml.CSafeLoader), yaml.load(text, Loader=yaml.CSafeLoader))
    _read_by_all(fixed)


def test_regenerate_rewrites_an_old_style_suite_once_and_then_leaves_it(tmp_path: Path) -> None:
    path = tmp_path / "old.yaml"
    path.write_text(OLD_STYLE, encoding="utf-8")
    with pytest.raises(yaml.YAMLError):
        READERS["pyyaml-pure"](OLD_STYLE)  # the old file: PyYAML's pure loader cannot read it
    before = parse_suite(OLD_STYLE, "old.yaml")

    first = regenerate(path, _NoDatabase())  # no database: the rows stay, the quoting is fixed
    assert first.requoted == 1 and not first.unchanged
    text = path.read_text(encoding="utf-8")
    _read_by_all(text)
    assert parse_suite(text, "old.yaml").cases == before.cases  # the data unchanged
    assert text.startswith("# A suite written before") and "# and one here" in text

    second = regenerate(path, _NoDatabase())
    assert (second.requoted, second.unchanged) == (0, True)
    assert path.read_text(encoding="utf-8") == text
