"""`config show`: the effective settings, where each came from, and what each backend gets.

Pure functions over a LoadedSite; every value passes through redact().
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.redact import redact
from verl_bootstrap.siteconfig.siteload import LoadedSite

__all__ = ["CONFIG_SCHEMA", "Setting", "settings_rows", "show_json", "show_text"]

CONFIG_SCHEMA = "verl-bootstrap.config/1"


@dataclass(frozen=True)
class Setting:
    """One effective setting: its dotted key, its (redacted) value, and where it came from."""

    key: str
    value: str
    source: str


def _display(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(redact(str(v)) for v in value)
    return redact(str(value))


def _lookup(data: Mapping[str, Any], leaf: tuple[str, ...]) -> Any:
    value: Any = data
    for key in leaf:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _key(leaf: tuple[str, ...]) -> str:
    return ".".join(
        k if k.isidentifier() or k.replace("-", "").isalnum() else f"[{k}]" for k in leaf
    )


def settings_rows(site: LoadedSite) -> list[Setting]:
    """Every setting a site config file made, with its source (the merged value wins)."""
    data = site.config.model_dump(mode="json")
    rows = [
        Setting(_key(leaf), _display(_lookup(data, leaf)), redact(origin))
        for leaf, origin in sorted(site.origins.items())
        if leaf != ("schema_version",)
    ]
    return rows


def _pip_rows(pip: IndexSettings) -> list[Setting]:
    values = {
        "index-url": pip.index_url,
        "extra-index-url": pip.extra_index_urls,
        "find-links": pip.find_links,
        "constraint": pip.constraints,
    }
    return [
        Setting(f"pip {key}", _display(value), redact(pip.sources.get(key, "")))
        for key, value in values.items()
        if value
    ]


def _environment_rows(
    environment: Mapping[str, str | None], environ: Mapping[str, str]
) -> list[dict[str, str | None]]:
    return [
        {
            "name": name,
            "value": None if value is None else redact(value),
            "replaces": redact(environ[name]) if environ.get(name, value) != value else None,
        }
        for name, value in sorted(environment.items())
    ]


def show_json(
    site: LoadedSite,
    *,
    environment: Mapping[str, str | None],
    environ: Mapping[str, str],
    pip: IndexSettings,
) -> dict[str, Any]:
    """The JSON document of `config show`."""
    return {
        "schema": CONFIG_SCHEMA,
        "files": [
            {"label": s.label, "location": redact(s.location), "found": s.found}
            for s in site.sources
        ],
        "settings": [s.__dict__ for s in settings_rows(site)],
        "index": [s.__dict__ for s in _pip_rows(pip)],
        "environment": _environment_rows(environment, environ),
    }


def show_text(body: Mapping[str, Any]) -> str:
    """The same document for a person to read."""
    lines = ["site config files, lowest priority first:"]
    for f in body["files"]:
        lines.append(f"  {f['label']:24} {f['location']}{'' if f['found'] else '  (not found)'}")
    lines.append("settings (file settings; command-line flags override them):")
    lines += [f"  {s['key']} = {s['value']}    [{s['source']}]" for s in body["settings"]]
    if not body["settings"]:
        lines.append("  (none: no site config file sets anything)")
    lines.append("package index, as uv and pip will get it:")
    lines += [f"  {s['key']} = {s['value']}    [{s['source']}]" for s in body["index"]]
    lines.append("environment for every backend (uv, pip, git, py-rattler):")
    for row in body["environment"]:
        note = f"    (replaces {row['replaces']})" if row["replaces"] else ""
        value = "(unset)" if row["value"] is None else row["value"]
        lines.append(f"  {row['name']}={value}{note}")
    if not body["environment"]:
        lines.append("  (none: the site config sets no variable)")
    lines += [f"note: {n}" for n in body.get("notes", [])]
    return "\n".join(lines)
