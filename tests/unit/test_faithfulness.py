"""Answer faithfulness, one rule at a time, on a small hand-made result."""

from __future__ import annotations

import math
from datetime import date
from decimal import Decimal

import pytest

from nl2sql_assets.evaluation.judging.faithfulness import Faithfulness, check_faithfulness

COLUMNS = ["Genre", "Tracks", "Revenue", "Share", "FirstSale", "Loss"]
ROWS = [
    ["Rock", 1297, 826.65, 0.3718, "2009-01-01 00:00:00", -5],
    ["Latin", 579, 382.14, 0.1656, "2009-01-02", 0],
    ["Metal", 374, 261.36, 0.1133, "2009-01-11", 0],
]
# Track sum 2250, revenue sum 1470.15, three rows.
QUESTION = "Which genres sell the most?"


def check(answer: str, question: str = QUESTION, rows: list | None = None) -> Faithfulness:
    return check_faithfulness(answer, COLUMNS, ROWS if rows is None else rows, question)


def number_verdict(answer: str) -> tuple[bool, list[str]]:
    result = check(answer)
    assert result.unsupported_entities == []
    return result.faithful, result.unsupported_numbers


# Each table: (answer, faithful, unsupported numbers as written).

VALUES_AT_PRECISION = [
    ("Rock has 1,297 tracks.", True, []),
    ("Rock has 1297 tracks.", True, []),
    ("Rock has 1,297.00 tracks.", True, []),
    ("Rock earned $826.65.", True, []),
    ("Rock earned 826.7.", True, []),  # rounded to one decimal
    ("Rock earned about 827.", True, []),  # rounded to a whole number
    ("Rock earned 826.60.", False, ["826.60"]),  # two decimals written, and wrong
    ("Rock has 1,300 tracks.", False, ["1,300"]),  # rounded the way no precision gives
    ("Rock earned €826.65 and Latin £382.14.", True, []),
    ("Rock lost -5.", True, []),  # a negative value
    ("Rock fell by 5.", True, []),  # unsigned: the size of a negative value
    ("Latin lost -579.", False, ["-579"]),  # signed: must match the sign too
    ("Revenue was 0.3718 of the total.", True, []),
]

ROW_COUNT_AND_SUMS = [
    ("There are 3 genres.", True, []),  # the row count
    ("There are 4 genres.", False, ["4"]),
    ("They hold 2,250 tracks in all.", True, []),  # the sum of Tracks
    ("Together they earned $1,470.15.", True, []),  # the sum of Revenue
    ("Together they earned about 1,470.", True, []),  # the sum, rounded
    ("Together they earned 1,471.", False, ["1,471"]),
    ("On average 750 tracks.", False, ["750"]),  # a mean is not one of the allowed figures
]

PERCENTAGES = [
    ("Rock is 37.2% of sales.", True, []),  # a share times 100, one decimal
    ("Rock is 37.18% of sales.", True, []),
    ("Rock is 37% of sales.", True, []),
    ("Rock is 37.2 % of sales.", True, []),  # a space before the sign
    ("Latin is 16.6% of sales.", True, []),
    ("Rock is 37.3% of sales.", False, ["37.3%"]),
    ("Rock is 50% of sales.", False, ["50%"]),
    ("Rock grew 1,297%.", True, []),  # as for a plain number: a value in the rows
]

TEXT_AND_QUESTION = [
    ("Sales began in 2009.", True, []),  # the year of the text cell '2009-01-01 00:00:00'
    ("In 2013 Rock led.", False, ["2013"]),  # a 2013 that neither the rows nor the question hold
]

