"""Plain-Python reference of VeriGate's process advantages, written from the paper's formulas.

Used by the trainer tests to check the trainer's tensors against arithmetic that shares no code with it.
"""

import statistics


def _suffix_sums(values: list[float]) -> list[float]:
    return [sum(values[j:]) for j in range(len(values))]


def _normalize_group(per_row: list[list[float]], eps: float) -> list[list[float]]:
    flat = [value for row in per_row for value in row]
    if len(flat) < 2:
        return [[0.0] * len(row) for row in per_row]
    mean = statistics.fmean(flat)
    std = statistics.stdev(flat)  # Bessel-corrected, like TRL's group std
    return [[(value - mean) / (std + eps) for value in row] for row in per_row]


def reference_step_advantages(group_scores: list[list[float]], normalization: str, eps: float = 1e-4):
    """Step advantages of one group from its PRM step scores r_{i,k} (one list per completion).

    verigate: A_ij = (c_ij - mean c) / (std c + eps), c_ij = sum_{k>=j} r_ik, over all steps of the group.
    deepseekmath: normalize r over the group first, then A_ij = sum_{k>=j} r~_ik.
    """
    if normalization == "verigate":
        return _normalize_group([_suffix_sums(row) for row in group_scores], eps)
    if normalization == "deepseekmath":
        return [_suffix_sums(row) for row in _normalize_group(group_scores, eps)]
    raise ValueError(f"unknown normalization {normalization!r}")
