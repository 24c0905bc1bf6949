"""vLLM's chunk serialization by the stream writer: a ``vllm.general_plugins`` entry point.

vLLM's stream generators (``chat_completion_stream_generator``,
``completion_stream_generator``) build a pydantic chunk per streamed token and write it as
``f"data: {chunk.model_dump_json(exclude_unset=True)}\\n\\n"``. ``register()`` (what the entry
point names; vLLM calls it in each of its processes, maybe more than once) sets
``model_dump_json`` of vLLM's ``ChatCompletionStreamResponse`` and
``CompletionStreamResponse`` to one that writes the chunks the stream writer has a frame for
with :class:`tokcore.StreamWriter` (the built-in ``"vllm"`` shapes) and gives every other
call to pydantic's: the same text either way.

The chunks written by the writer: a chat stream's role chunk, its content and reasoning
deltas, its finish chunk and its final usage chunk; a completion's text and finish chunks and
its final usage chunk; each without logprobs, with or without token ids, the prompt's ids and
continuous usage. Anything else (logprobs, tool calls, an extra member, a member set that
vLLM's code does not set, other arguments to the call) is pydantic's, as is any chunk the
writer refuses. The chunk objects are still built by vLLM: the gain is the dump alone.

The entry point (``tokcore``, in the ``vllm.general_plugins`` group) comes with tokcore;
vLLM calls it in every process unless ``VLLM_PLUGINS`` names others (add ``tokcore`` there
then). It changes nothing unless the environment says so (``TOKCORE_VLLM_PLUGIN``): an
installed library does not change a server's serialization by being there. Nothing of vLLM
is imported before ``register()`` runs. The switch:

- ``generator`` (and ``1``, the recommended mode): vLLM's chat and completion stream
  generators replaced, for the requests they cover whole, by ones that write each step with
  the writer straight from the engine's outputs, top logprobs' texts from a table made once
  per tokenizer (``tokcore.plugins._vllm_stream``, whose docstring lists the requests); the
  dump patch for every other request, and alone where anything the generators were checked
  against differs (vLLM's sources they reproduce or depend on, pydantic-core's release, the
  bytes of vLLM's chunk models: one WARNING line names what);
- ``dump``: the dump patch alone (this module: the chunks are still built by vLLM);
- unset or ``0``: off; any other value: off, with one WARNING line.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from ..writer._writer import StreamShape, StreamWriter, Usage

__all__ = ["MODES", "SWITCH", "install", "mode", "register", "uninstall"]

log = logging.getLogger("tokcore.plugins.vllm")

#: the writers of the streams being written, by their constants (a chunk names its stream
#: only by them); at most ``MAX_WRITERS``, then they are made again
MAX_WRITERS = 1024
_SHAPES: dict[str, StreamShape] = {}
_WRITERS: dict[tuple[str, str, str, int, str | None], StreamWriter] = {}
#: the classes patched: their model_dump_json, and whether the class defined it
_PATCHED: dict[type, tuple[Callable[..., str], bool]] = {}

_BASE = frozenset({"id", "object", "created", "model", "choices"})
_CHAT_TEXT_CHOICE = frozenset({"index", "delta", "logprobs", "finish_reason", "token_ids"})
_CHAT_FINISH_CHOICE = _CHAT_TEXT_CHOICE | {"stop_reason"}
_CHAT_START_CHOICE = frozenset({"index", "delta", "logprobs", "finish_reason"})
_COMPLETION_CHOICE = frozenset({"index", "text", "logprobs", "finish_reason", "stop_reason",
                                "prompt_token_ids", "token_ids"})
_CONTINUOUS_CHAT = frozenset({"prompt_tokens", "completion_tokens", "total_tokens",
                              "completion_tokens_details"})
_CONTINUOUS_COMPLETION = frozenset({"prompt_tokens", "completion_tokens", "total_tokens"})


class _Other(Exception):
    """A chunk the writer has no frame for: pydantic writes it."""


def _writer(api: str, chunk: Any, fingerprint: str | None) -> StreamWriter:
    key = (api, chunk.id, chunk.model, chunk.created, fingerprint)
    writer = _WRITERS.get(key)
    if writer is None:
        if type(chunk.id) is not str or type(chunk.model) is not str or \
                type(chunk.created) is not int:
            raise _Other
        if len(_WRITERS) >= MAX_WRITERS:
            _WRITERS.clear()
        shape = _SHAPES.get(api)
        if shape is None:
            shape = _SHAPES[api] = StreamShape(api, "vllm")  # type: ignore[arg-type]
        writer = _WRITERS[key] = StreamWriter(shape, id=chunk.id, model=chunk.model,
                                              created=chunk.created,
                                              system_fingerprint=fingerprint)
    return writer


def _plain(model: Any, fields: frozenset[str] | None = None) -> frozenset[str]:
    """The members set on ``model`` (no extra member; exactly ``fields`` when given)."""
    if model.model_extra:
        raise _Other
    have = frozenset(model.model_fields_set)
    if fields is not None and have != fields:
        raise _Other
    return have


def _continuous(usage: Any, fields: frozenset[str]) -> Usage | None:
    """A chunk's continuous usage as the writer's counts (None: the chunk has none)."""
    if usage is None:
        return None
    _plain(usage, fields)
    if usage.total_tokens != usage.prompt_tokens + usage.completion_tokens:
        raise _Other
    details = usage.completion_tokens_details
    if details is None:
        return Usage(usage.prompt_tokens, usage.completion_tokens)
    _plain(details, frozenset({"reasoning_tokens"}))
    return Usage(usage.prompt_tokens, usage.completion_tokens, None, details.reasoning_tokens)


def _final_usage(usage: Any) -> tuple[int, int, int | None, int | None]:
    """The final usage chunk's counts, as exclude_none writes its usage."""
    if usage is None or usage.model_extra or usage.completion_tokens is None or \
            usage.total_tokens != usage.prompt_tokens + usage.completion_tokens:
        raise _Other
    cached = reasoning = None
    prompt_details = usage.prompt_tokens_details
    if prompt_details is not None:
        if prompt_details.model_extra or prompt_details.cached_tokens is None or any(
                getattr(prompt_details, name) is not None
                for name in type(prompt_details).model_fields if name != "cached_tokens"):
            raise _Other
        cached = prompt_details.cached_tokens
    completion_details = usage.completion_tokens_details
    if completion_details is not None:
        _plain(completion_details)
        reasoning = completion_details.reasoning_tokens
    return usage.prompt_tokens, usage.completion_tokens, cached, reasoning


