"""The vLLM plugin's install: the only module that changes vLLM (the three ``PATCHES`` of
``_vllm_targets``), and only on a release it knows.

:func:`install` reads this vLLM's fingerprint (``_vllm_releases.fingerprint``: every
target's source, pydantic-core's release) and finds its release; builds the writer's shapes
from that release's own models (``_vllm_shapes``) and writes the probe chunks both ways;
then replaces vLLM's two stream generators by functions that decide per request, before the
first byte, whether the plugin writes the stream (``_vllm_chat``, ``_vllm_completion``) or
vLLM's own generator does, called as it is; and wraps ``LogprobsProcessor.from_new_request``
so that a covered stream's engine requests get the tabled processor (``_vllm_processor``).
Where anything differs from a known release, nothing changes, and one WARNING line names the
closest release and what differs from it.
"""

from __future__ import annotations

import logging
from typing import Any

from . import _vllm_chat, _vllm_completion
from . import _vllm_releases as releases
from ._vllm_coverage import chat_covered, completion_covered
from ._vllm_names import load, version
from ._vllm_processor import TABLED, tabled_class
from ._vllm_shapes import Context, build, probes
from ._vllm_targets import PATCHES

__all__ = ["install", "installed", "uninstall"]

log = logging.getLogger("tokcore.plugins.vllm")

#: what install replaced: (the target's name, its owner, the attribute, the original)
_REPLACED: list[tuple[str, type, str, Any]] = []
#: the installed release's context (one item while installed)
_INSTALLED: list[Context] = []
#: the lines an install wrote (each written once a process)
_REFUSED: list[str] = []


def installed() -> Context | None:
    """The context of the release the plugin is installed on, if it is."""
    return _INSTALLED[0] if _INSTALLED else None


def _refuse(line: str) -> bool:
    if line not in _REFUSED:
        _REFUSED.append(line)
        log.warning("%s", line)
    return False


def install() -> bool:
    """Install the plugin's generators where this vLLM is a release it knows and the probe
    chunks come out the same both ways; False, and one WARNING line (once a process) naming
    what differs, where not: vLLM is left as it is. Again: nothing happens."""
    if _REPLACED:
        return True
    try:
        names = load()
        found = releases.fingerprint()
    except ModuleNotFoundError as error:
        if error.name == "vllm":
            return _refuse("tokcore's vLLM plugin: no vLLM here: off")
        return _refuse(f"tokcore's vLLM plugin: this vLLM ({version()}) has not the names "
                       f"it knows ({error}): off, vLLM's own streams")
    except (ImportError, AttributeError, OSError, TypeError) as error:
        return _refuse(f"tokcore's vLLM plugin: this vLLM ({version()}) has not the names "
                       f"it knows ({error}): off, vLLM's own streams")
    release, closest, differ = releases.detect(found)
    if release is None:
        return _refuse(f"tokcore's vLLM plugin: vLLM {version()} is not a release it knows "
                       f"({', '.join(releases.RELEASES)}; closest {closest.name}, from which "
                       f"these differ: {', '.join(differ)}): off, vLLM's own streams")
    try:
        ctx = build(names, release)
        differ = probes(ctx)
    except Exception as error:  # (its models are not what the release's were)
        differ = [f"the writer's shapes ({type(error).__name__}: {error})"]
    if differ:
        return _refuse(f"tokcore's vLLM plugin: vLLM {release.name}'s chunks, as pydantic "
                       f"writes them here, are not the stream writer's: {', '.join(differ)}: "
                       f"off, vLLM's own streams")
    _patch(ctx)
    return True


def _patch(ctx: Context) -> None:
    names = ctx.names
    chat = names.OpenAIServingChat
    completion = names.OpenAIServingCompletion
    processor = names.LogprobsProcessor
    chat_original = vars(chat)["chat_completion_stream_generator"]
    completion_original = vars(completion)["completion_stream_generator"]
    new_request = vars(processor)["from_new_request"]
    tabled = tabled_class(processor, names.append_logprobs_for_next_position,
                          names.convert_ids_list_to_tokens)

    def chat_completion_stream_generator(
            self: Any, request: Any, result_generator: Any, request_id: Any, model_name: Any,
            conversation: Any, tokenizer: Any, request_metadata: Any,
            chat_template_kwargs: Any = None, mm_token_counts: Any = None) -> Any:
        if chat_covered(ctx, self, request, request_id, model_name, conversation, tokenizer):
            return _vllm_chat.stream(ctx, self, request, result_generator, request_id,
                                     model_name, tokenizer, request_metadata,
                                     chat_template_kwargs)
        return chat_original(self, request, result_generator, request_id, model_name,
                             conversation, tokenizer, request_metadata,
                             chat_template_kwargs=chat_template_kwargs,
                             mm_token_counts=mm_token_counts)

    def completion_stream_generator(
            self: Any, request: Any, engine_inputs: Any, result_generator: Any,
            request_id: Any, created_time: Any, model_name: Any, num_prompts: Any,
            tokenizer: Any, request_metadata: Any) -> Any:
        if completion_covered(ctx, self, request, request_id, model_name, created_time,
                              tokenizer):
            return _vllm_completion.stream(ctx, self, request, engine_inputs,
                                           result_generator, request_id, created_time,
                                           model_name, num_prompts, tokenizer,
                                           request_metadata)
        return completion_original(self, request, engine_inputs, result_generator,
                                   request_id, created_time, model_name,
                                   num_prompts=num_prompts, tokenizer=tokenizer,
                                   request_metadata=request_metadata)

    def from_new_request(cls: Any, tokenizer: Any, request: Any) -> Any:
        made = new_request.__func__(cls, tokenizer, request)
        if TABLED.get() and tokenizer is not None and made.num_logprobs is not None and \
                type(made) is processor:
            made.__class__ = tabled
        return made

    replacements: dict[str, tuple[type, str, Any, Any]] = {
        PATCHES[0].target: (chat, "chat_completion_stream_generator", chat_original,
                            chat_completion_stream_generator),
        PATCHES[1].target: (completion, "completion_stream_generator", completion_original,
                            completion_stream_generator),
        PATCHES[2].target: (processor, "from_new_request", new_request,
                            classmethod(from_new_request)),
    }
    assert set(replacements) == {patch.target for patch in PATCHES}
    for target, (owner, attribute, original, replacement) in replacements.items():
        _REPLACED.append((target, owner, attribute, original))
        setattr(owner, attribute, replacement)
    _INSTALLED.append(ctx)


def originals() -> dict[str, Any]:
    """What install replaced, by target name (the fingerprint reads their sources)."""
    return {target: original for target, _, _, original in _REPLACED}


def uninstall() -> None:
    """Give vLLM its own generators and logprobs processor back."""
    while _REPLACED:
        _, owner, attribute, original = _REPLACED.pop()
        setattr(owner, attribute, original)
    _INSTALLED.clear()
