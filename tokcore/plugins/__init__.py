"""Plugins that put tokcore into a serving stack from the stack's own plugin system.

- :mod:`tokcore.plugins.vllm`: vLLM's ``vllm.general_plugins`` entry point, which every
  install of tokcore declares (no extra to install). It changes nothing unless
  ``TOKCORE_VLLM_PLUGIN`` turns it on; then vLLM's stream generators are replaced, for the
  requests they cover, by ones that write the same bytes with the stream writer (vLLM 0.32.0,
  0.33.0 and 0.34.0). Its modules, ``_vllm_*``: the registry of what it replaces
  (``_vllm_targets``), vLLM's names (``_vllm_names``), the releases it knows
  (``_vllm_releases``), the writer's shapes of each (``_vllm_shapes``), the install
  (``_vllm_patch``), which requests (``_vllm_coverage``), the generators (``_vllm_chat``,
  ``_vllm_completion``, ``_vllm_fallback``), the logprobs (``_vllm_logprobs``,
  ``_vllm_processor``, ``_vllm_table``).

Nothing here is imported by ``import tokcore``; each module imports its stack only when its
entry point is called.
"""
