from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from durable_local.host.config import HostConfigError, apply_local_settings, hub_name_of, load_host_json
from durable_local.host.host import check_client_task_hubs
from durable_local.host.loader import AppLoadError, load_app
from tests.host.conftest import APPS


def test_basic_app_is_indexed_from_its_own_metadata() -> None:
    app = load_app(APPS / "basic")
    assert {"chaining", "fan_out", "approval", "parent", "child", "counter"} <= set(app.orchestrators)
    assert {"say_hello", "flaky", "write_blob", "sleepy"} <= set(app.activities)
    by_name = {f.name: f for f in app.http}
    assert by_name["start"].methods == ("POST",)
    assert by_name["start"].auth_level == "anonymous"
    assert [c.parameter for c in by_name["start"].clients] == ["client"]
    assert by_name["start"].is_async
    assert by_name["echo"].context_parameter == "context"
    assert not by_name["echo"].is_async
    assert app.activities["sleepy"].is_async
    assert app.activities["say_hello"].input_parameter == "name"


def test_blueprint_names_and_default_auth_level() -> None:
    app = load_app(APPS / "blueprint")
    assert set(app.orchestrators) == {"greet"}
    assert set(app.activities) == {"shout"}
    levels = {f.name: f.auth_level for f in app.http}
    assert levels == {"hello_start": "function", "admin_only": "admin", "open_route": "anonymous"}


def test_entity_functions_are_indexed_under_their_entity_name() -> None:
    app = load_app(APPS / "entities")
    assert set(app.entities) == {"tally", "Ledger"}  # entity_name wins over the function name
    assert set(app.orchestrators) == {"count_up", "calls_failing_operation"}
    assert hasattr(app.entities["Ledger"].handle, "entity_function")
    sample = load_app(APPS / "entity_counter")
    assert set(sample.entities) == {"Counter"} and set(sample.orchestrators) == {"orchestrator"}
    assert "Counter" in sample.function_names


def test_an_entity_trigger_with_another_binding_is_refused(tmp_path: Path) -> None:
    (tmp_path / "function_app.py").write_text(
        textwrap.dedent(
            """
            import azure.durable_functions as df
            app = df.DFApp()

            @app.blob_input(arg_name="blob", path="c/b", connection="AzureWebJobsStorage")
            @app.entity_trigger(context_name="context")
            def counter(context, blob):
                context.set_state(1)
            """
        )
    )
    with pytest.raises(AppLoadError, match=r"'counter'.*'blob'.*blob"):
        load_app(tmp_path)


def test_unsupported_binding_is_refused_naming_function_and_binding(tmp_path: Path) -> None:
    (tmp_path / "function_app.py").write_text(
        textwrap.dedent(
            """
            import azure.functions as func
            app = func.FunctionApp()

            @app.route(route="q")
            @app.queue_output(arg_name="msg", queue_name="out", connection="AzureWebJobsStorage")
            def enqueue(req: func.HttpRequest, msg: func.Out[str]) -> str:
                return "x"
            """
        )
    )
    with pytest.raises(AppLoadError, match=r"'enqueue'.*'msg'.*queue"):
        load_app(tmp_path)


def test_missing_script_and_import_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(AppLoadError, match="does not exist"):
        load_app(tmp_path)
    (tmp_path / "function_app.py").write_text("import not_a_module_anywhere\n")
    with pytest.raises(AppLoadError, match="ModuleNotFoundError"):
        load_app(tmp_path)


def test_host_json_settings() -> None:
    settings = load_host_json(APPS / "basic")
    assert settings.hub_name_setting == "BasicHub" and hub_name_of(settings, {}) == "BasicHub"
    assert settings.max_concurrent_activities == 4
    assert settings.partition_count == 2
    assert settings.max_queue_polling_interval == 1.0
    assert load_host_json(APPS / "blueprint").route_prefix == "v1"
    entities = load_host_json(APPS / "entities")
    assert (entities.max_entity_operation_batch_size, entities.entity_message_reorder_window_minutes) == (2, 30)


def test_host_json_defaults_and_errors(tmp_path: Path) -> None:
    assert load_host_json(tmp_path).route_prefix == "api"
    (tmp_path / "host.json").write_text(
        json.dumps({"version": "2.0", "extensions": {"durableTask": {"maxConcurrentActivityFunctions": 0}}})
    )
    with pytest.raises(HostConfigError, match="maxConcurrentActivityFunctions"):
        load_host_json(tmp_path)
    assert load_host_json(APPS / "basic").store_inputs_in_orchestration_history is False
    (tmp_path / "host.json").write_text(
        json.dumps({"version": "2.0", "extensions": {"durableTask": {"storeInputsInOrchestrationHistory": 1}}})
    )
    with pytest.raises(HostConfigError, match="storeInputsInOrchestrationHistory"):
        load_host_json(tmp_path)
    (tmp_path / "host.json").write_text(
        json.dumps({"version": "2.0", "extensions": {"durableTask": {"storeInputsInOrchestrationHistory": True}}})
    )
    assert load_host_json(tmp_path).store_inputs_in_orchestration_history is True