NOT_NUMBERS = [
    ("Rock is 2nd, Latin 3rd and Metal 41st.", True, []),  # ordinals
    ("1. Rock\n2. Latin\n3) Metal\n- 4. Pop", True, []),  # list markers
    ("See chinook_001 and case_17.", True, []),  # glued to an identifier
    ("Encoded as MPEG-4, COVID-19 era.", True, []),  # glued by a hyphen to a word
    ("Ticket #7 and @42.", True, []),  # glued to a sign
    ("A 5-star genre in 4K and 10x faster, v2.", True, []),  # glued on the right
    ("Version 1.2.3 of the model.", True, []),  # a version, not a value
    ("The first sale was on 2009-02-17.", True, []),  # month and day of an ISO date
    ("The first sale was on 2013-02-17.", False, ["2013"]),  # ...but the year is checked
    ("First sold 2009-01-11 10:30:00.", True, []),  # a time inside an ISO datetime
    ("Sold on 02/17/2009 and 2009/02/17.", True, []),  # slash dates
    ("Sold on February 17, 2009 and 17th of March.", True, []),  # month names
    ("Sold on 17 Feb 2013.", False, ["2013"]),
    ("The query used `LIMIT 17` and\n```sql\nSELECT 99\n```", True, []),  # code is not prose
]


@pytest.mark.parametrize(
    ("answer", "faithful", "unsupported"),
    VALUES_AT_PRECISION + ROW_COUNT_AND_SUMS + PERCENTAGES + TEXT_AND_QUESTION + NOT_NUMBERS,
)
def test_numbers(answer: str, faithful: bool, unsupported: list[str]) -> None:
    assert number_verdict(answer) == (faithful, unsupported)


QUESTION_NUMBERS = [
    # question, answer, faithful
    ("Who are the top 5 genres?", "Here are the top 5.", True),
    ("What sold in 2013?", "In 2013 nothing sold.", True),
    ("What sold in 2013?", "In 2014 nothing sold.", False),
    ("Which genres sell over 1,000 tracks?", "Only Rock sells over 1000 tracks.", True),
]


@pytest.mark.parametrize(("question", "answer", "faithful"), QUESTION_NUMBERS)
def test_numbers_in_the_question_are_supported(question: str, answer: str, faithful: bool) -> None:
    assert check(answer, question=question).faithful is faithful


def test_numbers_inside_text_cells_are_supported() -> None:
    rows = [["Symphony No. 5 in C Minor", 1], ["Track 12", 1]]
    result = check_faithfulness("No. 5 and track 12 each sold once.", ["Name", "Sold"], rows, "")
    assert result.faithful
    assert result.checked == 2  # 5 and 12 ("once" is a word)


NAMES = [
    # answer, faithful, unsupported names as written
    ('"Rock" leads.', True, []),
    ("“Metal” follows.", True, []),
    ("'Latin' is second.", True, []),
    ("**Rock** leads.", True, []),
    ("__Rock__ leads.", True, []),
    ('**"Rock"** leads.', True, []),  # one name, not two
    ("**rock** leads.", True, []),  # case-insensitive
    ("**Roc** leads.", True, []),  # a text cell contains it
    ("**Rock music** leads.", True, []),  # it contains a text cell
    ("**Genre** and **Revenue** are shown.", True, []),  # column names
    ("**Genres** that **sell the most**", True, []),  # the question contains them
    ("**Jazz** leads.", False, ["Jazz"]),  # a bold genre the rows do not list
    ('"Jazz" and "Blues" trail.', False, ["Jazz", "Blues"]),
    ("**Jazz** then **Jazz** again.", False, ["Jazz"]),  # listed once
    ("**Rocky** leads.", False, ["Rocky"]),  # 'Rock' is inside, but not as a word
    ("it's the customers' choice", True, []),  # apostrophes open no quote
    ("Rock's fans and 'Pop'", False, ["Pop"]),
    ("**Note:** Rock leads.", True, []),  # bold ending in ':' is a label
    ("**Top 7** genres.", False, ["7"]),  # bold with a digit is skipped (the 7 is a number)
    ("**this is a long bold phrase of many words**", True, []),  # more than six words
    ('She said "1297" tracks.', True, []),  # a quoted number is a number, not a name
]


