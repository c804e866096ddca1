"""Group advantages: the entropic (KL-budgeted, leave-one-out) advantage and GRPO normalisation.

Entropic advantage of one group of k rewards ``r`` (the paper's "TTT-discover" advantage):

1. Centre by the maximum: ``c = r - max(r)``.
2. Find the inverse temperature ``beta`` at which ``q = softmax(beta * c)`` spends the KL budget
   ``KL(q || uniform) = target_kl``: double ``beta`` from 1 until the budget is reached (or
   ``beta_max`` is passed), then bisect ``[0, beta]`` ``iters`` times keeping the smallest
   ``beta`` found with ``KL >= target_kl``.
3. Leave-one-out weights ``w_i = e^{beta c_i} / (mean_{j != i} e^{beta c_j} + eps)`` and the
   advantage ``A_i = w_i - 1`` (>= -1).

A group of 0 members gives ``[]``, of 1 member ``[0]``, and a group whose rewards are all close
(``np.allclose`` to the first) gives zeros.

:func:`entropic_advantages` does this for many groups at once: one vectorised computation over a
``(groups, k_max)`` matrix with a mask for ragged groups; the doubling and the bisection run over
all groups in lock-step, and sums run over members in a fixed order, so padding never changes a
result: :func:`entropic_advantage` is the one-row case of the same code and agrees exactly.
The KL is evaluated by the cheap identity ``E_q[beta c] - log sum e^{beta c} + log k``; wherever
a comparison with the target is within 1e-13 while the bisection bracket is still wider than
1e-11 of beta, the released log-sum-exp (``logaddexp`` left to right) decides, so the search
follows the released path and beta agrees with it to better than 1e-11 relative (the golden
vectors, saturated k=2 and tied-top groups included, match within 1e-9).

``compat="openrsi"`` reproduces the released code, bugs included (reference B2): a two-member
group with distinct rewards can never reach a KL of ln 2, so the search saturates where the
float arithmetic "reaches" it and the winner gets ``~1/eps = 1e12``; the doubling can leave
``beta`` at 2^20 > ``beta_max``. ``compat="default"`` fixes both: ``beta`` never exceeds
``beta_max``, and the KL target is capped at half of the largest KL the group can reach
(``log(k / m)`` with m tied maxima, members within ``span / 1e8`` of the best counting as
tied, so the cap is continuous and shift/scale invariant), so every advantage stays bounded;
groups whose target is reachable with room to spare (for k >= 4 with a unique best,
ln 2 <= log(k)/2) are unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, TypeAlias

import numpy as np
import numpy.typing as npt

from openmle._validation import check_choice, check_positive, fail
from openmle.rewards._scores import as_float_array

__all__ = [
    "entropic_advantage",
    "entropic_advantages",
    "entropic_beta",
    "group_normalized_advantage",
]

FloatArray: TypeAlias = npt.NDArray[np.float64]
BoolArray: TypeAlias = npt.NDArray[np.bool_]
Compat: TypeAlias = Literal["default", "openrsi"]


def _seqsum(x: FloatArray) -> FloatArray:
    """Sum over the last axis strictly left to right (trailing zeros never change a result)."""
    out = x[:, 0].copy()
    for j in range(1, x.shape[1]):
        out += x[:, j]
    return out


def _prepare(
    matrix: npt.ArrayLike, mask: npt.ArrayLike | None, name: str = "matrix"
) -> tuple[FloatArray, BoolArray]:
    arr = np.array(as_float_array(matrix, name), dtype=np.float64, copy=True)
    if arr.ndim != 2:
        raise fail("a 2-D array of shape (groups, members)", "matrix", f"shape {arr.shape}")
    if mask is None:
        m = np.ones(arr.shape, dtype=bool)
    else:
        m = np.asarray(mask, dtype=bool)
        if m.shape != arr.shape:
            raise fail(f"a boolean mask of shape {arr.shape}", "mask", f"shape {m.shape}")
    if not np.all(np.isfinite(arr[m])):
        raise fail(
            "finite rewards",
            name,
            "non-finite values",
            "Mask out members without a reward instead of passing NaN or inf.",
        )
    arr[~m] = 0.0
    return arr, m


def _check_params(target_kl: float, beta_max: float, iters: int, eps: float, compat: str) -> None:
    check_positive(target_kl, "target_kl")
    check_positive(beta_max, "beta_max")
    check_positive(eps, "eps")
    if isinstance(iters, bool) or not isinstance(iters, int) or iters < 1:
        raise fail("an integer >= 1", "iters", iters)
    check_choice(compat, ("default", "openrsi"), "compat")


_TIE_RESOLUTION = 1e8
"""Members closer to the best than ``span / _TIE_RESOLUTION`` count as tied with it."""


def _reachable_kl(c: FloatArray, mask: BoolArray, log_k: FloatArray) -> FloatArray:
    """The KL a group can reach, measured at ``beta = _TIE_RESOLUTION / span``.

    With m exactly tied maxima among k members this is ``log(k / m)``; it is continuous in the
    rewards (a near-tie counts as a tie, so a one-ulp change cannot flip the KL cap) and, being
    taken at a beta proportional to ``1 / span``, invariant to shifting and scaling the group.
    """
    span = -np.where(mask, c, np.inf).min(axis=1)
    rows = np.flatnonzero(np.isfinite(span) & (span > 0))
    out: FloatArray = np.zeros(c.shape[0])
    if rows.size == 0:
        return out
    m = mask[rows]
    z = np.where(m, _TIE_RESOLUTION * (c[rows] / span[rows, None]), -np.inf)  # best at 0
    log_q = z - np.log(_seqsum(np.where(m, np.exp(z), 0.0)))[:, None]
    q = np.where(m, np.exp(log_q), 0.0)
    safe = np.where(q > 0, log_q, 0.0)
    out[rows] = _seqsum(q * (safe + log_k[rows, None]))
    return out


class _KL:
    """KL (nats) of each group's tilted distribution against uniform, for a vector of betas.

    Works in (members, groups) layout: each member row is contiguous, and sums run over the
    member rows strictly in order, so padding (exact zeros / -inf) never changes a result.
    """

    def __init__(
        self, c: FloatArray, mask: BoolArray, log_k: FloatArray, target: FloatArray
    ) -> None:
        self.width = c.shape[1]
        self.c_t = np.ascontiguousarray(c.T)
        self.off_t = ~np.ascontiguousarray(mask.T)
        self.no_members = mask.sum(axis=1) == 0
        self.log_k = log_k
        self.target = target
        self.buf = np.empty_like(self.c_t)
        self.q = np.empty_like(self.c_t)

    def exact(self, beta: FloatArray, cols: npt.NDArray[np.intp]) -> FloatArray:
        """KL exactly as released (log-sum-exp by ``logaddexp``, left to right)."""
        width = self.width
        z = beta * self.c_t[:, cols]
        np.copyto(z, -np.inf, where=self.off_t[:, cols])
        lse = z[0].copy()
        for j in range(1, width):
            np.logaddexp(lse, z[j], out=lse)
        np.copyto(lse, 0.0, where=self.no_members[cols])
        z -= lse  # log q; masked entries stay -inf
        qq = np.exp(z)
        z += self.log_k[cols]
        # q == 0 (masked or underflowed) contributes exactly 0, never 0 * -inf.
        np.copyto(z, 0.0, where=qq == 0.0)
        z *= qq
        out: FloatArray = z[0].copy()
        for j in range(1, width):
            out += z[j]
        return out

    def __call__(self, beta: FloatArray, wide: BoolArray | None = None) -> FloatArray:
        """KL by a cheap identity (``E_q[z] - log S + log k``).

        Where the comparison with the target could depend on the last bits (within 1e-13)
        while the bracket is still wide (``wide``), the released computation decides, so the
        search takes the released path; once a bracket is narrower than 1e-11 of beta the
        cheap value decides (beta then differs from the released one by < 1e-11 relative).
        """
        width, buf, q = self.width, self.buf, self.q
        np.multiply(beta, self.c_t, out=buf)
        np.maximum(buf, -1e300, out=buf)
        np.exp(buf, out=q)
        np.copyto(q, 0.0, where=self.off_t)
        s = q[0].copy()
        for j in range(1, width):
            s += q[j]
        np.copyto(s, 1.0, where=self.no_members)
        np.multiply(buf, q, out=buf)
        a = buf[0].copy()
        for j in range(1, width):
            a += buf[j]
        out: FloatArray = a / s - np.log(s) + self.log_k
        near = np.abs(out - self.target) <= 1e-13
        if wide is not None:
            near &= wide
        close = np.flatnonzero(near)
        if close.size:
            out[close] = self.exact(beta[close], close)
        return out


def _find_beta(kl: _KL, n_groups: int, *, beta_max: float, iters: int, compat: str) -> FloatArray:
    """The smallest beta per group whose KL reaches the target (doubling, then bisection)."""
    target = kl.target
    hi = np.ones(n_groups)
    kl_hi = kl(hi)
    for _ in range(4096):
        need = (hi < beta_max) & (kl_hi < target)
        if not need.any():
            break
        hi = np.where(need, hi * 2.0, hi)
        kl_hi = kl(hi)
    if compat == "default" and np.any(hi > beta_max):
        hi = np.minimum(hi, beta_max)
        kl_hi = kl(hi)
    below = kl_hi < target
    lo = np.zeros(n_groups)
    for _ in range(iters):
        mid = (lo + hi) / 2.0
        ok = kl(mid, (hi - lo) > 1e-11 * hi) >= target
        hi = np.where(below, hi, np.where(ok, mid, hi))
        lo = np.where(below, lo, np.where(ok, lo, mid))
    return hi


def _solve(
    r: FloatArray,
    mask: BoolArray,
    *,
    target_kl: float,
    beta_max: float,
    iters: int,
    eps: float,
    compat: str,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Return (advantages, beta, degenerate) for a masked (G, K) reward matrix."""
    n_groups, width = r.shape
    k = mask.sum(axis=1).astype(np.float64)
    if width == 0:
        return np.zeros(r.shape), np.zeros(n_groups), np.ones(n_groups, dtype=bool)
    top = np.where(mask, r, -np.inf).max(axis=1)
    top = np.where(np.isfinite(top), top, 0.0)
    c = np.where(mask, r - top[:, None], 0.0)
    log_k = np.log(np.maximum(k, 1.0))
    target = np.full(n_groups, float(target_kl))
    if compat == "default":
        reach = _reachable_kl(c, mask, log_k)
        target = np.where(reach > 0, np.minimum(target, 0.5 * reach), target)

    kl = _KL(c, mask, log_k, target)
    beta = _find_beta(kl, n_groups, beta_max=beta_max, iters=iters, compat=compat)

    e = np.where(mask, np.exp(beta[:, None] * c), 0.0)
    total = _seqsum(e)
    denom = np.maximum(k - 1.0, 1.0)
    z = (total[:, None] - e) / denom[:, None]
    adv = np.where(mask, e / (z + eps) - 1.0, 0.0)

    first = r[np.arange(n_groups), np.argmax(mask, axis=1)]
    close = np.abs(r - first[:, None]) <= 1e-8 + 1e-5 * np.abs(first[:, None])
    degenerate = (k <= 1) | np.all(close | ~mask, axis=1)
    adv = np.where(degenerate[:, None], 0.0, adv)
    beta = np.where(k <= 1, 0.0, beta)
    return adv, beta, degenerate


