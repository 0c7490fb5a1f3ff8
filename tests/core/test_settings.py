"""Settings: defaults that work on a fresh machine, ARENA_* overrides, validation."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy
from pydantic import ValidationError

from arena.core.settings import Settings, get_settings, ray_init_kwargs, resolved_database_url


@pytest.fixture(autouse=True)
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """No ARENA_* variables from the outside, cwd in a fresh directory, cache cleared."""
    for name in list(os.environ):
        if name.upper().startswith("ARENA_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


def test_defaults(clean_env: Path) -> None:
    s = Settings()
    assert s.data_dir == clean_env / ".arena"
    assert s.data_dir.is_absolute()
    assert s.database_url == f"sqlite:///{clean_env}/.arena/arena.db"
    assert s.redis_url is None and s.ray_address is None and s.admin_token is None
    assert s.max_upload_bytes == 64 * 1024 * 1024
    assert s.snapshot_cache_size == 32
    assert (s.host, s.port) == ("127.0.0.1", 8000)
    assert s.redis_dir == clean_env / ".arena" / "redis"
    assert s.snapshot_dir == clean_env / ".arena" / "snapshots"
    assert not s.data_dir.exists()  # building settings has no side effects


def test_env_overrides(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARENA_DATA_DIR", str(clean_env / "elsewhere"))
    monkeypatch.setenv("ARENA_REDIS_URL", "redis://10.0.0.5:6380/2")
    monkeypatch.setenv("ARENA_RAY_ADDRESS", "ray://head:10001")
    monkeypatch.setenv("ARENA_MAX_UPLOAD_BYTES", "1000")
    monkeypatch.setenv("ARENA_SNAPSHOT_CACHE_SIZE", "4")
    monkeypatch.setenv("ARENA_ADMIN_TOKEN", "s3cret-token")
    monkeypatch.setenv("ARENA_HOST", "0.0.0.0")
    monkeypatch.setenv("ARENA_PORT", "9001")
    s = Settings()
    assert s.data_dir == clean_env / "elsewhere"
    assert s.database_url == f"sqlite:///{clean_env}/elsewhere/arena.db"  # follows data_dir
    assert s.redis_url == "redis://10.0.0.5:6380/2"
    assert s.ray_address == "ray://head:10001"
    assert (s.max_upload_bytes, s.snapshot_cache_size) == (1000, 4)
    assert s.admin_token is not None and s.admin_token.get_secret_value() == "s3cret-token"
    assert "s3cret-token" not in repr(s)  # never leaks into logs
    assert (s.host, s.port) == ("0.0.0.0", 9001)


def test_explicit_database_url_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARENA_DATABASE_URL", "postgresql+psycopg://arena@db/arena")
    assert Settings().database_url == "postgresql+psycopg://arena@db/arena"


def test_empty_variables_mean_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARENA_REDIS_URL", "")
    monkeypatch.setenv("ARENA_RAY_ADDRESS", "  ")
    monkeypatch.setenv("ARENA_ADMIN_TOKEN", "")
    monkeypatch.setenv("ARENA_RAY_GPUS_PER_WORKER", "")
    s = Settings()
    assert s.redis_url is None and s.ray_address is None and s.admin_token is None
    assert s.ray_gpus_per_worker is None


def test_a_gpu_share_is_a_fraction_or_whole_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    for value, expected in (("0", 0.0), ("0.25", 0.25), ("2", 2.0)):
        monkeypatch.setenv("ARENA_RAY_GPUS_PER_WORKER", value)
        assert Settings().ray_gpus_per_worker == expected
    monkeypatch.setenv("ARENA_RAY_GPUS_PER_WORKER", "1.5")
    with pytest.raises(ValidationError, match="fraction of one GPU"):
        Settings()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("ARENA_PORT", "0"),
        ("ARENA_PORT", "http"),
        ("ARENA_SNAPSHOT_CACHE_SIZE", "0"),
        ("ARENA_MAX_UPLOAD_BYTES", "-1"),
        ("ARENA_RAY_GPUS_PER_WORKER", "-0.5"),
    ],
)
def test_invalid_values_name_the_field(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError) as info:
        Settings()
    assert name.removeprefix("ARENA_").lower() in str(info.value)


def test_get_settings_is_cached_until_cleared(monkeypatch: pytest.MonkeyPatch) -> None:
    first = get_settings()
    assert get_settings() is first
    monkeypatch.setenv("ARENA_PORT", "8123")
    assert get_settings().port == 8000  # cached
    get_settings.cache_clear()
    assert get_settings().port == 8123


def test_settings_are_frozen() -> None:
    with pytest.raises(ValidationError):
        Settings().port = 1  # type: ignore[misc]


def test_resolved_database_url_creates_the_data_dir(clean_env: Path) -> None:
    s = Settings(data_dir=clean_env / "fresh" / "data")
    url = resolved_database_url(s)
    assert url == s.database_url and s.data_dir.is_dir()
    engine = sqlalchemy.create_engine(url)  # the default really opens on a fresh machine
    with engine.connect() as conn:
        assert conn.execute(sqlalchemy.text("select 1")).scalar() == 1
    engine.dispose()
    assert (s.data_dir / "arena.db").is_file()


def test_resolved_database_url_makes_a_custom_sqlite_folder(clean_env: Path) -> None:
    target = clean_env / "db" / "nested" / "x.db"
    s = Settings(database_url=f"sqlite:///{target}")
    assert resolved_database_url(s) == f"sqlite:///{target}"
    assert target.parent.is_dir()


def test_ray_init_kwargs() -> None:
    local = ray_init_kwargs(Settings())
    assert local == {
        "num_cpus": os.cpu_count(),
        "include_dashboard": False,
        "object_store_memory": 512 * 1024 * 1024,
    }
    assert ray_init_kwargs(Settings(ray_address="auto")) == {"address": "auto"}


def test_an_unreachable_database_gives_a_clear_error_after_a_bounded_wait(tmp_path, monkeypatch):
    """Retried with backoff until the next pause would pass ``timeout_s``, then given up: the waits
    run on a simulated clock, so where it gave up is exact, however busy the machine."""
    from arena.storage import retry as retry_module
    from arena.storage.wiring import open_database
    from envs.errors import ServiceUnavailable
    from tests.waiting import SteppedClock

    clock = SteppedClock()
    monkeypatch.setattr(retry_module, "time", clock.module())
    settings = Settings(data_dir=tmp_path, database_url="postgresql+psycopg://arena:secret@127.0.0.1:1/arena")
    with pytest.raises(ServiceUnavailable) as err:
        open_database(settings, timeout_s=1.0)
    assert clock.sleeps, "it gave up on the first refusal instead of retrying"
    next_pause = min(2 * clock.sleeps[-1], retry_module.BACKOFF.max_s)
    assert clock.elapsed <= 1.0 < clock.elapsed + next_pause, clock.sleeps  # gave up at its deadline
    message = str(err.value)
    assert "ARENA_DATABASE_URL" in message and "secret" not in message and "127.0.0.1:1" in message
