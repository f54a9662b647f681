"""Neighbour databases: small databases of a datasource's schema on which near-miss SQL and its
gold give different rows (test-suite accuracy). ``mutants`` makes the near misses of a gold query,
``generate_neighbours`` the candidate databases, ``distill`` keeps the few that tell the most
mutants apart, ``neighbour_verdict`` grades a prediction on the original and the kept ones.
"""

from nl2sql_assets.evaluation.neighbours.distill import Distillation, GoldQuery, distill
from nl2sql_assets.evaluation.neighbours.generate import GENERATOR_VERSION, generate_neighbours, gold_literals
from nl2sql_assets.evaluation.neighbours.mutants import RULES, Mutant, mutants
from nl2sql_assets.evaluation.neighbours.verdict import (
    FAILS_ON_NEIGHBOUR,
    NeighbourVerdict,
    neighbour_verdict,
)

__all__ = [
    "FAILS_ON_NEIGHBOUR",
    "GENERATOR_VERSION",
    "RULES",
    "Distillation",
    "GoldQuery",
    "Mutant",
    "NeighbourVerdict",
    "distill",
    "generate_neighbours",
    "gold_literals",
    "mutants",
    "neighbour_verdict",
]