def entropic_advantages(
    matrix: npt.ArrayLike,
    mask: npt.ArrayLike | None = None,
    *,
    target_kl: float = math.log(2.0),
    beta_max: float = 1e6,
    iters: int = 60,
    eps: float = 1e-12,
    compat: Compat = "default",
) -> FloatArray:
    """Entropic advantages of many groups at once (one vectorised computation, no loop per group).

    Each row gets exactly what :func:`entropic_advantage` gives it alone (its docstring has the
    algorithm, the tie rule and the invariance conditions); padding never changes a result.

    Args:
        matrix: rewards, shape ``(groups, k_max)``; one group per row.
        mask: boolean array of the same shape, True where a member exists (ragged groups);
            None means every entry is a member. Masked entries are ignored and get 0.
        target_kl: KL budget (nats) of the tilted distribution against uniform.
        beta_max: the doubling stops once beta reaches this.
        iters: bisection steps.
        eps: added to each leave-one-out normaliser.
        compat: ``"default"`` (bounded) or ``"openrsi"`` (exactly as released, bugs
            included); see :func:`entropic_advantage` for the algorithm, the tie rule and when
            the result is invariant to shifting and scaling.

    Returns:
        float64 array of the same shape as ``matrix``.

    Raises:
        InvalidArgument: not 2-D, a mask of another shape, a non-finite reward under the mask,
            or a bad parameter.
        InvalidArgumentType: ``matrix`` not numbers (a string, a mapping, ...).
    """
    _check_params(target_kl, beta_max, iters, eps, compat)
    r, m = _prepare(matrix, mask)
    adv, _, _ = _solve(
        r, m, target_kl=target_kl, beta_max=beta_max, iters=iters, eps=eps, compat=compat
    )
    return adv


