"""Client-side handlers: what a client does for each task of an algorithm.

`base` holds the registry (`ClientHandlers`) and the resolution of an algorithm's
`client_handlers` reference; `default` the model-agnostic tasks every algorithm can use;
`params` the weight tasks of the parameter-sharing baselines; one module per baseline whose
clients do more than that (fedprox, ditto, fedbabu, pfedck, pfedhn, fedct). Only the modules
of parameter-sharing baselines import torch, and only when an algorithm's handlers are loaded.
"""

from cosmosfl.handlers.base import ClientHandlers, handlers_for, resolve_handlers

__all__ = ["ClientHandlers", "handlers_for", "resolve_handlers"]
