"""ONNX agents: untrusted ``.onnx`` policies checked, run and exported.

* :mod:`~agents.onnx_agents.model`: static checks of the protobuf before any runtime sees it.
* :mod:`~agents.onnx_agents.session`: restricted onnxruntime sessions with deadlines
  (used inside the worker processes only).
* :mod:`~agents.onnx_agents.sandbox`: the pools of confined worker processes every graph
  runs in (:mod:`~agents.onnx_agents.process`, :mod:`~agents.onnx_agents.worker`,
  :mod:`~agents.onnx_agents.confine`, :mod:`~agents.onnx_agents.wire`).
* :mod:`~agents.onnx_agents.probe`: probe observations from real play.
* :mod:`~agents.onnx_agents.policy`: validation and the batched :class:`OnnxPolicy`.
* :mod:`~agents.onnx_agents.export`: our registry checkpoints as ONNX.
"""