def _row(rewards: Sequence[float] | npt.ArrayLike) -> FloatArray:
    arr = as_float_array(rewards, "rewards")
    if arr.ndim != 1:
        raise fail("a 1-D sequence of rewards", "rewards", f"shape {arr.shape}")
    return arr.reshape(1, -1)


def entropic_advantage(
    rewards: Sequence[float] | npt.ArrayLike,
    *,
    target_kl: float = math.log(2.0),
    beta_max: float = 1e6,
    iters: int = 60,
    eps: float = 1e-12,
    compat: Compat = "default",
) -> FloatArray:
    """Entropic advantages of one group (the paper's KL-budgeted, leave-one-out advantage).

    Algorithm, for k rewards ``r``:

    1. Centre by the maximum: ``c = r - max(r)``.
    2. Find the inverse temperature ``beta`` at which ``q = softmax(beta * c)`` spends the KL
       budget ``KL(q || uniform) = target_kl``: double ``beta`` from 1 until the budget is
       reached (or ``beta_max`` is passed), then bisect ``[0, beta]`` ``iters`` times keeping the
       smallest ``beta`` with ``KL >= target_kl``. With ``compat="default"`` beta never exceeds
       ``beta_max`` and the target is capped at half the largest KL the group can reach
       (``log(k / m)`` with m members tied for best), so every advantage is bounded.
    3. Leave-one-out weights ``w_i = e^{beta c_i} / (mean_{j != i} e^{beta c_j} + eps)`` and
       ``A_i = w_i - 1`` (so ``A_i >= -1``).

    A group of 0 members gives ``[]``, of 1 member ``[0]``. A *tied* group gives zeros: tied
    means every member is ``np.allclose`` to the first one,
    ``|r_i - r_0| <= 1e-8 + 1e-5 * |r_0|`` (the released rule).

    Invariance, exactly when it holds: the advantages are unchanged by ``r -> a * r + b``
    (``a > 0``) when both groups are untied by the rule above and the solved beta
    (:func:`entropic_beta`) is below ``beta_max`` for both. Outside these conditions:

    - the tie rule is relative to the first member, so a shift can tie a group:
      ``[0, 1e-5]`` has advantages ``[-0.876, 7.089]`` and ``[5, 5.00001]`` has zeros;
    - beta grows as ``1 / spread``, so a small enough spread hits ``beta_max`` and the
      advantages shrink towards 0 instead of staying fixed: ``[0, 1]`` gives
      ``[-0.876, 7.089]`` (beta 2.09) and ``[0, 1e-6]`` gives ``[-0.632, 1.718]`` (beta at the
      cap 1e6). Below the cap the best member's advantage never grows as the spread shrinks
      (it is non-decreasing in the spread), until the tie rule sets it to 0.

    ``compat="openrsi"`` reproduces the released code, bugs included: a two-member group with
    distinct rewards saturates (the winner gets about ``1 / eps = 1e12``) and the doubling can
    leave beta at 2^20 above ``beta_max``.

    Args:
        rewards: the group's rewards, 1-D, finite.
        target_kl, beta_max, iters, eps, compat: as for :func:`entropic_advantages`.

    Returns:
        float64 array, one advantage per member (``[]`` for an empty group).

    Raises:
        InvalidArgument: not 1-D, a non-finite reward, or a bad parameter.
        InvalidArgumentType: ``rewards`` not numbers (a string, a mapping, ...).
    """
    _check_params(target_kl, beta_max, iters, eps, compat)
    row = _row(rewards)
    r, m = _prepare(row, None, "rewards")
    adv, _, _ = _solve(
        r, m, target_kl=target_kl, beta_max=beta_max, iters=iters, eps=eps, compat=compat
    )
    out: FloatArray = adv[0]
    return out


