"""ONNX validation: every hostile model is refused with a message that says what to fix,
honest ones (and those that only misbehave in play) pass, and the ``onnx`` spec arch
leaves the registry archs as they were."""

from __future__ import annotations

import resource

import onnx
import pytest

from agents.checkpoint_spec import make_spec, validate_spec
from agents.onnx_agents.model import MAX_OPSET, MIN_OPSET
from agents.onnx_agents.policy import stored_onnx, validate_onnx_bytes
from envs.errors import InvalidSubmission
from tests.agents.onnx_corpus import (
    ENV,
    HostileOnnx,
    build_model,
    honest_model,
    hostile_corpus,
    linear_graph,
    play_time_hostiles,
    spec_json,
)

CORPUS = hostile_corpus()


@pytest.mark.timeout(60)  # a hang guard, not a timing assert: the endless loop must end
@pytest.mark.parametrize("case", CORPUS, ids=[c.name for c in CORPUS])
def test_hostile_model_is_refused_with_a_clear_message(case: HostileOnnx) -> None:
    with pytest.raises(InvalidSubmission) as info:
        validate_onnx_bytes(case.data, case.spec, case.max_bytes, probe_limit_s=0.5)
    message = str(info.value)
    assert all(part in message for part in case.expect), message


def test_corpus_covers_the_issue_list() -> None:
    """The cases the issue names are all in the shared corpus (the API tests reuse it)."""
    names = {c.name for c in CORPUS}
    assert {"truncated_protobuf", "external_traversal", "custom_op_node",
            "initializer_claims_2gb", "endless_loop", "constant_nan", "wrong_input_shape",
            "wrong_dtype", "two_inputs", "opset_too_old", "opset_too_new", "oversize"} <= names


def test_honest_model_passes_and_is_identified_by_its_bytes() -> None:
    data = honest_model(seed=3)
    model = validate_onnx_bytes(data, spec_json())
    assert model.data == data and len(model.sha256) == 64
    assert (model.input_name, model.output_name, model.opset) == ("obs", "logits", 17)
    assert model.spec.arch == "onnx" and model.spec.obs_shape == (3, 3, 2)
    assert validate_onnx_bytes(honest_model(seed=4), spec_json()).sha256 != model.sha256


@pytest.mark.parametrize("opset", [MIN_OPSET, MAX_OPSET])
def test_both_ends_of_the_opset_range_are_accepted(opset: int) -> None:
    data = build_model(*linear_graph(), opset=opset).SerializeToString()
    assert validate_onnx_bytes(data, spec_json()).opset == opset


@pytest.mark.parametrize(("env_id", "role"), [("simple_tag-v3", "prey"), ("rps-v2", None)])
def test_other_envs_and_roles_check_their_own_shapes(env_id: str, role: str | None) -> None:
    data = build_model(*linear_graph(env_id, role=role), env_id, role=role).SerializeToString()
    assert validate_onnx_bytes(data, spec_json(env_id, role)).spec.env == env_id
    with pytest.raises(InvalidSubmission, match="input 'obs' has shape"):
        validate_onnx_bytes(honest_model(), spec_json(env_id, role))  # a tictactoe model


@pytest.mark.parametrize("name", sorted(play_time_hostiles()))
def test_play_time_hostiles_pass_validation(name: str) -> None:
    """They behave on the probe batches; tests/agents/test_onnx_policy.py plays them."""
    assert validate_onnx_bytes(play_time_hostiles()[name], spec_json()).spec.env == ENV


def test_memory_bomb_fails_inside_the_arena_cap_without_allocating_it() -> None:
    """2 GiB asked at run time: refused by the capped arena, the process never holds it."""
    bomb = next(c for c in CORPUS if c.name == "memory_bomb")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    with pytest.raises(InvalidSubmission, match="failed on a probe batch"):
        validate_onnx_bytes(bomb.data, bomb.spec)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 1024


def test_initializer_listed_as_input_is_not_an_extra_input() -> None:
    """Old exporters list initializers among the inputs; they are weights, not inputs."""
    model = build_model(*linear_graph())
    model.graph.input.append(onnx.helper.make_tensor_value_info("W", onnx.TensorProto.FLOAT,
                                                                [18, 9]))
    assert validate_onnx_bytes(model.SerializeToString(), spec_json()).input_name == "obs"


def test_onnx_spec_hparams_are_informational_but_bounded() -> None:
    spec = validate_spec({**spec_json(), "hparams": {"source_arch": "resnet", "blocks": 4}})
    assert spec.hparams == {"source_arch": "resnet", "blocks": 4}
    assert validate_spec(spec_json()).hparams == {}
    for bad in ({"nested": {"a": 1}}, {"x": "y" * 300}, {f"k{i}": i for i in range(17)}, [1]):
        with pytest.raises(InvalidSubmission, match="hparam"):
            validate_spec({**spec_json(), "hparams": bad})


def test_registry_archs_are_unchanged_and_unknown_arch_names_onnx() -> None:
    assert make_spec(ENV, "mlp").hparams == {"hidden": [256, 256], "activation": "relu"}
    assert make_spec(ENV, "cnn").arch == "cnn"
    with pytest.raises(InvalidSubmission, match=r"unknown arch 'resnet'.*cnn, mlp.*'onnx'"):
        validate_spec({**spec_json(), "arch": "resnet"})


def test_stored_model_repeats_the_static_checks_only() -> None:
    data = play_time_hostiles()["loop_in_play"]
    assert stored_onnx(data, spec_json()) == validate_onnx_bytes(data, spec_json())
    traversal = next(c for c in CORPUS if c.name == "external_traversal")
    with pytest.raises(InvalidSubmission, match="external data"):
        stored_onnx(traversal.data, traversal.spec)
