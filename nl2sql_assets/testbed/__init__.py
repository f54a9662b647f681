"""Generated test beds: databases built here, deterministically, for what no shipped database shows."""
