"""Shared test configuration: hypothesis profiles.

``ci`` (the default) keeps ``make test`` well inside the CI budget; ``fuzz`` is for long local runs:
``HYPOTHESIS_PROFILE=fuzz make test``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# derandomize: the same examples on every run. A random one made sympy's own sympify (the oracle of
# tests/property/test_sym_expr_roundtrip.py) compute for over 12 minutes in one CI run, where the library refused
# the text at once; a CI run must not depend on the draw. The fuzz profile and the atheris harnesses still explore.
settings.register_profile(
    "ci",
    max_examples=200,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile(
    "fuzz",
    max_examples=20_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
