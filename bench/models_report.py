"""docs/models.md and docs/img/models-<device>.png from bench/results/models-*.json."""


def write_report() -> None:
    pass
