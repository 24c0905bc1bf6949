"""Plugins that put tokcore into a serving stack from the stack's own plugin system.

- :mod:`tokcore.plugins.vllm`: vLLM's ``vllm.general_plugins`` entry point, which every
  install of tokcore declares (no extra to install). It changes nothing unless
  ``TOKCORE_VLLM_PLUGIN`` turns it on; then vLLM's streams are written by the stream writer,
  the same bytes (its modes: the module's docstring).

Nothing here is imported by ``import tokcore``; each module imports its stack only when its
entry point is called.
"""
