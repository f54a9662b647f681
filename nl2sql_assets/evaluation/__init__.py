"""Evaluation, by stage; each package's ``__init__`` is its public face.

- ``suites``: the reviewed cases, their files, regenerate, drift and seed.
- ``judging``: how a case run is judged (comparison, faithfulness, scorers) and the statistics.
- ``running``: modes, the run request, the runner, selection, the scorer registry, the gold LLM.
- ``reporting``: boards and reports from case records, and the gate's comparison.
- ``history``: benchmark records and their pages, the warehouse and its boards, baselines.

Each stage imports only the stages listed before it.
"""
