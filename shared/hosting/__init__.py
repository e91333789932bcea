"""Where and on what the app runs.

``platform`` (local or which Azure plan, by the Functions host's own rules), ``azure_settings`` (what a deployment on
Azure must set; the drift test, checkov policy and doctor apply it), ``sdk_timestamps`` (the opt-in speed-up of the
Durable SDK's history parsing).

May import: shared.
"""
