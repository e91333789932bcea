"""Run the collector end to end on the embedded default: the local durable engine and host, the Microsoft 365
audit API emulator and a local output folder. ``python -m collector_local --help``.

Not deployed (``.funcignore``): this is the "try it on your machine" path and a smoke test of the whole stack.

May import: shared.*, durable_local, m365_emulator.
"""
