"""matplotlib figures (imported lazily; the numerical code never imports this package).

Modules: ``design`` (interaction plots of the design), ``emmeans`` (EMMs with intervals),
``ranef`` (caterpillar plots of conditional modes), ``residuals`` (residual checks),
``resample`` and ``simulate`` (figures of those analyses).
"""

__all__: list[str] = []
