"""The classes of the pickles in release-0.1.0.json (written by tokcore 0.1.0, kept as they
were made: their module and class names are in every one of them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tokcore


@tokcore.compact_ids("prompt_token_ids", "output_token_ids")
class EagerRequest:
    def __init__(self, request_id: str, prompt_token_ids: Any, output_token_ids: Any) -> None:
        self.request_id = request_id
        self.prompt_token_ids = prompt_token_ids
        self.output_token_ids = output_token_ids


@tokcore.compact_ids("prompt_token_ids", lazy=True)
@dataclass
class LazyRequest:
    request_id: str
    prompt_token_ids: Any


@tokcore.compact_ids("ids", lazy=True)
class LazySlots:
    __slots__ = ("ids", "label")

    def __init__(self, ids: Any, label: str) -> None:
        self.ids = ids
        self.label = label
