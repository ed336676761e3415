"""Linear pairwise ranking SVM (SVM-rank) as a PyTorch Lightning module.

Primal problem on the pair differences ``d_p = x_i - x_j`` (context ``i`` better than ``j``)::

    min_w  0.5 ||w||^2 + C * sum_p  l(w . d_p)                                    (SVM-rank)

with ``l(m) = max(0, 1 - m)`` (``"hinge"``, Joachims' SVM-rank) or ``max(0, 1 - m)^2`` (``"squared_hinge"``);
no bias (it cancels in a difference). Strictly convex: any correct solver finds the same ``w`` (checked
against :mod:`udcg_ltr.fit.reference`). The hinge is smoothed, ``l_s(m) = s log(1 + exp((1 - m) / s))``
(``0 <= l_s - hinge <= s log 2``), for decreasing ``s``, each stage (one epoch) warm-starting the next; the
objective is divided by ``C * P`` (same minimiser) so that tolerances do not depend on the number of pairs.
Optimisers: ``"newton"`` (default; exact ``g`` and ``H`` of only ``2k`` weights in one pass over the pairs,
quadratic convergence within a stage, as liblinear's primal solver), ``"lbfgs"`` (full batch, autograd)
and ``"adam"`` (mini-batches of pairs: approximate, for pair sets that do not fit in memory).
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Iterator, Sequence

import numpy as np
import pytorch_lightning as pl
import torch
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, TensorDataset

from udcg_ltr.fit.reference import primal_objective

DEFAULT_SMOOTHING = (1.0, 0.1, 0.01, 1e-3)


@contextlib.contextmanager
def quiet_lightning(level: int = logging.WARNING) -> Iterator[None]:
    """Silence Lightning's info banners (GPU/TPU availability, barebones notice) for short internal fits."""
    names = ("pytorch_lightning", "lightning.pytorch", "lightning_fabric", "lightning")
    old = {lg: lg.level for lg in map(logging.getLogger, names)}
    for lg in old:
        lg.setLevel(level)
    try:
        yield
    finally:
        for lg, lvl in old.items():
            lg.setLevel(lvl)


def _loss(margins: torch.Tensor, smoothing: float, loss: str) -> torch.Tensor:
    """``l`` elementwise at the margins: the smoothed hinge ``s * softplus((1 - m) / s)`` (the plain hinge for
    ``s <= 0``) or the squared hinge; the value alone, as :meth:`PairwiseSVMRank.objective` and autograd need."""
    if loss == "hinge" and smoothing > 0:
        return smoothing * torch.nn.functional.softplus((1.0 - margins) / smoothing)
    slack = torch.clamp(1.0 - margins, min=0.0)
    return slack if loss == "hinge" else slack ** 2


def _loss_derivatives(margins: torch.Tensor, smoothing: float, loss: str):
    """``(l, l', l'')`` of :func:`_loss` (the plain hinge has no second derivative), for the Newton optimiser."""
    if loss == "hinge" and smoothing > 0:
        z = (1.0 - margins) / smoothing
        sig = torch.sigmoid(z)
        return smoothing * torch.nn.functional.softplus(z), -sig, sig * (1.0 - sig) / smoothing
    slack = torch.clamp(1.0 - margins, min=0.0)
    if loss == "hinge":
        return slack, -(slack > 0).to(margins.dtype), torch.zeros_like(margins)
    return slack ** 2, -2.0 * slack, 2.0 * (slack > 0).to(margins.dtype)


class DampedNewton(torch.optim.Optimizer):
    """Damped Newton for one small parameter vector, with an Armijo backtracking line search.

    ``closure(True)`` returns ``(f, g, H)``, ``closure(False)`` ``(f, None, None)``; ``state["converged"]`` once the
    Newton decrement ``-g . step`` falls below ``tol * max(1, |f|)``. The full step is tried first with derivatives,
    which the next step reuses when it is accepted: clear ``state`` when the objective changes."""

    def __init__(self, params, *, tol: float = 1e-12, armijo: float = 1e-4, min_step: float = 1e-10):
        super().__init__(params, dict(tol=tol, armijo=armijo, min_step=min_step))
        if len(self.param_groups) != 1 or len(self.param_groups[0]["params"]) != 1:
            raise ValueError("DampedNewton optimises exactly one parameter tensor")

    @torch.no_grad()
    def step(self, closure, tol: float | None = None):
        group = self.param_groups[0]
        w = group["params"][0]
        state = self.state[w]
        tol = group["tol"] if tol is None else tol
        # (f, g, H) at the current point: kept from the previous accepted step (its trial evaluation).
        f, g, H = state.pop("derivatives", None) or closure(True)
        direction = torch.linalg.solve(H, -g)
        decrement = float(-(g @ direction))
        if decrement <= tol * max(1.0, abs(float(f))):
            state.update(converged=True, derivatives=(f, g, H))
            return f
        state["converged"] = False
        w0 = w.detach().clone()
        # The full Newton step is usually accepted: evaluate it with derivatives, to reuse them.
        w.copy_(w0 + direction)
        trial = closure(True)
        if float(trial[0]) <= float(f) - group["armijo"] * decrement:
            state["derivatives"] = trial
            return trial[0]
        t = 0.5
        while True:
            w.copy_(w0 + t * direction)
            f_new = closure(False)[0]
            if float(f_new) <= float(f) - group["armijo"] * t * decrement or t < group["min_step"]:
                break
            t *= 0.5
        return f_new


