"""The faithfulness check at the path the README names; its home is ``nl2sql_assets.evaluation.judging``."""

from nl2sql_assets.evaluation.judging.faithfulness import check_faithfulness

__all__ = ["check_faithfulness"]
