"""GLAD (Whitehill et al., 2009) exactly as crowd-kit 1.4.2 fits it, with its per-row pandas work
done on arrays.

Why not crowd-kit's own class: it normalises each task's posterior with a Python call per task
(`groupby("task").transform(softmax)`) and rebuilds indexed pandas frames at every function and
gradient evaluation of its conjugate-gradient M-step, so one fit on 6,000 judgments (2,000
items) took 60-140 s on this project's machines where Dawid-Skene took 2 s
(benchmarks/label_aggregation.py measures both in one run). The fit is not smooth in rounding:
its M-step stops conjugate gradient after 25 iterations, so a sum taken in another order moved
the final abilities by 1e-3 after a dozen EM rounds. This module therefore repeats crowd-kit's
arithmetic operation for operation: the same rows in the same order (label-major, then the
judgments in the frame's order), pandas' compensated group sums, numpy's pairwise total, the
same expression order, scipy's conjugate gradient with the same settings. Its results equal
crowd-kit's (tests/evaluation/test_label_models.py holds them within 1e-9).

The model, as crowd-kit states it: every ability alpha and log inverse difficulty beta starts at
1 with a normal(1, 1) prior; uniform label priors over the labels given (never re-estimated);
P(worker gives the true label) = sigmoid(alpha x exp(beta)), the rest spread evenly over the
other K - 1 labels; EM until the expected log-likelihood per (judgment, label) row gains less
than `tol` (the first comparison is against the undivided value, as in crowd-kit).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import minimize
from scipy.special import expit, logsumexp
from scipy.stats import norm

N_ITER = 100
TOL = 1e-5
M_STEP_MAX_ITER = 25
M_STEP_TOL = 1e-2
SOFTPLUS_LIMIT = 30


def _softplus(x: np.ndarray) -> np.ndarray:
    """log(1 + exp(x)), linear beyond +-30, as crowd-kit computes it."""
    positive = x > SOFTPLUS_LIMIT
    mask = positive | (x < -SOFTPLUS_LIMIT)
    return np.log1p(np.exp(x * (1 - mask))) * (1 - mask) + x * positive


def _group_sums(values: np.ndarray, groups: np.ndarray, count: int) -> np.ndarray:
    """Per-group sums in row order with pandas' compensated (Kahan) summation: what crowd-kit's
    `groupby(...).sum()` computes, to the last bit."""
    sums = pd.Series(values).groupby(groups, sort=True).sum()
    out = np.zeros(count)
    out[sums.index.to_numpy()] = sums.to_numpy()
    return out


@dataclass(frozen=True)
class GladFit:
    """`probas` (tasks in sorted order x labels in sorted order), `labels` (the most probable label
    per task, the lower one on a tie), `alphas` (ability per worker), `betas` (log inverse
    difficulty per task)."""

    probas: pd.DataFrame
    labels: pd.Series
    alphas: pd.Series
    betas: pd.Series


class _Problem:
    """One data set as crowd-kit lays it out: K rows per judgment, all judgments for the first
    label given, then for the second, ... (`_join_all`'s melt), as flat arrays."""

    def __init__(self, data: pd.DataFrame):
        workers, self.worker_names = pd.factorize(data["worker"])
        tasks, self.task_names = pd.factorize(data["task"])
        label_codes, appearance = pd.factorize(data["label"])
        self.n_labels = len(appearance)
        self.label_names = appearance.sort_values()
        sorted_code = self.label_names.get_indexer(appearance)  # appearance code -> sorted column
        judgments = len(data)
        # Row r = block b (the b-th label in order of appearance) x judgment j.
        self.column = np.repeat(sorted_code, judgments)
        self.workers = np.tile(workers, self.n_labels)
        self.tasks = np.tile(tasks, self.n_labels)
        self.delta = np.repeat(np.arange(self.n_labels), judgments) == np.tile(label_codes, self.n_labels)
        self.log_others = np.log(self.n_labels - 1)
        self.log_prior = np.log(1.0 / self.n_labels)
        self.n_workers, self.n_tasks = len(self.worker_names), len(self.task_names)
        self.cells = self.tasks * self.n_labels + self.column  # (task, sorted label) cell of each row

    def _row_log_likelihoods(self, alphas: np.ndarray, betas: np.ndarray) -> np.ndarray:
        alpha_beta = alphas[self.workers] * np.exp(betas[self.tasks])
        log_sigma = -_softplus(-alpha_beta)
        log_one_minus_sigma = -_softplus(alpha_beta)
        return self.delta * log_sigma + (1 - self.delta) * (log_one_minus_sigma - self.log_others)

    def posteriors(self, alphas: np.ndarray, betas: np.ndarray) -> np.ndarray:
        """tasks x labels (sorted): each task's posterior over the labels."""
        sums = _group_sums(self._row_log_likelihoods(alphas, betas), self.cells, self.n_tasks * self.n_labels)
        sums = sums.reshape(self.n_tasks, self.n_labels) + self.log_prior
        return np.exp(sums - logsumexp(sums, axis=1, keepdims=True))

    def objective(self, alphas: np.ndarray, betas: np.ndarray, row_posterior: np.ndarray) -> float:
        """The expected complete-data log-likelihood plus the log priors on alpha and beta."""
        q = (row_posterior * self._row_log_likelihoods(alphas, betas)).sum()
        q += np.log(norm.pdf(alphas - 1.0)).sum()
        q += np.log(norm.pdf(betas - 1.0)).sum()
        return -np.inf if np.isnan(q) else float(q)

    def gradient(self, alphas: np.ndarray, betas: np.ndarray, row_posterior: np.ndarray) -> np.ndarray:
        alpha, exp_beta = alphas[self.workers], np.exp(betas[self.tasks])
        sigma = expit(alpha * exp_beta)
        d_beta = row_posterior * (self.delta - sigma) * alpha * exp_beta
        d_alpha = row_posterior * (self.delta - sigma) * exp_beta
        return np.concatenate(
            [
                _group_sums(d_alpha, self.workers, self.n_workers) - (alphas - 1.0),
                _group_sums(d_beta, self.tasks, self.n_tasks) - (betas - 1.0),
            ]
        )


def fit_glad(data: pd.DataFrame, n_iter: int = N_ITER, tol: float = TOL) -> GladFit:
    """Fit GLAD to a `task`, `worker`, `label` frame with at least two distinct labels."""
    problem = _Problem(data[["task", "worker", "label"]])
    if problem.n_labels < 2:
        raise ValueError("GLAD needs at least two distinct labels")
    n_workers = problem.n_workers
    alphas, betas = np.ones(n_workers), np.ones(problem.n_tasks)

    def e_step() -> tuple[np.ndarray, np.ndarray]:
        posterior = problem.posteriors(alphas, betas)
        return posterior, posterior.ravel()[problem.cells]

    posterior, row_posterior = e_step()
    q = problem.objective(alphas, betas, row_posterior)
    for _ in range(n_iter):
        last_q = q
        posterior, row_posterior = e_step()
        result = minimize(
            lambda x, rows=row_posterior: -problem.objective(x[:n_workers], x[n_workers:], rows),
            np.concatenate([alphas, betas]),
            method="CG",
            jac=lambda x, rows=row_posterior: -problem.gradient(x[:n_workers], x[n_workers:], rows),
            tol=M_STEP_TOL,
            options={"disp": False, "maxiter": M_STEP_MAX_ITER},
        )
        alphas, betas = result.x[:n_workers], result.x[n_workers:]
        q = problem.objective(alphas, betas, row_posterior) / problem.delta.size
        if q - last_q < tol:
            break
    task_order = np.argsort(problem.task_names.to_numpy(), kind="stable")
    probas = pd.DataFrame(posterior[task_order], index=problem.task_names[task_order], columns=problem.label_names)
    return GladFit(
        probas=probas,
        labels=probas.idxmax(axis=1),
        alphas=pd.Series(alphas, index=problem.worker_names, name="alpha"),
        betas=pd.Series(betas, index=problem.task_names, name="beta"),
    )
