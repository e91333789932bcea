"""The UAL collector Functions app: one DFApp that only registers the blueprints.

May import: shared.*, activities, orchestrators, http_api.
"""

from __future__ import annotations

import os

import azure.durable_functions as df
import azure.functions as func

from activities.admission import bp as admission_activities
from activities.exchange import bp as exchange_activities
from activities.feed import bp as feed_activities
from activities.finalize import bp as finalize_activity
from activities.graph import bp as graph_activities
from http_api.collections import bp as collections_api
from http_api.doctor import bp as doctor_api
from http_api.follows import bp as follows_api
from http_api.view import bp as view_pages
from orchestrators.budget_entity import bp as budget_entity
from orchestrators.chain_claim_entity import bp as chain_claim_entity
from orchestrators.collect import bp as collect_orchestrator
from orchestrators.follow import bp as follow_orchestrator
from shared.hosting import sdk_timestamps

sdk_timestamps.install_from_env(os.environ)

app = df.DFApp(http_auth_level=func.AuthLevel.FUNCTION)

for blueprint in (
    view_pages,
    collections_api,
    follows_api,
    collect_orchestrator,
    follow_orchestrator,
    budget_entity,
    chain_claim_entity,
    graph_activities,
    exchange_activities,
    feed_activities,
    finalize_activity,
    admission_activities,
    doctor_api,
):
    app.register_functions(blueprint)
