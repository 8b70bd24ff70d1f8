"""The logistic function, for the model and the recalibration (no imports: either may be
loaded first)."""

from __future__ import annotations

import math


def sigmoid(x: float) -> float:
    """1 / (1 + e^-x), without overflow at either end."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def fit_plain(
    rows: list[list[float]],
    labels: list[int],
    *,
    l2: float = 1.0,
    iterations: int = 30,
    offsets: list[float] | None = None,
) -> tuple[float, list[float]]:
    """Intercept and weights of the L2-penalized logistic fit of `labels` on `rows` (the
    intercept unpenalized), by Newton's method in plain Python: where the fit runs in a
    Lambda whose layer holds no numpy (`grandbo.memory.lifecycle.confidence_fit`). The
    offline fit (`grandbo.memory.read.confidence.model.fit_logistic`) is the same
    objective in numpy. `offsets`: each row's fixed part of the logit (terms whose weights
    are not fit)."""
    width = len(rows[0]) + 1 if rows else 1
    beta = [0.0] * width
    design = [[1.0, *row] for row in rows]
    fixed = offsets if offsets is not None else [0.0] * len(rows)
    for _ in range(iterations):
        gradient = [l2 * b if j else 0.0 for j, b in enumerate(beta)]
        hessian = [[0.0] * width for _ in range(width)]
        for j in range(1, width):
            hessian[j][j] = l2
        for x, y, o in zip(design, labels, fixed, strict=True):
            p = sigmoid(o + sum(b * v for b, v in zip(beta, x, strict=True)))
            r, w = p - y, p * (1.0 - p)
            for j, xj in enumerate(x):
                if xj == 0.0:
                    continue
                gradient[j] += r * xj
                wj = w * xj
                row = hessian[j]
                for k in range(j, width):
                    row[k] += wj * x[k]
        for j in range(width):
            for k in range(j):
                hessian[j][k] = hessian[k][j]
        step = _solve(hessian, gradient)
        # damped: a step that does not lower the penalized loss is halved (a lake whose
        # signals separate its questions perfectly would otherwise send the fit off)
        before = _loss(design, labels, fixed, beta, l2)
        for _ in range(40):
            trial = [b - s for b, s in zip(beta, step, strict=True)]
            if _loss(design, labels, fixed, trial, l2) <= before:
                break
            step = [s / 2 for s in step]
        else:
            break
        beta = trial
        if max(abs(s) for s in step) < 1e-9:
            break
    return beta[0], beta[1:]


def _loss(
    design: list[list[float]], labels: list[int], fixed: list[float], beta: list[float], l2: float
) -> float:
    """The L2-penalized negative log-likelihood (the intercept unpenalized)."""
    total = l2 / 2 * sum(b * b for b in beta[1:])
    for x, y, o in zip(design, labels, fixed, strict=True):
        z = o + sum(b * v for b, v in zip(beta, x, strict=True))
        # log(1 + e^z) - y z, without overflow
        total += (z if z > 0 else 0.0) + math.log1p(math.exp(-abs(z))) - y * z
    return total


def _solve(matrix: list[list[float]], vector: list[float]) -> list[float]:
    """x with matrix @ x = vector, by Gaussian elimination with partial pivoting (the
    matrix is symmetric positive definite here: a Hessian plus a ridge)."""
    n = len(vector)
    a = [[*row, v] for row, v in zip(matrix, vector, strict=True)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        a[col], a[pivot] = a[pivot], a[col]
        if a[col][col] == 0.0:
            continue
        for r in range(col + 1, n):
            factor = a[r][col] / a[col][col]
            if factor:
                for c in range(col, n + 1):
                    a[r][c] -= factor * a[col][c]
    x = [0.0] * n
    for r in range(n - 1, -1, -1):
        if a[r][r] == 0.0:
            continue
        x[r] = (a[r][n] - sum(a[r][c] * x[c] for c in range(r + 1, n))) / a[r][r]
    return x
