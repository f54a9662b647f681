"""Neighbour databases: small databases of a datasource's schema on which near-miss SQL and its
gold give different rows (test-suite accuracy). ``mutants`` makes the near misses of a gold query,
``generate_neighbours`` the candidate databases (SQLite or DuckDB, ``formats``), ``distill`` keeps
the few that tell the most mutants apart, ``project_sets`` builds or reads back each datasource's
kept set, ``neighbour_verdict`` and ``NeighbourJudge`` grade a prediction on the original and the
kept ones, ``witness`` searches a pass that holds there for a database that tells it from its gold
(built by ``targeted`` for what ``focus`` reads in the two queries), and ``audit`` flags gold that
tests less than it seems.
"""

from nl2sql_assets.evaluation.neighbours.distill import Distillation, GoldQuery, distill
from nl2sql_assets.evaluation.neighbours.formats import FORMATS
from nl2sql_assets.evaluation.neighbours.generate import GENERATOR_VERSION, generate_neighbours, gold_literals
from nl2sql_assets.evaluation.neighbours.mutants import RULES, Mutant, mutants
from nl2sql_assets.evaluation.neighbours.store import (
    KeptSet,
    NeighbourSet,
    gold_query,
    neighbour_set,
    project_sets,
)
from nl2sql_assets.evaluation.neighbours.verdict import (
    FAILS_ON_NEIGHBOUR,
    FAILS_ON_WITNESS,
    NeighbourJudge,
    NeighbourVerdict,
    neighbour_verdict,
)

__all__ = [
    "FAILS_ON_NEIGHBOUR",
    "FAILS_ON_WITNESS",
    "FORMATS",
    "GENERATOR_VERSION",
    "RULES",
    "Distillation",
    "GoldQuery",
    "KeptSet",
    "Mutant",
    "NeighbourJudge",
    "NeighbourSet",
    "NeighbourVerdict",
    "distill",
    "generate_neighbours",
    "gold_literals",
    "gold_query",
    "mutants",
    "neighbour_set",
    "neighbour_verdict",
    "project_sets",
]
