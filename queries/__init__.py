"""The report SQL files (``sweepkit query`` lists them): one ``<name>.sql`` per report, package data."""
