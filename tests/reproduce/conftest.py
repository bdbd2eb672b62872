"""The browser fixture for the report's test (tests/browser.py: one headless Chromium per test module)."""

from tests.browser import chromium  # noqa: F401
