import os

from hypothesis import HealthCheck, settings

# CI shares two cores with everything else: no per-example deadlines (tests assert
# behaviour, never timings), and a fixed derandomised profile for reproducible runs.
settings.register_profile(
    "ci", deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow], max_examples=50
)
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