def _final_chunk(api: str, chunk: Any, have: frozenset[str]) -> bytes:
    """The final usage chunk (``exclude_none``): no choices, its usage and fingerprint."""
    if chunk.choices or getattr(chunk, "metrics", None) is not None or \
            getattr(chunk, "prompt_token_ids", None) is not None or \
            getattr(chunk, "prompt_text", None) is not None:
        raise _Other
    usage = _final_usage(chunk.usage)
    return _writer(api, chunk, chunk.system_fingerprint).usage(*usage)


def chat_frame(chunk: Any, exclude_none: bool) -> bytes:
    """The writer's frame of a vLLM chat chunk dumped with ``exclude_unset=True`` (and
    ``exclude_none`` for the final usage chunk); ``_Other`` when it has none."""
    have = _plain(chunk)
    if chunk.object != "chat.completion.chunk":
        raise _Other
    if exclude_none:
        return _final_chunk("chat", chunk, have)
    if len(chunk.choices) != 1 or have - _BASE - {"usage", "system_fingerprint",
                                                  "prompt_token_ids", "prompt_text"}:
        raise _Other
    choice = chunk.choices[0]
    delta = choice.delta
    choice_fields = _plain(choice)
    delta_fields = _plain(delta)
    if choice.logprobs is not None or delta.tool_calls:
        raise _Other
    usage = _continuous(chunk.usage, _CONTINUOUS_CHAT)
    fingerprint = chunk.system_fingerprint if "system_fingerprint" in have else None
    if "system_fingerprint" in have and fingerprint is None:
        raise _Other
    if "prompt_token_ids" in have or "prompt_text" in have:  # the role's chunk
        if have - {"usage"} != _BASE | {"prompt_token_ids", "prompt_text"} or \
                chunk.prompt_text is not None or choice_fields != _CHAT_START_CHOICE or \
                delta_fields != {"role", "content"} or delta.content != "" or \
                choice.finish_reason is not None or delta.role != "assistant":
            raise _Other
        return _writer("chat", chunk, None).write(
            "start", index=choice.index, usage=usage, prompt_token_ids=chunk.prompt_token_ids)
    if delta_fields == {"content"}:
        kind = "text"
    elif delta_fields == {"reasoning"}:
        kind = "reasoning"
    else:
        raise _Other
    if choice.finish_reason is None:
        if choice_fields != _CHAT_TEXT_CHOICE or fingerprint is not None:
            raise _Other
        return _writer("chat", chunk, None).step(
            delta.content if kind == "text" else delta.reasoning, choice.index, kind=kind,
            token_ids=choice.token_ids, usage=usage)
    if choice_fields != _CHAT_FINISH_CHOICE or kind != "text":
        raise _Other
    return _writer("chat", chunk, fingerprint).step(
        delta.content, choice.index, token_ids=choice.token_ids,
        finish_reason=choice.finish_reason, stop_reason=choice.stop_reason, usage=usage)


