"""Imports tfplace before any test module can import TensorFlow.

tfplace sets TF_USE_LEGACY_KERAS=1, which TensorFlow reads once, at its own
import (see `tfplace/__init__.py`); a test module that imports TensorFlow
first would give every later test in its process Keras 3, and the tf-agents
networks fail there ("'tuple' object has no attribute 'built'"), depending
on which tests xdist runs together.
"""

import tfplace  # noqa: F401
