"""Browser tests of the curation console: a real headless Chromium (Debian's)."""
