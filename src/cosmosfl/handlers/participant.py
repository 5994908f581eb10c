"""`Participant`: what a client handler needs of a client, as a protocol.

Handlers are typed against this, not against `Client`, so that no handler module imports
client.py: `Client` resolves its default handlers by reference (`resolve_handlers`), and the
client layer holds no import cycle. `Client` has every member below, and so may any other
object a handler set serves (a test double, a client of another framework's making).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from cosmosfl.core.tasks import OWN_MODEL
from cosmosfl.learners.base import Learner


class Participant(Protocol):
    """A client as its handlers see it: its learner and model slots, private data and U."""

    id: int
    learner: Learner
    train: tuple[np.ndarray, np.ndarray]  # private training data (x, y)

    @property
    def num_classes(self) -> int: ...

    def public(self) -> np.ndarray:
        """The public set U."""
        ...

    def array_context(self) -> dict[str, int]:
        """The sizes a received array is checked against: n = |U|, m = classes."""
        ...

    def split(self, name: str = "test") -> tuple[np.ndarray, np.ndarray]:
        """The data an evaluation reads: "test" or "validation"."""
        ...

    def slot(self, name: str = OWN_MODEL) -> Learner:
        """The model a request names (`OWN_MODEL`: the learner)."""
        ...
