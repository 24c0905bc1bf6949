"""Plugins that put tokcore into a serving stack from the stack's own plugin system.

- :mod:`tokcore.plugins.vllm`: vLLM's ``vllm.general_plugins`` entry point (the ``vllm``
  extra declares it): the chunks of vLLM's stream generators serialized by the stream
  writer, the same bytes.

Nothing here is imported by ``import tokcore``; each module imports its stack only when its
entry point is called.
"""