class PairwiseSVMRank(pl.LightningModule):
    """A linear scorer ``f(x) = w . x`` trained on pair differences with the SVM-rank objective (module doc;
    ``squared_hinge`` has one stage, no smoothing)."""

    def __init__(self, n_features: int, *, C: float = 1.0, n_pairs: int, loss: str = "hinge", optimizer: str = "newton",
                 smoothing: Sequence[float] = DEFAULT_SMOOTHING, lr: float = 0.2, max_iter: int = 100,
                 epochs_per_stage: int = 1, tolerance_grad: float = 1e-10, tolerance_change: float = 1e-14):
        super().__init__()
        if loss not in ("hinge", "squared_hinge"):
            raise ValueError(f"loss must be 'hinge' or 'squared_hinge', got {loss!r}")
        if optimizer not in ("newton", "lbfgs", "adam"):
            raise ValueError(f"optimizer must be 'newton', 'lbfgs' or 'adam', got {optimizer!r}")
        if C <= 0:
            raise ValueError(f"C must be > 0, got {C}")
        self.save_hyperparameters()
        self.automatic_optimization = False
        self.w = torch.nn.Parameter(torch.zeros(n_features, dtype=torch.float64))
        self.stages = list(smoothing) if loss == "hinge" else [0.0]

    def objective(self, diffs: torch.Tensor, smoothing: float, *, batch_fraction: float = 1.0) -> torch.Tensor:
        """``(0.5 ||w||^2 * batch_fraction + C * sum_batch l(w . d)) / (C * P)``; its full-batch minimiser is the SVM's."""
        hp = self.hparams
        losses = _loss(diffs @ self.w, smoothing, hp.loss)
        return (0.5 * (self.w @ self.w) * batch_fraction + hp.C * losses.sum()) / (hp.C * hp.n_pairs)

    def objective_derivatives(self, diffs: torch.Tensor, smoothing: float, with_hessian: bool = True):
        """Analytic ``(f, g, H)`` of :meth:`objective` (full batch), for the Newton optimiser:
        ``g = w / (CP) + D^T l'(Dw) / P`` and ``H = I / (CP) + D^T diag(l''(Dw)) D / P``."""
        hp = self.hparams
        scale = 1.0 / (hp.C * hp.n_pairs)
        w = self.w.detach()
        loss, dl, d2l = _loss_derivatives(diffs @ w, smoothing, hp.loss)
        f = (0.5 * (w @ w) + hp.C * loss.sum()) * scale
        if not with_hessian:
            return f, None, None
        g = w * scale + (diffs.T @ dl) / hp.n_pairs
        # H only steers the step; the gradient (float64, exact) fixes the minimiser. So H is formed in
        # float32 and without the pairs far from the margin, where the smoothed hinge is flat or
        # linear (l'' ~ 0): the same optimum, at a fraction of the cost of the [P, d] x [d, P] product.
        d32 = self._float32(diffs)
        curved = d2l > d2l.max() * 1e-12
        dc, hc = (d32, d2l) if bool(curved.all()) else (d32[curved], d2l[curved])  # all: no copy of the pairs
        H = dc.T @ (dc * hc.to(torch.float32)[:, None])
        H = H.to(w.dtype) / hp.n_pairs + torch.eye(len(w), dtype=w.dtype) * scale
        return f, g, H

    def _float32(self, diffs: torch.Tensor) -> torch.Tensor:
        """A float32 copy of the pair matrix, made once per tensor (for the Hessian)."""
        cached = getattr(self, "_d32", None)
        if cached is None or cached[0] is not diffs:
            self._d32 = (diffs, diffs.to(torch.float32))
        return self._d32[1]

    def exact_objective(self, diffs: torch.Tensor) -> float:
        """The unscaled, unsmoothed primal objective at the current ``w``."""
        hp = self.hparams
        return primal_objective(self.weights, diffs.detach().cpu().numpy(), C=hp.C, loss=hp.loss)

    def training_step(self, batch, batch_idx):
        diffs = (batch[0] if isinstance(batch, (list, tuple)) else batch).to(self.w.dtype)
        opt = self.optimizers()
        s = self.stages[min(self.current_epoch // max(1, self.hparams.epochs_per_stage), len(self.stages) - 1)]
        if self.hparams.optimizer != "adam":
            # a full-batch epoch is a new smoothing level: the cached derivatives / curvature pairs are stale
            opt.optimizer.state.clear()
        if self.hparams.optimizer == "newton":
            # Intermediate smoothing levels only provide a warm start: a loose tolerance is enough.
            last = self.current_epoch >= len(self.stages) - 1
            tol = self.hparams.tolerance_grad if last else max(self.hparams.tolerance_grad, 1e-7)
            for _ in range(self.hparams.max_iter):
                opt.optimizer.step(lambda hess: self.objective_derivatives(diffs, s, hess), tol=tol)
                if opt.optimizer.state[self.w].get("converged"):
                    break
        elif self.hparams.optimizer == "lbfgs":
            def closure():
                opt.zero_grad()
                value = self.objective(diffs, s)
                self.manual_backward(value)
                return value

            opt.step(closure=closure)
        else:
            opt.zero_grad()
            self.manual_backward(self.objective(diffs, s, batch_fraction=len(diffs) / self.hparams.n_pairs))
            opt.step()

    def on_train_epoch_end(self):
        sched = self.lr_schedulers()
        if sched is not None:
            sched.step()

    def configure_optimizers(self):
        hp = self.hparams
        if hp.optimizer == "newton":
            return DampedNewton([self.w], tol=hp.tolerance_grad)
        if hp.optimizer == "lbfgs":
            return torch.optim.LBFGS([self.w], lr=1.0, max_iter=hp.max_iter, history_size=20,
                                     tolerance_grad=hp.tolerance_grad, tolerance_change=hp.tolerance_change,
                                     line_search_fn="strong_wolfe")
        opt = torch.optim.Adam([self.w], lr=hp.lr)
        total = max(1, len(self.stages) * hp.epochs_per_stage)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total, eta_min=hp.lr * 1e-3)
        return {"optimizer": opt, "lr_scheduler": sched}

    @property
    def weights(self) -> np.ndarray:
        return self.w.detach().cpu().numpy().copy()


def fit_pairwise_svm(diffs: np.ndarray, *, C: float = 1.0, loss: str = "hinge", optimizer: str = "newton",
                     smoothing: Sequence[float] = DEFAULT_SMOOTHING, max_iter: int | None = None,
                     batch_size: int = 8192, epochs_per_stage: int | None = None, lr: float = 0.2,
                     seed: int = 0, num_threads: int | None = 1) -> np.ndarray:
    """Fit ``w`` of the SVM-rank objective on pair differences ``[P, d]`` (``w = 0`` with no pairs).

    Newton / L-BFGS: full batch, one epoch and at most ``max_iter`` iterations (default 100 / 500) per smoothing stage.
    Adam: mini-batches of ``batch_size`` pairs, ``epochs_per_stage`` epochs per stage (default 30), cosine decay of
    ``lr`` to ``lr / 1000``. ``num_threads`` (default 1; ``None``: keep) sets torch's intra-op threads during the fit:
    on a thin ``[P, 2k]`` matrix thread hand-offs cost more than they save (on a busy 2-core machine, 30x more).
    """
    diffs = np.asarray(diffs, dtype=np.float64)
    if diffs.ndim != 2:
        raise ValueError(f"diffs must be [n_pairs, n_features], got shape {diffs.shape}")
    n_pairs, d = diffs.shape
    if n_pairs == 0:
        return np.zeros(d)
    full_batch = optimizer in ("newton", "lbfgs")
    max_iter = (500 if optimizer == "lbfgs" else 100) if max_iter is None else max_iter
    epochs_per_stage = 1 if full_batch else (30 if epochs_per_stage is None else epochs_per_stage)
    module = PairwiseSVMRank(d, C=C, n_pairs=n_pairs, loss=loss, optimizer=optimizer, smoothing=smoothing,
                             lr=lr, max_iter=max_iter, epochs_per_stage=epochs_per_stage)
    tensor = torch.from_numpy(diffs)
    if full_batch:
        loader = DataLoader([tensor], batch_size=None, shuffle=False)  # one item: every pair
    else:
        ds = TensorDataset(tensor)
        sampler = BatchSampler(RandomSampler(ds, generator=torch.Generator().manual_seed(seed)),
                               batch_size=min(batch_size, n_pairs), drop_last=False)
        loader = DataLoader(ds, sampler=sampler, batch_size=None)
    old_threads = torch.get_num_threads()
    try:
        if num_threads is not None:
            torch.set_num_threads(num_threads)
        with torch.random.fork_rng(), quiet_lightning():
            torch.manual_seed(seed)
            # barebones: no logger, callbacks or progress bar, so skip the per-step bookkeeping. Not
            # deterministic=True: it flips a process-wide torch flag for good.
            trainer = pl.Trainer(max_epochs=len(module.stages) * epochs_per_stage, accelerator="cpu",
                                 devices=1, logger=False, enable_checkpointing=False, barebones=True,
                                 enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0)
            trainer.fit(module, train_dataloaders=loader)
    finally:
        torch.set_num_threads(old_threads)
    return module.weights


def pairwise_accuracy(w: np.ndarray, diffs: np.ndarray) -> float:
    """Share of pairs ordered correctly (``w . d > 0``); ties count half."""
    if len(diffs) == 0:
        return math.nan
    m = np.asarray(diffs) @ np.asarray(w)
    return float(((m > 0) + 0.5 * (m == 0)).mean())
