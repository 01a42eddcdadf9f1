"""formulaic's materializer whose factors are evaluated by crossed's one evaluator.

Importing this module registers :class:`SafeMaterializer` with formulaic under
:data:`~crossed.formula.evaluate.MATERIALIZER`; code that asks formulaic for a model matrix
imports it and calls :func:`registered_materializer` first. It is the only module of
:mod:`crossed.formula` that needs formulaic at import.
"""

from __future__ import annotations

import ast
from typing import Any

from formulaic.materializers import PandasMaterializer
from formulaic.model_spec import ModelSpec as FormulaicSpec
from formulaic.utils.variables import Variable
from interface_meta import override

from crossed.formula.evaluate import MATERIALIZER, evaluate, transforms
from crossed.formula.grammar import FormulaError

__all__ = ["SafeMaterializer", "registered_materializer"]


def registered_materializer() -> str:
    """:data:`~crossed.formula.evaluate.MATERIALIZER`, registered with formulaic (this
    module's import registers :class:`SafeMaterializer`): called before formulaic builds
    or rebuilds a model matrix, so that a model spec made in another process (an unpickled
    fit, a Dask worker) finds it."""
    return MATERIALIZER


class SafeMaterializer(PandasMaterializer):  # type: ignore[misc]
    """formulaic's pandas materializer whose factors are evaluated by :func:`evaluate`
    (names are data columns; the stateful transforms keep formulaic's state, so new data
    are transformed as the fitted data were)."""

    REGISTER_NAME = MATERIALIZER
    REGISTER_INPUTS = ()
    REGISTER_PRECEDENCE = -1

    @override
    def _evaluate(self, expr: str, metadata: Any, spec: FormulaicSpec
                  ) -> tuple[Any, set[Variable]]:
        data = self.data_context
        variables: set[Variable] = set()

        def lookup(name: str) -> Any:
            if name not in data:
                raise FormulaError(expr, 0, f"{name!r} is not a column of the data")
            variables.add(Variable(name, roles=("value",), source="data"))
            values = data[name]
            kind = getattr(values, "dtype", None)
            if kind is not None and getattr(kind, "kind", "") in "iu":
                return values.astype(float)  # R computes in doubles
            return values

        state = spec.transform_state

        def stateful(fname: str, node: ast.Call, value: Any, args: list[Any],
                     kwargs: dict[str, Any]) -> Any:
            key = ast.unparse(node).replace('"', r'\\"')
            own = state.setdefault(key, {})
            return transforms()[fname](value, *args, _state=own, _metadata=metadata,
                                     _spec=spec, **kwargs)

        value = evaluate(expr, lookup, stateful=stateful, context=self.context)
        return value, variables