def entropic_beta(
    rewards: Sequence[float] | npt.ArrayLike,
    *,
    target_kl: float = math.log(2.0),
    beta_max: float = 1e6,
    iters: int = 60,
    compat: Compat = "default",
) -> float:
    """The inverse temperature the entropic advantage of ``rewards`` uses.

    Returns 0.0 for fewer than two members. For a constant group the KL budget can never be
    spent, so the doubling limit is returned (2^20 with ``compat="openrsi"``, ``beta_max``
    otherwise), although the advantages are then all zero.

    Raises:
        InvalidArgument: as :func:`entropic_advantage` (not 1-D, non-finite, bad parameter).
        InvalidArgumentType: ``rewards`` not numbers.
    """
    _check_params(target_kl, beta_max, iters, 1e-12, compat)
    r, m = _prepare(_row(rewards), None, "rewards")
    _, beta, _ = _solve(
        r, m, target_kl=target_kl, beta_max=beta_max, iters=iters, eps=1e-12, compat=compat
    )
    return float(beta[0])


def group_normalized_advantage(
    rewards: Sequence[float] | npt.ArrayLike,
    *,
    std_normalization: bool = True,
    eps: float = 1e-6,
) -> FloatArray:
    """GRPO/GSPO group normalisation: ``(r - mean) / (std + eps)``.

    The standard deviation is the sample one (ddof=1), or 0 for a single member; without
    ``std_normalization`` only the mean is subtracted.

    Args:
        rewards: the group's rewards, 1-D.
        std_normalization: divide by the standard deviation.
        eps: added to the standard deviation.

    Returns:
        float64 array, one advantage per member (``[]`` for an empty group). A group of
        identical rewards gives exact zeros (the released code returns rounding noise of the
        mean divided by ``eps`` there, about 1e-11).

    Raises:
        InvalidArgument: not 1-D, a non-finite reward, or ``eps`` not a finite number >= 0.
        InvalidArgumentType: ``rewards`` not numbers (a string, a mapping, ...).
    """
    check_positive(eps, "eps", allow_zero=True)
    arr = as_float_array(rewards, "rewards")
    if arr.ndim != 1:
        raise fail("a 1-D sequence of rewards", "rewards", f"shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise fail("finite rewards", "rewards", "non-finite values")
    if arr.size == 0 or np.all(arr == arr[0]):
        return np.zeros(arr.size, dtype=np.float64)
    # Scale by a power of two so that huge or tiny rewards neither overflow nor underflow;
    # power-of-two scaling is exact, so ordinary inputs give bit-identical results.
    _, exp2 = np.frexp(np.max(np.abs(arr)))
    a = np.ldexp(arr, -int(exp2))
    centred: FloatArray = a - a.mean()
    if not std_normalization:
        out0: FloatArray = np.ldexp(centred, int(exp2))
        return out0
    std = float(a.std(ddof=1 if a.size > 1 else 0))
    with np.errstate(over="ignore"):
        eps_scaled = float(np.ldexp(eps, -int(exp2)))
    if math.isfinite(eps_scaled):
        out: FloatArray = centred / (std + eps_scaled)
        return out
    # Subnormal rewards: eps dwarfs the spread, so divide in the original scale.
    unscaled: FloatArray = np.ldexp(centred, int(exp2)) / (float(np.ldexp(std, int(exp2))) + eps)
    return unscaled
