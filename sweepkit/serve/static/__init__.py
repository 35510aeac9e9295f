"""The what-if explorer's pages, scripts and styles (package data, served by sweepkit.serve.app)."""
