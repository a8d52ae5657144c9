"""A model built once and run many times: :class:`Session`, and :func:`run_model`, its one-shot form.

The public path of :mod:`gather_scatter.models.session`, where they live (with the rest of what
runs whole models); ``gather_scatter.Session`` and ``gather_scatter.run_model`` are the same objects.
"""

from .models.plan import Plan, PlanEntry
from .models.session import NodeArg, Session, run_model

__all__ = ["NodeArg", "Plan", "PlanEntry", "Session", "run_model"]
