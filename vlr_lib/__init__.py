"""vlr_lib: verified loss functions, metrics and tools for vision-language retrieval.

Submodules: similarity, losses, goal, metrics, analysis, viz, widgets,
data, features, models, train. Import them explicitly, e.g.
``from vlr_lib import losses``.
"""
__version__ = "0.1.0"
