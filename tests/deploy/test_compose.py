"""docker-compose.yml and .env.example, checked without a Docker engine.

1. The file validates against the Compose specification's JSON schema, as written and
   after interpolation with the values of .env.example (``compose-spec.json`` here is
   the upstream schema, see README.md in this folder).
2. It agrees with the application: every ``ARENA_*`` variable is a field of
   :class:`arena.core.settings.Settings`, the values compose passes parse as Settings and
   point at services that exist, the published port is the app's port, the commands
   parse with the real ``arena`` CLI.
3. It is operable: named volumes are declared, every service has a healthcheck and
   waits for its dependencies to be healthy, Ray nodes share one auth token, the GPU
   service reserves NVIDIA devices.
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Any

import jsonschema
import pytest
import typer
from sqlalchemy.engine import make_url

from arena.core.settings import Settings
from tests.deploy.deployfiles import (
    ROOT,
    SCHEMA_FILE,
    InterpolationError,
    command_words,
    interpolate,
    interpolate_string,
    load_compose,
    load_schema,
    read_env_file,
    variable_uses,
)

# sha256 of tests/deploy/compose-spec.json as shipped in check-jsonschema 0.39.0
# (check_jsonschema/builtin_schemas/vendor/compose-spec.json, recorded in its RECORD and
# vendor/sha256/compose-spec.sha256).
SCHEMA_SHA256 = "d549057ebc2925f39f62799eab0db7b9e2c18b35b6c00595199116da3ed10e64"

# Values for the secrets .env.example leaves empty (compose refuses to start without them).
SECRETS = {"POSTGRES_PASSWORD": "pg-secret-0123", "RAY_AUTH_TOKEN": "ab" * 32}

SETTINGS_VARS = {f"ARENA_{name.upper()}" for name in Settings.model_fields}
RAY_NODES = ("ray-head", "ray-worker", "ray-worker-gpu")
RAY_DRIVERS = ("api", "league")


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    return load_compose()


@pytest.fixture(scope="module")
def env_example() -> tuple[dict[str, str], dict[str, str]]:
    return read_env_file()


@pytest.fixture(scope="module")
def compose(raw, env_example) -> dict[str, Any]:
    """The compose document as `docker compose` sees it with .env made from .env.example."""
    assigned, _ = env_example
    return interpolate(raw, {**assigned, **SECRETS})


@pytest.fixture(scope="module")
def services(compose) -> dict[str, dict[str, Any]]:
    return compose["services"]


def schema_errors(document: dict[str, Any]) -> list[str]:
    schema = load_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
            for e in validator.iter_errors(document)]


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def option(words: list[str], name: str) -> str:
    """The value of ``--name=value`` (or ``--name value``) in a command line."""
    for i, word in enumerate(words):
        if word.startswith(f"{name}="):
            return word.split("=", 1)[1]
        if word == name and i + 1 < len(words):
            return words[i + 1]
    raise AssertionError(f"{name} not in {words}")


def parse_arena_cli(args: list[str]) -> dict[str, Any]:
    """Parse ``arena <args>`` with the real CLI (nothing runs); returns the leaf's params.

    Raises the CLI's usage error (unknown option, bad value) as the command would.
    """
    from arena.cli import app

    # Typer ships its own copy of click, so the group is recognised by what it does.
    command = typer.main.get_command(app)
    ctx, name, rest = None, "arena", list(args)
    while hasattr(command, "get_command"):
        ctx = command.context_class(command, info_name=name, parent=ctx)
        name, rest = rest[0], rest[1:]
        sub = command.get_command(ctx, name)
        assert sub is not None, f"`arena` has no command {name!r}"
        command = sub
    return command.make_context(name, rest, parent=ctx).params


# --- the Compose specification ---------------------------------------------------------

def test_vendored_schema_is_the_pinned_upstream_copy() -> None:
    assert hashlib.sha256(SCHEMA_FILE.read_bytes()).hexdigest() == SCHEMA_SHA256
    assert load_schema()["title"] == "Compose Specification"


def test_compose_file_follows_the_specification_as_written(raw) -> None:
    assert schema_errors(raw) == []


def test_compose_file_follows_the_specification_after_interpolation(compose) -> None:
    assert schema_errors(compose) == []


@pytest.mark.parametrize("breakage", [
    ("api", "helthcheck", {"test": ["CMD", "true"]}),                        # misspelt key
    ("api", "depends_on", {"redis": {"condition": "service_ready"}}),       # unknown condition
    ("ray-worker", "deploy", {"replicas": 2, "resources": {"reservations": {
        "devices": [{"driver": "nvidia", "count": 1}]}}}),          # devices need capabilities
])
def test_the_schema_catches_a_broken_file(raw, breakage) -> None:
    service, key, value = breakage
    broken = {**raw, "services": {**raw["services"],
                                  service: {**raw["services"][service], key: value}}}
    assert schema_errors(broken)


def test_required_secrets_stop_compose_while_unset(raw, env_example) -> None:
    assigned, _ = env_example
    required = {u.name for u in variable_uses(raw) if u.op in (":?", "?")}
    assert required == set(SECRETS)
    for name in required:
        assert assigned[name] == "", f"{name} must be left empty in .env.example"
        with pytest.raises(InterpolationError, match=name):
            interpolate(raw, {**assigned, **SECRETS, name: ""})


def test_interpolation_follows_compose_rules() -> None:
    env = {"SET": "v", "EMPTY": ""}
    assert interpolate_string("a$${SET}b", env) == "a${SET}b"
    assert interpolate_string("${SET:-d}|${EMPTY:-d}|${UNSET:-d}", env) == "v|d|d"
    assert interpolate_string("${EMPTY-d}|${UNSET-d}", env) == "|d"
    assert interpolate_string("${SET:+alt}|${EMPTY:+alt}|${EMPTY+alt}", env) == "alt||alt"
    assert interpolate_string("$SET/${SET}", env) == "v/v"
    with pytest.raises(InterpolationError):
        interpolate_string("${EMPTY:?no}", env)
    assert interpolate_string("${EMPTY?no}", env) == ""


# --- agreement with the application ----------------------------------------------------

def test_settings_read_arena_prefixed_field_names() -> None:
    assert Settings.model_config["env_prefix"] == "ARENA_"
    for name, field in Settings.model_fields.items():
        assert field.alias is None and field.validation_alias is None, name


def test_every_arena_variable_is_a_settings_field(raw, env_example) -> None:
    assigned, documented = env_example
    names = {u.name for u in variable_uses(raw)} | set(assigned) | set(documented)
    for service in raw["services"].values():
        names |= set(environment(service))
    arena_names = {n for n in names if n.startswith("ARENA_")}
    assert arena_names, "compose passes no ARENA_* variable at all"
    assert arena_names <= SETTINGS_VARS, f"not settings: {sorted(arena_names - SETTINGS_VARS)}"


def test_env_example_assigns_exactly_the_variables_compose_interpolates(raw, env_example) -> None:
    assigned, _ = env_example
    assert set(assigned) == {u.name for u in variable_uses(raw)}


def test_env_example_documents_every_setting(env_example) -> None:
    assigned, documented = env_example
    arena = {k for k in assigned if k.startswith("ARENA_")} | set(documented)
    assert arena == SETTINGS_VARS
    assert not set(documented) & set(assigned), "a variable both set and documented as fixed"


def test_defaults_in_compose_and_env_example_are_the_settings_defaults(raw, env_example) -> None:
    assigned, _ = env_example
    for use in variable_uses(raw):
        if not use.name.startswith("ARENA_"):
            continue
        default = Settings.model_fields[use.name.removeprefix("ARENA_").lower()].default
        expected = "" if default is None else str(default)
        assert assigned[use.name] == expected, use.name
        if use.op in (":-", "-"):
            assert use.arg == expected, use.name


def test_documented_fixed_values_are_what_compose_sets(services, env_example) -> None:
    _, documented = env_example
    api_env = environment(services["api"])
    for name, doc in documented.items():
        if name in api_env:
            assert doc.replace("<POSTGRES_PASSWORD>", SECRETS["POSTGRES_PASSWORD"]) == api_env[name]
    assert documented["ARENA_HOST"] == option(command_words(services["api"]["command"]), "--host")
    assert documented["ARENA_PORT"] == str(Settings.model_fields["port"].default)


def test_api_environment_is_valid_settings_pointing_at_the_services(
        services, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("ARENA_")]:
        monkeypatch.delenv(name)
    api_env = environment(services["api"])
    for name, value in api_env.items():
        monkeypatch.setenv(name, value)
    settings = Settings()

    db = make_url(settings.database_url)
    assert db.drivername == "postgresql+psycopg"
    db.get_dialect()  # the driver is importable
    pg = services["postgres"]["environment"]
    assert (db.host, db.port) == ("postgres", 5432)
    assert (db.username, db.password, db.database) == (
        pg["POSTGRES_USER"], pg["POSTGRES_PASSWORD"], pg["POSTGRES_DB"])

    assert re.fullmatch(r"redis://redis:6379/\d+", settings.redis_url or "")
    host, port = (settings.ray_address or "").split(":")
    assert host in services and host == "ray-head"
    assert port == option(command_words(services["ray-head"]["command"]), "--port")
    assert str(settings.data_dir) == "/data"
    assert settings.admin_token is None  # empty in .env.example: admin endpoints disabled
    # The league manager reads exactly the same settings.
    assert environment(services["league"]) == api_env


def test_api_publishes_the_settings_port(services) -> None:
    port = Settings.model_fields["port"].default
    published = [str(p) for p in services["api"]["ports"]]
    assert len(published) == 1
    host_side, _, container = published[0].rpartition(":")
    assert container == str(port)
    assert host_side == "8000"  # API_PORT from .env.example
    assert option(command_words(services["api"]["command"]), "--host") == "0.0.0.0"
    test = " ".join(command_words(services["api"]["healthcheck"]["test"]))
    assert f"http://127.0.0.1:{port}/api/v1/health" in test


def test_api_healthcheck_path_is_the_health_route(services) -> None:
    routes = pytest.importorskip("arena.api.routes")
    health = pytest.importorskip("arena.api.routes.health")
    paths = {route.path for route in health.router.routes}
    assert "/health" in paths
    test = " ".join(command_words(services["api"]["healthcheck"]["test"]))
    assert f"{routes.API_PREFIX}/health'" in test


def test_commands_parse_with_the_arena_cli(services) -> None:
    from envs.registry import get_spec

    serve = parse_arena_cli(command_words(services["api"]["command"]))
    assert serve["host"] == "0.0.0.0" and serve["workers"] == 2
    ladder = parse_arena_cli(command_words(services["league"]["command"]))
    assert ladder["workers"] == 2 and ladder["matches"] >= 10**9
    assert get_spec(ladder["env"]).symmetric


def test_the_cli_parser_helper_rejects_unknown_options() -> None:
    with pytest.raises(Exception, match="No such option"):
        parse_arena_cli(["ladder", "run", "--env", "connect_four-v3", "--wrokers", "2"])
    with pytest.raises(Exception, match="valid integer"):
        parse_arena_cli(["ladder", "run", "--matches", "many"])


# --- operability -----------------------------------------------------------------------

def test_named_volumes_are_declared_and_used(raw) -> None:
    declared = set(raw.get("volumes") or {})
    used = set()
    for name, service in raw["services"].items():
        for volume in service.get("volumes", []):
            source = volume["source"] if isinstance(volume, dict) else volume.split(":")[0]
            if not source.startswith((".", "/", "~", "$")):
                assert source in declared, f"{name} mounts undeclared volume {source}"
                used.add(source)
    assert used == declared


def test_data_volume_is_mounted_at_the_data_dir_wherever_match_workers_run(services) -> None:
    data_dir = environment(services["api"])["ARENA_DATA_DIR"]
    # Ray actors build their snapshot cache from a path the driver pickles
    # (SnapshotCacheFactory.snapshot_dir), so every node mounts the data at that path.
    for name in ("api", "league", "ray-worker", "ray-worker-gpu"):
        mounts = {v.split(":")[0]: v.split(":")[1] for v in services[name]["volumes"]}
        assert mounts.get("arena-data") == data_dir, name


def test_every_service_has_a_healthcheck(services) -> None:
    for name, service in services.items():
        check = service.get("healthcheck")
        assert check and not check.get("disable") and command_words(check["test"]), name
        assert command_words(check["test"])[0] in ("CMD", "CMD-SHELL"), name


def test_dependencies_exist_wait_until_healthy_and_have_no_cycle(services) -> None:
    for name, service in services.items():
        depends = service.get("depends_on") or {}
        assert isinstance(depends, dict), f"{name}: use the long depends_on syntax"
        for target, spec in depends.items():
            assert target in services, f"{name} depends on unknown {target}"
            assert target != name
            if "healthcheck" in services[target]:
                assert spec["condition"] == "service_healthy", f"{name} -> {target}"
            # A service that always starts can wait for one that needs a profile only as
            # an optional dependency (compose ignores it while the profile is off).
            if not service.get("profiles") and services[target].get("profiles"):
                assert spec.get("required") is False, f"{name} -> {target}"
    order: list[str] = []

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, f"dependency cycle: {' -> '.join(path + (name,))}"
        if name not in order:
            for target in services[name].get("depends_on") or {}:
                visit(target, path + (name,))
            order.append(name)

    for name in services:
        visit(name, ())
    assert order.index("postgres") < order.index("api") < order.index("league")
    assert order.index("ray-head") < order.index("ray-worker") < order.index("api")
    assert order.index("ray-worker-gpu") < order.index("api")


def test_redis_persists_with_an_fsynced_append_only_file(services) -> None:
    redis = services["redis"]
    words = command_words(redis["command"])
    assert option(words, "--appendonly") == "yes"
    assert option(words, "--appendfsync") == "everysec"
    assert any(v.endswith(":/data") for v in redis["volumes"])
    assert "ping" in " ".join(command_words(redis["healthcheck"]["test"]))


def test_postgres_keeps_its_data_in_a_volume(services) -> None:
    postgres = services["postgres"]
    # The official image keeps PGDATA in /var/lib/postgresql/data up to major 17
    # (18 moved it), so the mount path and the image's major version go together.
    assert re.fullmatch(r"postgres:1[4-7](\.\d+)?(-alpine)?", postgres["image"])
    assert "postgres-data:/var/lib/postgresql/data" in postgres["volumes"]
    assert "pg_isready" in " ".join(command_words(postgres["healthcheck"]["test"]))


def test_ray_head_runs_without_dashboard_and_workers_join_it(services) -> None:
    head = command_words(services["ray-head"]["command"])
    assert command_words(services["ray-head"]["entrypoint"]) == ["ray"]
    assert {"start", "--head", "--block", "--include-dashboard=false"} <= set(head)
    address = f"ray-head:{option(head, '--port')}"
    assert environment(services["api"])["ARENA_RAY_ADDRESS"] == address
    for name in ("ray-worker", "ray-worker-gpu"):
        words = command_words(services[name]["command"])
        assert command_words(services[name]["entrypoint"]) == ["ray"]
        assert {"start", "--block"} <= set(words) and option(words, "--address") == address
        assert address in command_words(services[name]["healthcheck"]["test"])


def test_ray_worker_scales_out(raw, services) -> None:
    worker = services["ray-worker"]
    assert int(worker["deploy"]["replicas"]) >= 1
    assert "${RAY_WORKERS" in raw["services"]["ray-worker"]["deploy"]["replicas"]
    # `--scale ray-worker=N` needs containers without fixed names or host ports.
    assert "container_name" not in worker and "ports" not in worker
    assert "container_name" not in services["ray-worker-gpu"]


def test_every_ray_node_and_driver_presents_the_same_auth_token(raw, services) -> None:
    tokens = set()
    for name in RAY_NODES + RAY_DRIVERS:
        env = environment(services[name])
        assert env.get("RAY_AUTH_MODE") == "token", name
        tokens.add(environment(raw["services"][name])["RAY_AUTH_TOKEN"])
    assert len(tokens) == 1 and next(iter(tokens)).startswith("${RAY_AUTH_TOKEN:?")


def test_drivers_join_the_cluster_before_running_arena(services) -> None:
    for name in RAY_DRIVERS:
        entry = command_words(services[name]["entrypoint"])
        assert entry[:2] == ["/bin/sh", "-c"] and entry[-1] == "arena", name
        script = entry[2]
        assert 'ray start --address="$ARENA_RAY_ADDRESS"' in script
        assert "--num-cpus=0" in script  # no match worker lands on the driver's node
        assert script.rstrip().endswith('&& exec arena "$@"')


def test_arena_services_run_one_image_and_the_gpu_workers_its_cuda_build(services) -> None:
    cpu = {name: services[name] for name in ("ray-head", "ray-worker", "api", "league")}
    assert len({s["image"] for s in cpu.values()}) == 1
    assert len({str(s["build"]) for s in cpu.values()}) == 1
    gpu = services["ray-worker-gpu"]
    assert gpu["image"] == services["api"]["image"] + "-cuda"
    index = {name: services[name]["build"]["args"]["TORCH_INDEX_URL"]
             for name in ("api", "ray-worker-gpu")}
    assert index["api"].endswith("/whl/cpu") and index["ray-worker-gpu"] != index["api"]


def test_gpu_workers_need_the_gpu_profile_and_reserve_nvidia_gpus(services) -> None:
    gpu = services["ray-worker-gpu"]
    assert gpu["profiles"] == ["gpu"]
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert devices and all(d["driver"] == "nvidia" and "gpu" in d["capabilities"] for d in devices)
    assert int(option(command_words(gpu["command"]), "--num-gpus")) >= 1
    for name, service in services.items():
        if name != "ray-worker-gpu":
            assert "gpu" not in (service.get("profiles") or []), name


def test_deployment_docs_describe_every_service_and_volume(raw) -> None:
    docs = (ROOT / "docs" / "deployment.md").read_text()
    for name in [*raw["services"], *raw["volumes"]]:
        assert f"`{name}`" in docs, name
