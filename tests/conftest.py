import os

from hypothesis import HealthCheck, settings

# CI shares two cores with everything else: no per-example deadlines (tests assert
# behaviour, never timings), and a fixed derandomised profile for reproducible runs.
settings.register_profile(
    "ci", deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow], max_examples=50
)
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

#: In CI, a test's own ``@settings(max_examples=N)`` is capped at this many examples: the suite
#: must stay under 15 minutes on 2 cores; locally (no CI variable) every test runs its own N.
CI_MAX_EXAMPLES = 100


def pytest_collection_modifyitems(config, items):
    if not os.environ.get("CI") or os.environ.get("HYPOTHESIS_PROFILE"):
        return
    for item in items:
        test = getattr(item, "obj", None)
        # @given keeps its settings on the wrapped test and reads them at each call
        # (hypothesis.core: wrapped_test._hypothesis_internal_use_settings)
        own = getattr(test, "_hypothesis_internal_use_settings", None)
        if own is not None and own.max_examples > CI_MAX_EXAMPLES:
            test._hypothesis_internal_use_settings = settings(own, max_examples=CI_MAX_EXAMPLES)
