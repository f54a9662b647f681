"""Running: which case runs a run makes, the modes that make them, and the runner."""
