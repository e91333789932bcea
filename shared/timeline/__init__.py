"""Time over a collection's range: how it is cut into chunk windows, and what a collected window may still lack.

``planning`` (consecutive half-open windows over [start, end)), ``latency`` (records arrive late: which windows are
provisional), ``retention`` (which windows the service may already have deleted). Pure functions.

May import: shared.
"""
