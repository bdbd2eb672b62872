"""The browser fixture for tests/ui (tests/browser.py: one headless Chromium per test module)."""

from tests.browser import chromium  # noqa: F401
