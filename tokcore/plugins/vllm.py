"""vLLM's streams written by the stream writer: a ``vllm.general_plugins`` entry point.

vLLM's stream generators (``chat_completion_stream_generator``,
``completion_stream_generator``) build a pydantic chunk per streamed token and choice and
dump it. With the plugin on, ``register()`` (what the entry point names; vLLM calls it in each
of its processes, maybe more than once) replaces them, for the requests they cover whole
(decided per request before the first byte; the others get vLLM's own generator, called as it
is), by generators that write each step with :class:`tokcore.StreamWriter` straight from the
engine's outputs: no chunk object, no pydantic; logprobs' top token texts from a table made
once per tokenizer instead of a decode per token. The bytes are vLLM's, byte for byte, but for
``created`` (the clock's). Which requests are covered: ``tokcore.plugins._vllm_coverage``;
what the plugin replaces and why: ``tokcore.plugins._vllm_targets``.

It installs only on a vLLM release it knows (0.32.0, 0.33.0, 0.34.0): the source of every
vLLM function or class it reproduces, calls or writes the models of, and pydantic-core's
release, must be one known release's (``_vllm_releases``), and a few probe chunks must come
out the same written by the stream writer and by that release's models. Anywhere else the
plugin stays off (vLLM's own streams), and one WARNING line names the closest known release
and what differs from it.

The entry point (``tokcore``, in the ``vllm.general_plugins`` group) comes with tokcore;
vLLM calls it in every process unless ``VLLM_PLUGINS`` names others (add ``tokcore`` there
then). It changes nothing unless the environment says so (``TOKCORE_VLLM_PLUGIN``): an
installed library does not change a server's streams by being there. Nothing of vLLM is
imported before ``register()`` runs. The switch (``MODES``):

- ``1`` (or ``generator``): on;
- unset or ``0``: off;
- any other value: off, with one WARNING line (``dump``, the mode that patched the chunks'
  ``model_dump_json``, is gone: it saved nothing, by the recorded runs).

With ``VLLM_USE_RUST_FRONTEND`` set, vLLM serves its API from a Rust process: no Python API
server runs the generators the plugin replaces, so it changes nothing there (one INFO line
says so).
"""

from __future__ import annotations

import logging
import os
import sys

__all__ = ["MODES", "SWITCH", "install", "mode", "register", "uninstall"]

log = logging.getLogger("tokcore.plugins.vllm")

#: the environment variable that switches the plugin on
SWITCH = "TOKCORE_VLLM_PLUGIN"

#: the switch's values: the mode each names
MODES = {"": "off", "0": "off", "1": "generator", "generator": "generator"}

_PATCH = "tokcore.plugins._vllm_patch"


def mode() -> str:
    """What is installed now: ``"generator"`` or ``"off"``."""
    patch = sys.modules.get(_PATCH)
    return "generator" if patch is not None and patch.installed() is not None else "off"


def _rust_frontend() -> bool:
    try:
        return bool(int(os.environ.get("VLLM_USE_RUST_FRONTEND", "0")))
    except ValueError:
        return False


def register() -> None:
    """The ``vllm.general_plugins`` entry point: the plugin on where ``TOKCORE_VLLM_PLUGIN``
    says so (``MODES``; the module's docstring) and this vLLM is a release it knows; off, and
    one WARNING line naming what differs, where it is not.

    Raises nothing."""
    value = os.environ.get(SWITCH, "")
    wanted = MODES.get(value)
    if wanted is None:
        gone = " (the dump mode is gone: it saved nothing)" if value == "dump" else ""
        log.warning("tokcore's vLLM plugin: %s=%r is not one of %s%s: off", SWITCH, value,
                    ", ".join(repr(name) for name in MODES if name), gone)
        return
    if wanted == "off":
        return
    if _rust_frontend():
        log.info("tokcore's vLLM plugin: VLLM_USE_RUST_FRONTEND is set: vLLM's Rust "
                 "frontend serves the API, so the plugin changes nothing in this server")
    install()


def install() -> bool:
    """Put the plugin's generators into vLLM now, whatever the switch says (what
    ``register()`` does when it is on: for a program that runs vLLM's API server in its own
    process). True where this vLLM is a release the plugin knows and it is installed (or was
    already); False, with one WARNING line naming what differs, where it is not.

    Raises nothing."""
    from ._vllm_patch import install as install_generators

    return install_generators()


def uninstall() -> None:
    """Give vLLM its own stream generators and logprobs processor back."""
    patch = sys.modules.get(_PATCH)
    if patch is not None:
        patch.uninstall()
