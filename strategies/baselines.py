"""Linear baselines every prediction report is compared with, fitted on training rows only.

A network earns its place only by beating the best linear model on the same inputs, so each report shows
one next to it: the forecasts a least-squares linear map (``LinearBaseline``, the DLinear class), the
classifiers a multinomial logistic regression (``LogisticRegression``).
"""

from __future__ import annotations

import numpy as np


class LinearBaseline:
    """Least-squares linear forecaster ``y = W·x + b`` (``x`` of L points -> T points), one map for all
    channels; a tiny ridge term (``l2``) keeps the normal equations well conditioned."""

    def __init__(self, l2: float = 1e-6) -> None:
        self.l2 = l2
        self.coef: np.ndarray | None = None  # (L + 1, T)

    def fit(self, x: np.ndarray, y: np.ndarray) -> LinearBaseline:
        """``x (M, L, C)``, ``y (M, T, C)``: every channel of every window is one regression row."""
        a = _series_rows(x)  # (M·C, L + 1)
        t = np.transpose(y, (0, 2, 1)).reshape(-1, y.shape[1])  # (M·C, T)
        gram = a.T @ a + self.l2 * len(a) * np.eye(a.shape[1])
        self.coef = np.linalg.solve(gram, a.T @ t)
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        if self.coef is None:
            raise ValueError("LinearBaseline.predict: call fit first")
        m, _, c = x.shape
        return np.transpose((_series_rows(x) @ self.coef).reshape(m, c, -1), (0, 2, 1))  # (M, T, C)


def _series_rows(x: np.ndarray) -> np.ndarray:
    m, length, c = x.shape
    flat = np.transpose(x, (0, 2, 1)).reshape(m * c, length)  # (M·C, L): one row per series
    return np.hstack([flat, np.ones((m * c, 1))])


class LogisticRegression:
    """Multinomial logistic regression with an L2 penalty, fitted by Newton's method.

    Minimises ``mean(−log p(y|x)) + l2/2·‖W‖²`` (the intercepts are not penalised) over ``W (F+1, K)``.
    The objective is strictly convex, so Newton steps with a backtracking line search reach the optimum in
    a few dozen iterations; the full Hessian is ``(F+1)·K`` square (723 for the Fractal EA's 240 inputs),
    cheap next to the network. Inputs should be standardised (as the networks' are).
    """

    def __init__(self, l2: float = 1e-2, max_iter: int = 50, tol: float = 1e-8) -> None:
        self.l2, self.max_iter, self.tol = l2, max_iter, tol
        self.coef: np.ndarray | None = None  # (F + 1, K)
        self.iterations = 0

    def fit(self, x: np.ndarray, y: np.ndarray, classes: int) -> LogisticRegression:
        """``x (N, F)`` features, ``y (N,)`` class indices in ``0..classes-1``."""
        a = np.hstack([np.asarray(x, np.float64), np.ones((len(x), 1))])  # (N, F+1)
        n, d = a.shape
        if n == 0:
            raise ValueError("LogisticRegression.fit: no training rows")
        t = np.eye(classes)[np.asarray(y, np.int64)]  # (N, K)
        penalty = np.full((d, classes), self.l2)
        penalty[-1] = 0.0  # intercepts free
        w = np.zeros((d, classes))
        loss = self._loss(a, t, w, penalty)
        for iteration in range(1, self.max_iter + 1):
            self.iterations = iteration
            p = _softmax(a @ w)
            grad = a.T @ (p - t) / n + penalty * w  # (F+1, K)
            hess = np.zeros((classes, d, classes, d))
            for i in range(classes):
                for j in range(i, classes):
                    weight = p[:, i] * ((i == j) - p[:, j])  # (N,)
                    block = (a * weight[:, None]).T @ a / n  # (F+1, F+1)
                    hess[i, :, j, :] = block
                    hess[j, :, i, :] = block.T
            hess = hess.reshape(classes * d, classes * d)
            hess += np.diag(penalty.T.reshape(-1) + 1e-10)  # the softmax's null direction, made definite
            step = np.linalg.solve(hess, grad.T.reshape(-1)).reshape(classes, d).T
            rate = 1.0
            while True:  # backtracking: the objective must fall
                trial = self._loss(a, t, w - rate * step, penalty)
                if trial <= loss or rate < 1e-6:
                    break
                rate *= 0.5
            w -= rate * step
            done = loss - trial <= self.tol * max(1.0, abs(loss))
            loss = trial
            if done:
                break
        self.coef = w
        return self

    @staticmethod
    def _loss(a: np.ndarray, t: np.ndarray, w: np.ndarray, penalty: np.ndarray) -> float:
        z = a @ w
        z = z - z.max(axis=1, keepdims=True)
        log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        return float(-(t * log_p).sum() / len(a) + 0.5 * (penalty * w * w).sum())

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """``x (N, F)`` -> class probabilities ``(N, K)``."""
        if self.coef is None:
            raise ValueError("LogisticRegression.predict_proba: call fit first")
        a = np.hstack([np.asarray(x, np.float64), np.ones((len(x), 1))])
        return _softmax(a @ self.coef)


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)
