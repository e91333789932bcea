"""An app with a durable entity: the local host must refuse it at start, naming the function."""

from __future__ import annotations

import azure.durable_functions as df

app = df.DFApp()


@app.entity_trigger(context_name="context")
def counter_entity(context: df.DurableEntityContext) -> None:
    context.set_state((context.get_state(lambda: 0) or 0) + 1)
