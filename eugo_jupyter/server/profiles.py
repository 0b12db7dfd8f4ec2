"""Launch profiles: ready-made launch bodies an administrator offers in the server's config.

A profile is ``{"name", "description", "body", "editable"}``: ``body`` is a launch body checked
by its backend when the server starts (a bad profile stops the server with the field named), and
``editable`` lists the fields a user may still change, as ``"slurm.walltime"`` style paths
(``name`` and ``lifetime`` always may). A launch names one with ``{"profile": NAME, ...}``.

>>> from eugo_jupyter.server.backends import default_backends
>>> profile = check_profile({"name": "short", "body": {"kind": "slurm", "slurm": {"nodes": 2}},
...                          "editable": ["slurm.walltime"]}, default_backends())
>>> apply_profile({"profile": "short", "slurm": {"walltime": "10"}}, [profile])["slurm"]
{'nodes': 2, 'walltime': '10'}
"""

from __future__ import annotations

import copy
from typing import Any

from ..exceptions import OptionsError
from . import requests
from .backends import Backend

__all__ = ["apply_profile", "check_profile"]


def check_profile(profile: Any, backends: dict[str, Backend]) -> dict[str, Any]:
    """An administrator's profile, checked once when the server starts."""
    where = f"profile {profile.get('name')!r}" if isinstance(profile, dict) else "a profile"
    requests.mapping(profile, where, '{"name": ..., "body": {"kind": "slurm", ...}}')
    requests.keys(profile, ("name", "description", "body", "editable"), where)
    if not isinstance(profile.get("name"), str) or not 0 < len(profile["name"]) <= 100:
        raise OptionsError(f"{where}: give it a name of 1 to 100 characters.")
    body = profile.get("body")
    kind = requests.body_kind(body, tuple(backends))
    backends[kind].validate(body)  # a bad profile fails the server's start, loudly
    editable = profile.get("editable", [])
    if not isinstance(editable, list) or not all(isinstance(e, str) for e in editable):
        raise OptionsError(f"{where}: editable must be a list of field names.")
    return {
        "name": profile["name"],
        "description": str(profile.get("description", "")),
        "kind": kind,
        "body": body,
        "editable": editable,
    }


def apply_profile(body: dict[str, Any], profiles: list[dict[str, Any]]) -> dict[str, Any]:
    """The launch body of ``body["profile"]`` with the user's changes; refuses fixed fields."""
    chosen = [p for p in profiles if p["name"] == body["profile"]]
    if not chosen:
        names = ", ".join(repr(p["name"]) for p in profiles) or "none"
        raise OptionsError(
            f"profile={body['profile']!r} is not offered by this server; offered: {names}."
        )
    profile = chosen[0]
    merged = copy.deepcopy(profile["body"])
    allowed = set(profile["editable"]) | {"name", "lifetime"}
    for key, value in body.items():
        if key in ("profile", "kind"):
            continue
        pairs = value.items() if isinstance(value, dict) else [(None, value)]
        for sub, item in pairs:
            path = key if sub is None else f"{key}.{sub}"
            current = merged.get(key, {}).get(sub) if sub else merged.get(key)
            if item != current and path not in allowed:
                raise OptionsError(
                    f"{path} is fixed by the profile {profile['name']!r} (to {current!r}); "
                    f"it lets you change: {', '.join(sorted(allowed))}."
                )
            if sub is None:
                merged[key] = item
            else:
                merged.setdefault(key, {})[sub] = item
    return merged
