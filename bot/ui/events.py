"""Options shared by the UI's event listeners."""

from __future__ import annotations

from typing import Literal, TypedDict


class Private(TypedDict):
    """Keyword options of an event listener that has no API endpoint."""

    api_name: str
    api_visibility: Literal["private"]


# An event with no API endpoint, for ``**PRIVATE`` in a listener call. Gradio 6 still accepts ``api_name=False``
# for this but types ``api_name`` as ``str | None``; it turns False into exactly these two options
# (``Blocks.set_event_trigger``), so the events and their generated names are the same.
PRIVATE: Private = {"api_name": "false", "api_visibility": "private"}
