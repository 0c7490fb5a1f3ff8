"""Hide-and-seek's torch cores: v0 (:mod:`.core`) and v1 (:mod:`.core_v1`) as batched
tensor programs on ``cpu`` or ``cuda``, with the perception they share (:mod:`.view`).

Each mirrors its numpy core step for step (``tests/envs/test_device_hide_and_seek*.py``).
"""
