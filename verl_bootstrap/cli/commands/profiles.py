"""`profiles list|show|validate`: the shipped profiles, one with its stack, a file checked."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from verl_bootstrap.cli.flags import json_flag, verl_ref_flag
from verl_bootstrap.cli.output import emit_json, out, path_arg
from verl_bootstrap.errors import EXIT_OK, InputError

if TYPE_CHECKING:
    from verl_bootstrap.profile.models import Profile

__all__ = ["cmd_list", "cmd_show", "cmd_validate", "flags_list", "flags_show", "flags_validate"]


def flags_list(p: argparse.ArgumentParser) -> None:
    """profiles list."""
    json_flag(p)


def flags_show(p: argparse.ArgumentParser) -> None:
    """profiles show NAME."""
    p.add_argument("name", help="a shipped profile name or a YAML file")
    verl_ref_flag(p, "show the stack this verl ref gets")
    json_flag(p)


def flags_validate(p: argparse.ArgumentParser) -> None:
    """profiles validate FILE."""
    p.add_argument("file", type=path_arg, help="the profile's YAML file")
    json_flag(p)


def cmd_list(ns: argparse.Namespace) -> int:
    """`profiles list`."""
    from verl_bootstrap.profile import list_profiles, load_profile

    profiles = [load_profile(name) for name in list_profiles()]
    if ns.json:
        rows = [
            {"name": p.name, "cuda_variants": list(p.cuda_variants), "description": p.description}
            for p in profiles
        ]
        emit_json({"schema": "verl-bootstrap.profiles/1", "profiles": rows})
        return EXIT_OK
    width = max((len(p.name) for p in profiles), default=0)
    out(f"{'PROFILE':{width}} {'CUDA VARIANTS':14} DESCRIPTION")
    for profile in profiles:
        variants = ",".join(profile.cuda_variants)
        out(f"{profile.name:{width}} {variants:14} {profile.description}")
    return EXIT_OK


def cmd_show(ns: argparse.Namespace) -> int:
    """`profiles show NAME [--verl-ref REF]`: the profile with inheritance and stack applied."""
    from verl_bootstrap.profile import load_profile
    from verl_bootstrap.profile.stacks import apply_stack, stack_for, supported_refs

    base = load_profile(ns.name)
    options = frozenset(s.option for s in base.stages if s.option)  # optional stages shown too
    profile = apply_stack(base, ns.verl_ref, options=options)
    body: dict[str, Any] = profile.model_dump(mode="json", exclude={"stacks", "extends"})
    hashes = profile_hashes(apply_stack(base, ns.verl_ref))  # as a lock resolves it
    if ns.json:
        emit_json({**body, "profile_hashes": hashes})
    else:
        import yaml

        # for a person: what is set (the JSON keeps every field, null and empty ones too)
        body = profile.model_dump(mode="json", exclude={"stacks", "extends"}, exclude_none=True)
        stack = stack_for(base, profile.verl.ref)
        if stack is not None and stack.note:
            out(f"# verl {profile.verl.ref}: {stack.note}")
        out(f"# verl refs with a stack: {', '.join(supported_refs(base))}")
        shown = ", ".join(f"{variant} {digest}" for variant, digest in hashes.items())
        out(f"# profile hash per variant (its lockfiles' profile_hash): {shown}")
        out(yaml.safe_dump(body, sort_keys=False, width=100).rstrip())
    return EXIT_OK


def profile_hashes(profile: Profile) -> dict[str, str]:
    """Each variant's profile hash: what a lockfile of it carries as `profile_hash`, and `info`
    shows for an env of it (of what a lock is resolved from, not the file's bytes)."""
    from verl_bootstrap.lock.format import profile_hash

    return {variant: profile_hash(profile, variant) for variant in profile.cuda_variants}


def cmd_validate(ns: argparse.Namespace) -> int:
    """`profiles validate FILE`."""
    from verl_bootstrap.profile import load_profile

    if not ns.file.is_file():
        why = "is not a regular file" if ns.file.exists() else "does not exist"
        raise InputError(f"{ns.file} {why}", hint="name the profile's YAML file")
    # `extends` looks beside the file first, then among the shipped profiles (as install does)
    profile = load_profile(str(ns.file))
    always = [s.id for s in profile.stages if not s.option]
    optional = [f"{s.id} (--with-{s.option})" for s in profile.stages if s.option]
    if ns.json:
        emit_json(
            {
                "schema": "verl-bootstrap.profile-validate/1",
                "file": str(ns.file),
                "profile": profile.name,
                "stages": always,
                "optional_stages": optional,
            }
        )
        return EXIT_OK
    extra = f", plus optional {', '.join(optional)}" if optional else ""
    out(f"{ns.file}: valid profile {profile.name!r}: stages {', '.join(always)}{extra}")
    return EXIT_OK