def test_local_settings_fill_the_environment_but_real_variables_win(tmp_path: Path) -> None:
    (tmp_path / "local.settings.json").write_text(json.dumps({"Values": {"A_SETTING": "from-file", "B": "file"}}))
    env = {"B": "real"}
    applied = apply_local_settings(tmp_path, env)
    assert env == {"A_SETTING": "from-file", "B": "real"}
    assert applied == ["A_SETTING"]


def test_durable_client_for_another_task_hub_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "function_app.py").write_text(
        textwrap.dedent(
            """
            import azure.functions as func
            import azure.durable_functions as df
            app = df.DFApp()

            @app.route(route="other")
            @app.durable_client_input(client_name="client", task_hub="%OTHER_HUB%")
            async def other(req: func.HttpRequest, client) -> str:
                return "x"
            """
        )
    )
    loaded = load_app(tmp_path)
    monkeypatch.setenv("OTHER_HUB", "ArchiveHub")
    with pytest.raises(HostConfigError, match=r"'other'.*'client'.*'ArchiveHub'.*'MainHub'"):
        check_client_task_hubs(loaded, "MainHub")
    monkeypatch.setenv("OTHER_HUB", "mainhub")  # the same hub, spelt in another case: fine
    check_client_task_hubs(loaded, "MainHub")


def test_the_host_tells_the_app_it_runs_locally_as_func_start_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """Core Tools sets FUNCTIONS_CORETOOLS_ENVIRONMENT=true for the host and its workers; apps (and the Functions
    host's own rules) take it as "local development", ahead of platform variables such as CONTAINER_NAME that a
    developer's container may carry."""
    from durable_local.host import LocalHost

    monkeypatch.delenv("FUNCTIONS_CORETOOLS_ENVIRONMENT", raising=False)
    served = LocalHost(APPS / "basic", port=0, store="memory", drain_timeout=5)
    served.start()
    try:
        assert os.environ.get("FUNCTIONS_CORETOOLS_ENVIRONMENT") == "true"
    finally:
        served.stop()


def test_every_refused_binding_of_every_function_is_reported_at_once(tmp_path: Path) -> None:
    """The Functions host logs "The 'f' function is in error: ..." for each function it cannot load: one start shows
    them all. Before, the first refusal stopped the load and an app needed a restart per binding."""
    (tmp_path / "function_app.py").write_text(
        textwrap.dedent(
            """
            import azure.functions as func
            app = func.FunctionApp()

            @app.queue_trigger(arg_name="msg", queue_name="work", connection="AzureWebJobsStorage")
            @app.blob_output(arg_name="copy", path="out/{rand-guid}", connection="AzureWebJobsStorage")
            def on_message(msg: func.QueueMessage, copy: func.Out[str]) -> None:
                pass

            @app.route(route="q")
            @app.queue_output(arg_name="out", queue_name="work", connection="AzureWebJobsStorage")
            @app.blob_input(arg_name="config", path="c/config.json", connection="AzureWebJobsStorage")
            def enqueue(req: func.HttpRequest, out: func.Out[str], config: str) -> str:
                return "x"

            @app.timer_trigger(schedule="0 0 * * * *", arg_name="timer")
            @app.retry(strategy="fixedDelay", max_retry_count="3", delay_interval="00:00:01")
            def hourly(timer: func.TimerRequest) -> None:
                pass

            @app.route(route="fine")
            def fine(req: func.HttpRequest) -> str:
                return "ok"
            """
        )
    )
    with pytest.raises(AppLoadError) as refused:
        load_app(tmp_path)
    expected = [
        "The 'on_message' function is in error: trigger 'msg' of type queueTrigger is not supported by the local host.",
        "The 'on_message' function is in error: binding 'copy' of type blob is not supported by the local host.",
        "The 'enqueue' function is in error: binding 'config' of type blob is not supported by the local host.",
        "The 'enqueue' function is in error: binding 'out' of type queue is not supported by the local host.",
        "The 'hourly' function is in error: retry strategy 'fixedDelay' must be fixed_delay or exponential_backoff (as "
        "written: the Python worker sends anything else as the protobuf enum label, which fails indexing)",
    ]
    message = str(refused.value)
    missing = [problem for problem in expected if problem not in message]
    assert not missing, message
    assert refused.value.problems == expected and "(5 problems)" in message
    assert message.count("no emulation of queues") == 1  # what runs here is said once
