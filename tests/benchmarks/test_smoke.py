"""Every benchmark runs: each script in ``benchmarks/`` in a subprocess with ``--smoke``
(seconds, tiny sizes), exits 0 and ends with one JSON line holding its documented keys
(``chaos.py`` runs at a small real size in tests/deploy/test_multinode.py instead).

No timings are checked (a benchmark is not a test). A script added to ``benchmarks/``
without an entry in :data:`SMOKE` or :data:`ELSEWHERE` fails
:func:`test_every_benchmark_is_smoke_tested`, so none can rot unnoticed. Scripts that
start their own Ray cluster carry the ``ray`` marker and share the Ray tests' xdist
group, so they never run beside another cluster.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
SLOW = pytest.mark.slow
RAY = (pytest.mark.ray, pytest.mark.xdist_group("ray"))

SMOKE: dict[str, tuple[set[str], tuple[pytest.MarkDecorator, ...]]] = {
    "api.py": ({"leaderboard_p50_ms", "leaderboard_p99_ms", "matches_p50_ms", "matches_p99_ms", "rps",
                "solo_leaderboard_p50_ms", "solo_matches_p50_ms", "floor_p99_ms", "errors", "agents", "matches",
                "clients", "workers", "cpus", "seed_s"}, (SLOW,)),
    "connected.py": ({"env", "matches", "in_process_mps", "connected_mps", "ratio", "delayed_mps", "rtt_p50_ms",
                      "rtt_p99_ms"}, (SLOW,)),
    "connected_faults.py": ({"matches", "lost", "duplicated", "ratings_match_rebuild", "baseline_mps", "faults_mps",
                             "pace_ratio", "responses_5xx", "reconnects"}, (SLOW,)),
    "engine.py": ({"env", "device", "naive_mps", "pettingzoo_random_mps", "engine_mps", "ratio_vs_naive",
                   "device_mps", "cpu_mps", "device_summary_mps", "cpu_summary_mps", "ratio_device_vs_cpu",
                   "ratio_summary_device_vs_cpu"}, ()),
    "final_evaluation.py": ({"arena_matches", "equal_games_matches", "round_robin_matches", "ratio_vs_equal_games",
                             "ratio_vs_round_robin", "certified_pairs", "wrong_pairs", "all_certified",
                             "arena_per_seed", "equal_games_per_seed", "round_robin_per_seed", "agents", "top_k",
                             "confidence", "seeds", "results", "wall_s"}, ()),
    "hide_and_seek.py": ({"generations", "env_steps", "env_steps_per_s", "chasing_rates", "fort_rates",
                          "ramp_use_rates", "ramp_defense_rates", "fort_rate_max", "ramp_use_rate_max",
                          "ramp_defense_rate_max", "first_generation", "phases_in_order", "hider_mu", "seeker_mu",
                          "wall_s", "device", "config", "shaped", "baseline_rates", "core_steps_per_s",
                          "baseline_core_steps_per_s", "core_speedup", "baseline_env_steps_per_s", "speedup",
                          "rate_agreement", "evaluated", "exploiters"}, ()),
    "idle.py": ({"cpu_share_settled", "db_growth_mb_per_hour", "file_growth_mb_per_hour", "matches_per_s_settled",
                 "settled", "settle_s", "baseline_cpu_share", "baseline_db_growth_mb_per_hour",
                 "baseline_file_growth_mb_per_hour", "baseline_matches_per_s", "window_s", "trickle_matches_per_s",
                 "cpus", "affinity"}, (SLOW,)),
    # The recording numbers of SQLite must be there: a failing writer once dropped them silently.
    "league.py": ({"naive_mps", "league_mps", "ratio", "scheduled", "recorded", "lost", "duplicated",
                   "sqlite_executemany_rows_per_s", "sqlite_json_document_rows_per_s", "sqlite_arena_rows_per_s",
                   "sqlite_recorder_rows_per_s", "sqlite_ingest_ratio", "rating_50_agents_one_at_a_time_mps",
                   "rating_50_agents_waves_mps"}, (SLOW, *RAY)),
    "learning.py": ({"c4_vs_heuristic", "c4_vs_random", "env_steps_per_s", "naive_env_steps_per_s",
                     "hs_generations", "hs_door_block_rates", "hs_hider_ratings", "hs_env_steps_per_s"}, ()),
    "process_faults.py": ({"requests", "lost", "duplicated", "slots_stuck", "responses_5xx", "rebuild_equals_live",
                           "seconds", "kills"}, (SLOW,)),
    "probe.py": ({"env", "budgets_env_steps", "games", "trained_target", "trained_target_strength", "random",
                  "heuristic", "random_init_mlp", "league_trained"}, (SLOW,)),
    "probe_load.py": ({"env", "seconds_per_phase", "rounds", "batch", "cpus", "load_average",
                       "ladder_alone_matches_per_s", "ladder_with_service_probe_matches_per_s",
                       "ladder_with_naive_probe_matches_per_s", "service_probe_ratio", "naive_probe_ratio",
                       "service_probe_env_steps_per_s", "naive_probe_env_steps_per_s", "per_round_matches_per_s"},
                      (SLOW,)),
    "ratings.py": ({"n", "package_updates_per_s", "fast_updates_per_s", "ratio", "fast_scalar_updates_per_s",
                    "scalar_ratio", "max_abs_diff"}, ()),
    "scheduling.py": ({"ours_matches", "uniform_matches", "ratio", "kendall_tau", "ours_per_seed", "uniform_per_seed",
                       "all_resolved", "board", "agents", "batch", "seeds", "wall_s"}, ()),
}
"""Script -> (keys its last JSON line must have, marks)."""

ELSEWHERE = {"fingerprints.py": "tests/evaluation/test_fingerprints.py", "gym.py": "tests/gym/test_vector.py",
             "export.py": "tests/datasets/test_export.py",
             "onnx_sandbox.py": "tests/agents/test_onnx_sandbox.py"}
"""Scripts whose smoke run is tested beside their package's tests."""

FULL_RUN = {"chaos.py": "tests/deploy/test_multinode.py"}
"""Scripts the suite runs at a real (small) size instead of ``--smoke``, checking their JSON's
keys and values there: ``chaos.py`` on two Ray nodes with every fault (its one-node smoke
checked nothing that run does not)."""


def test_every_benchmark_is_smoke_tested():
    scripts = {p.name for p in BENCHMARKS.glob("*.py")}
    assert scripts == set(SMOKE) | set(ELSEWHERE) | set(FULL_RUN), \
        "add the new benchmark to SMOKE (a --smoke mode and its keys)"
    for script, test in ELSEWHERE.items():
        text = (ROOT / test).read_text()
        assert f'"{script}"' in text and '"--smoke"' in text, f"{test} no longer runs {script} --smoke"
    for script, test in FULL_RUN.items():
        text = (ROOT / test).read_text()
        assert f'"{script}"' in text and "json.loads" in text, f"{test} no longer runs {script} and reads its JSON"


@pytest.mark.parametrize("script", [pytest.param(name, marks=marks) for name, (_, marks) in SMOKE.items()])
def test_smoke_mode_exits_0_and_prints_its_json_keys(script: str):
    done = subprocess.run([sys.executable, str(BENCHMARKS / script), "--smoke"], check=False, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{script} --smoke failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    last = done.stdout.strip().splitlines()[-1]
    result = json.loads(last)
    missing = SMOKE[script][0] - result.keys()
    assert not missing, f"{script}'s JSON lacks {sorted(missing)}: {last[:2000]}"
