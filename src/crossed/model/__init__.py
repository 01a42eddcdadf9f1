"""The model core: the penalised least squares (PLS) problem of a design.

Every engine and every layer above uses it; none of it belongs to one engine.

* ``pls.py`` — :class:`PLS`: ``[Z X y]ᵀ[Z X y]`` in blocks, scaled by Λθ and factored at
  each θ (:class:`Factor`), the profiled REML/ML criterion, the solve for β and the
  spherical random effects, R_X⁻¹ and the conditional variances.
* ``crossprod.py`` — :class:`~crossed.model.crossprod.CrossProducts`: the immutable sums
  over rows that the criterion is a function of (chunk by chunk, added), and PIRLS's
  reweighted products.
* ``closed_forms.py`` — closed forms of first blocks with one or two columns per level,
  and the profiled criterion from a factorisation.
* ``banded.py`` — the factors of a first block with more columns per level, kept in
  band storage.
* ``sparse_map.py`` — the precomputed sparse map of the Schur update.
* ``cholesky.py`` — the blocked two-thread dense Cholesky of the later blocks.
* ``batched.py`` — the criterion at many θ at once (the convergence check's points).
"""

from crossed.model.pls import PLS, Factor, profiled_deviance

__all__ = ["PLS", "Factor", "profiled_deviance"]
