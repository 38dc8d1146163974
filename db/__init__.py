"""Engine, models and repositories: the only place that writes SQL."""
