"""Summaries over seeds: a mean with its standard error, a difference of two such means, and rounding for
the JSON reports."""

import math


def mean_se(values: list[float]) -> tuple[float, float]:
    """The mean and its standard error (NaN for fewer than two values)."""
    n, mean = len(values), sum(values) / len(values)
    return mean, (math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n) if n > 1 else float("nan"))


def gain(pretrained: list[float], random: list[float]) -> tuple[float, float]:
    """Mean difference and its standard error (the two samples' errors combined)."""
    (a, sa), (b, sb) = mean_se(pretrained), mean_se(random)
    return a - b, math.sqrt(sa ** 2 + sb ** 2)


def rounded(x: float | None, digits: int = 1) -> float | None:
    """`round`, passing None through (a figure that was not measured)."""
    return None if x is None else round(x, digits)
