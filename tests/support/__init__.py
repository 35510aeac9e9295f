"""Test helpers that do not ship in the wheel (the headless-browser driver, a loader for the repository's scripts)."""
