"""Several knowledge bases in one config file: the top level is ``default``; each entry of ``knowledge_bases``
holds only what differs, deep-merged over the top level and validated as a whole ``Settings``.

What each one gets of its own unless it sets it: a state folder ``<state_dir>/kb/<name>`` (index, conversation
log, inbox, knowledge history, locks) and admin credentials from ``KBBOT_ADMIN_USER_<NAME>`` /
``KBBOT_ADMIN_PASSWORD_<NAME>`` (so the default's admin is not theirs). The widget and the WeCom and Feishu channels
are served for the default knowledge base only (one ``/widget.js``, one callback URL each), so another one may not
enable them.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bot.config.settings import DEFAULT_KB, Settings, finish_loading, validated
from bot.errors import ConfigError

DEFAULT_ONLY = ("widget", "wecom", "feishu")  # blocks served once per app, for the default knowledge base


def merged(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``override`` laid over it: mappings merge key by key, any other value (lists too) replaces."""
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def env_suffix(name: str) -> str:
    """A knowledge base's name as an environment-variable suffix: ``it-help`` -> ``IT_HELP``."""
    return re.sub(r"[^A-Z0-9_]", "_", name.upper())


def block(raw: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``raw[key]`` when it is a mapping, else empty (a wrong type is reported by the validation after the merge)."""
    value = raw.get(key)
    return value if isinstance(value, Mapping) else {}


def own_defaults(settings: Settings, name: str, label: str) -> dict[str, Any]:
    """What a knowledge base gets of its own, under its overrides: a state folder, admin variables, a page title
    naming it, no routing of its own (the top level's ``route_to`` names the one it routes to: often this one),
    and the default-only channels off."""
    return {
        "state_dir": str(Path(settings.state_dir) / "kb" / name),
        "routing": {"route_to": ""},
        "ui": {
            "title": f"{settings.ui.title} · {label}",  # the page says which knowledge base it is
            "admin": {
                "username_env": f"KBBOT_ADMIN_USER_{env_suffix(name)}",
                "password_env": f"KBBOT_ADMIN_PASSWORD_{env_suffix(name)}",
            },
        },
        **{channel: {"enabled": False} for channel in DEFAULT_ONLY},
    }


def knowledge_base_settings(settings: Settings, name: str) -> Settings:
    """The whole settings of the knowledge base ``name`` (``default``: ``settings`` itself); a ConfigError names
    the knowledge base and the key when its overrides do not validate, or lists the names when it does not exist."""
    if name == DEFAULT_KB:
        return settings
    if name not in settings.knowledge_bases:
        raise ConfigError(f"no knowledge base {name!r}; this config has: {', '.join(names(settings))}")
    override = settings.knowledge_bases[name]
    for channel in DEFAULT_ONLY:
        if block(override, channel).get("enabled"):
            raise ConfigError(
                f"knowledge_bases.{name}.{channel}.enabled: the {channel} channel is served for the default "
                f"knowledge base only; enable it at the top level of the config file"
            )
    base = settings.model_dump(mode="json")
    label = block(override, "routing").get("label") or name
    raw = merged(merged(base, own_defaults(settings, name, label)), override)
    raw["knowledge_bases"] = {}  # the list is the top level's (a merge of {} would keep it)
    where = f"knowledge base {name!r} (knowledge_bases.{name} in {settings.source or 'the config'}) is invalid"
    kb = finish_loading(validated(raw, where), settings.base_dir, settings.source)
    return kb.model_copy(update={"kb_name": name})


def names(settings: Settings) -> list[str]:
    """Every knowledge base of the config, the default first."""
    return [DEFAULT_KB, *settings.knowledge_bases]


def all_settings(settings: Settings) -> dict[str, Settings]:
    """name -> whole settings of every knowledge base, checked together: each validates, each ``route_to`` names
    another one, and no two keep their log or shared knowledge behind the same PostgreSQL variable (their logs,
    inboxes or knowledge would mix)."""
    every = {name: knowledge_base_settings(settings, name) for name in names(settings)}
    pg: dict[str, str] = {}
    for name, kb in every.items():
        target = kb.routing.route_to
        if target and (target == name or target not in every):
            raise ConfigError(
                f"knowledge base {name!r}: routing.route_to is {target!r}; name another knowledge base "
                f"({', '.join(n for n in every if n != name)})"
            )
        if (kb.log.enabled and kb.log.backend == "postgres") or kb.knowledge.shared == "postgres":
            env = kb.log.postgres.dsn_env
            if env in pg:
                raise ConfigError(
                    f"knowledge bases {pg[env]!r} and {name!r} both keep their log or shared knowledge in the "
                    f"PostgreSQL DSN in {env}: give knowledge_bases.{name}.log.postgres.dsn_env its own variable "
                    "(its own database or schema)"
                )
            pg[env] = name
    return every
