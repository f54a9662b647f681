"""``python -m nl2sql_assets.cli``: the command line, as ``nl2sql-assets``."""

import sys

from nl2sql_assets.cli import main

sys.exit(main())
