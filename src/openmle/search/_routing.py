"""Several models in one run: :class:`OperatorRouter` sends each request to the model of its
operator (``ModelRequest.operator``).

The CLI builds one from ``openmle search --model draft=SPEC,improve=SPEC,default=SPEC``;
the run directory records each routed model in the manifest (``model.routes``), and the
driver prices each answer with the id of the model that answered it, so a budget's ``usd``
cap counts every model at its own price.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, final

from attrs import field, frozen

from openmle._protocols import OperatorModel
from openmle._types import ModelRequest, ModelResponse, Operator
from openmle.errors import InvalidArgument, InvalidArgumentType

__all__ = ["DEFAULT_ROUTE", "OperatorRouter", "describe_routes", "routed_model"]

DEFAULT_ROUTE = "default"
"""The route name for the operators (and auxiliary calls) without an entry of their own."""


def _routes(value: object) -> dict[Operator, OperatorModel]:
    if not isinstance(value, Mapping):
        raise InvalidArgumentType(
            f"Expected a mapping of operator to model but got routes={value!r} "
            f"(type={type(value).__name__})"
        )
    out: dict[Operator, OperatorModel] = {}
    for key, model in value.items():
        try:
            op = Operator(str(key))
        except ValueError:
            raise InvalidArgument(
                f"routes has an entry for {key!r}, which is no operator; use one of "
                f"{', '.join(o.value for o in Operator)} (and default= for the rest)"
            ) from None
        if not isinstance(model, OperatorModel):
            raise InvalidArgumentType(
                f"Expected an openmle.OperatorModel (async complete(request)) but got "
                f"routes[{op.value!r}]={model!r} (type={type(model).__name__})"
            )
        out[op] = model
    return out


@final
@frozen(kw_only=True)
class OperatorRouter:
    """An :class:`~openmle.OperatorModel` that answers each request with the model of its
    operator (``request.operator``), e.g. a strong model for Draft and a cheap one for Debug.

    Args:
        routes: operator (an :class:`~openmle.Operator` or its name) to the model that answers
            its requests.
        default: the model for the operators without a route, and for auxiliary requests
            (``operator`` None, such as node summaries); None: every operator needs a route,
            and auxiliary requests go to the Draft model.

    Raises:
        InvalidArgument: a route names no operator, or an operator has neither a route nor a
            ``default`` (the message names the operator and the fix).
        InvalidArgumentType: a route or ``default`` is not an ``OperatorModel``.
    """

    routes: Mapping[Operator, OperatorModel] = field(converter=_routes)
    default: OperatorModel | None = None

    def __attrs_post_init__(self) -> None:
        if self.default is not None and not isinstance(self.default, OperatorModel):
            raise InvalidArgumentType(
                f"Expected an openmle.OperatorModel (async complete(request)) but got "
                f"default={self.default!r} (type={type(self.default).__name__})"
            )
        if self.default is None:
            missing = [o.value for o in Operator if o not in self.routes]
            if missing:
                raise InvalidArgument(
                    f"no model for operator {missing[0]!r}: give it a route "
                    f"({missing[0]}=...) or a default model for the operators without one "
                    f"(default=...)"
                )

    def model_for(self, operator: Operator | None) -> OperatorModel:
        """The model that answers requests of ``operator`` (None: auxiliary requests)."""
        if operator is not None and operator in self.routes:
            return self.routes[operator]
        if self.default is not None:
            return self.default
        return self.routes[Operator.DRAFT]

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer ``request`` with the model of its operator (see :meth:`model_for`)."""
        return await self.model_for(request.operator).complete(request)


def routed_model(model: object, operator: Operator | None) -> object:
    """The model that answers ``operator``'s requests: ``model`` itself, or the routed one
    when ``model`` is an :class:`OperatorRouter` (or a wrapper with an ``inner`` router, as
    ``openmle.backends.RecordingModel``).
    """
    router = model if isinstance(model, OperatorRouter) else getattr(model, "inner", None)
    return router.model_for(operator) if isinstance(router, OperatorRouter) else model


def describe_routes(router: OperatorRouter, describe: Any) -> dict[str, Any]:
    """``{route name: describe(model)}`` for the manifest (``default`` included when set)."""
    out = {op.value: describe(m) for op, m in router.routes.items()}
    if router.default is not None:
        out[DEFAULT_ROUTE] = describe(router.default)
    return out