@pytest.mark.parametrize(("answer", "faithful", "unsupported"), NAMES)
def test_names(answer: str, faithful: bool, unsupported: list[str]) -> None:
    result = check(answer)
    assert result.faithful is faithful
    assert result.unsupported_entities == unsupported or result.unsupported_numbers == unsupported


def test_the_example_from_the_spec() -> None:
    answer = "**Jazz** leads with 1,300 tracks, most of them sold in 2013."
    result = check(answer)
    assert result == Faithfulness(
        faithful=False,
        unsupported_numbers=["1,300", "2013"],
        unsupported_entities=["Jazz"],
        checked=3,
    )


def test_a_faithful_answer_counts_what_it_checked() -> None:
    answer = (
        "Sales began in 2009. The top genre is **Rock** with 1,297 tracks and $826.65 "
        "(37.2% of the total); the 3 genres hold 2,250 tracks."
    )
    result = check(answer)
    assert result.faithful
    assert result.checked == 7  # 2009, Rock, 1,297, 826.65, 37.2%, 3, 2,250
    assert result.to_dict() == {
        "faithful": True,
        "unsupported_numbers": [],
        "unsupported_entities": [],
        "checked": 7,
    }


@pytest.mark.parametrize("answer", ["", None])
def test_no_answer_is_trivially_faithful(answer: str | None) -> None:
    assert check_faithfulness(answer, COLUMNS, ROWS) == Faithfulness(faithful=True, checked=0)


def test_empty_rows_back_a_zero_count() -> None:
    assert check_faithfulness("No genre matched: 0 rows.", ["Genre"], []).faithful
    assert not check_faithfulness("**Rock** matched.", ["Genre"], []).faithful


def test_database_types_are_read() -> None:
    rows = [[Decimal("523.06"), date(2013, 2, 1), "523"]]
    # Decimal is a number; a date's year is in its ISO text; '523' spells a number.
    assert check_faithfulness("523.1 on 2013-02-01; code 523.", ["Total", "Day", "Code"], rows).faithful
    assert not check_faithfulness("In 2014.", ["Total", "Day", "Code"], rows).faithful


def test_flags_read_as_one_and_zero() -> None:
    rows = [["Rock", True], ["Jazz", False], ["Pop", True]]
    assert check_faithfulness("2 of the 3 are explicit.", ["Genre", "Explicit"], rows).faithful
    assert not check_faithfulness("4 are explicit.", ["Genre", "Explicit"], rows).faithful


def test_scale_words() -> None:
    rows = [[1_234_567]]
    assert check_faithfulness("About 1.2 million.", ["N"], rows).faithful
    assert not check_faithfulness("About 1.3 million.", ["N"], rows).faithful
    assert check_faithfulness("About 1,235 thousand.", ["N"], rows).faithful


INFINITIES_AND_NAN = [
    # rows, answer, faithful: an infinity or NaN is a value of its own, never a finite number
    ([["USA", math.inf], ["Canada", 8]], "USA has 13 customers.", False),
    ([["USA", math.inf], ["Canada", 8]], "Canada has 8 customers.", True),
    ([["USA", 13.0], ["Canada", math.inf]], "21 customers in all.", False),  # no sum over an infinity
    ([["USA", -math.inf], ["Canada", 8]], "USA has -5 customers.", False),
    ([["USA", math.nan], ["Canada", 8]], "USA has 0 customers.", False),
    ([["USA", Decimal("Infinity")], ["Canada", Decimal("NaN")]], "USA has 13 customers.", False),
]


@pytest.mark.parametrize(("rows", "answer", "faithful"), INFINITIES_AND_NAN)
def test_infinities_and_nan_back_no_finite_number(rows: list, answer: str, faithful: bool) -> None:
    assert check_faithfulness(answer, ["Country", "Customers"], rows).faithful is faithful