def completion_frame(chunk: Any, exclude_none: bool) -> bytes:
    """The writer's frame of a vLLM completion chunk (``exclude_unset=True``; the final
    usage chunk: ``exclude_none``); ``_Other`` when it has none."""
    have = _plain(chunk)
    if chunk.object != "text_completion":
        raise _Other
    if exclude_none:
        return _final_chunk("completions", chunk, have)
    if len(chunk.choices) != 1 or have - _BASE - {"usage", "system_fingerprint"}:
        raise _Other
    choice = chunk.choices[0]
    _plain(choice, _COMPLETION_CHOICE)
    if choice.logprobs is not None:
        raise _Other
    usage = _continuous(chunk.usage, _CONTINUOUS_COMPLETION)
    fingerprint = chunk.system_fingerprint if "system_fingerprint" in have else None
    if "system_fingerprint" in have and (fingerprint is None or choice.finish_reason is None):
        raise _Other
    return _writer("completions", chunk, fingerprint).step(
        choice.text, choice.index, token_ids=choice.token_ids,
        finish_reason=choice.finish_reason, stop_reason=choice.stop_reason, usage=usage,
        prompt_token_ids=choice.prompt_token_ids)


def _dump(frame: Callable[[Any, bool], bytes], original: Callable[..., str]
          ) -> Callable[..., str]:
    def model_dump_json(self: Any, **options: Any) -> str:
        """vLLM's chunk as JSON: the stream writer's frame when it has one, else
        pydantic's (the same text)."""
        unset, none = options.get("exclude_unset"), options.get("exclude_none", False)
        if len(options) == 1 + ("exclude_none" in options) and none in (True, False) and (
                unset is True or (unset is False and none is True)):
            try:
                if unset is False and "usage" not in self.model_fields_set:
                    return original(self, **options)  # (every member written: not ours)
                return frame(self, none)[6:-2].decode()
            except _Other:
                pass
            except Exception:  # the writer refused a value: pydantic says what it says
                log.debug("the stream writer left a chunk to pydantic", exc_info=True)
        return original(self, **options)

    return model_dump_json


def install(chat_chunk: type | None, completion_chunk: type | None) -> None:
    """Serialize these chunk classes (vLLM's ``ChatCompletionStreamResponse`` and
    ``CompletionStreamResponse``, or classes shaped like them) with the writer. Again:
    nothing happens.

    Raises ``TypeError`` for a class that has no ``model_dump_json``."""
    for cls, frame in ((chat_chunk, chat_frame), (completion_chunk, completion_frame)):
        if cls is None or cls in _PATCHED:
            continue
        original = getattr(cls, "model_dump_json", None)
        if original is None:
            raise TypeError(f"{cls.__name__} has no model_dump_json")
        _PATCHED[cls] = (original, "model_dump_json" in cls.__dict__)
        cls.model_dump_json = _dump(frame, original)  # type: ignore[attr-defined]


def uninstall() -> None:
    """Give the patched classes their own ``model_dump_json`` back, and vLLM its own stream
    generators (the generator mode)."""
    if "tokcore.plugins._vllm_stream" in sys.modules:
        sys.modules["tokcore.plugins._vllm_stream"].uninstall_generators()
    for cls, (original, own) in list(_PATCHED.items()):
        if own:
            cls.model_dump_json = original  # type: ignore[attr-defined]
        else:
            delattr(cls, "model_dump_json")
        del _PATCHED[cls]
    _WRITERS.clear()


#: the environment variable that switches the plugin on
SWITCH = "TOKCORE_VLLM_PLUGIN"


#: the switch's values: the mode each names
MODES = {"": "off", "0": "off", "dump": "dump", "generator": "generator", "1": "generator"}


def mode() -> str:
    """What is installed now: ``"generator"``, ``"dump"`` or ``"off"``."""
    stream = sys.modules.get("tokcore.plugins._vllm_stream")
    if stream is not None and stream._REPLACED:
        return "generator"
    return "dump" if _PATCHED else "off"


def register() -> None:
    """The ``vllm.general_plugins`` entry point: the mode ``TOKCORE_VLLM_PLUGIN`` names
    (``MODES``; the module's docstring). A vLLM without the chunk classes (another layout)
    is left as it is, with one WARNING line; one where anything the generator mode was
    checked against differs keeps the dump patch, with one WARNING line naming what.

    Raises nothing."""
    value = os.environ.get(SWITCH, "")
    wanted = MODES.get(value)
    if wanted is None:
        log.warning("tokcore's vLLM plugin: %s=%r is not one of %s: off", SWITCH, value,
                    ", ".join(repr(name) for name in MODES if name))
        return
    if wanted == "off":
        return
    try:
        from vllm.entrypoints.openai.chat_completion.protocol import (  # type: ignore[import-not-found]
            ChatCompletionStreamResponse,
        )
        from vllm.entrypoints.openai.completion.protocol import (  # type: ignore[import-not-found]
            CompletionStreamResponse,
        )
    except ImportError:
        try:  # the layout before the protocol modules were split
            from vllm.entrypoints.openai.protocol import (  # type: ignore[import-not-found]
                ChatCompletionStreamResponse,
                CompletionStreamResponse,
            )
        except ImportError as error:
            log.warning("tokcore's vLLM plugin found no chunk classes to serialize (%s): "
                        "vLLM's own serialization stays", error)
            return
    install(ChatCompletionStreamResponse, CompletionStreamResponse)
    if wanted == "generator":
        from ._vllm_stream import install_generators

        install_generators()
