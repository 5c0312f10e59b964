"""Profiles: declarative YAML recipes for a verl environment, validated strictly."""

from __future__ import annotations

from verl_bootstrap.profile.load import PROFILES_DIR, list_profiles, load_profile, profile_path
from verl_bootstrap.profile.models import (
    CudaVariant,
    IndexSpec,
    Profile,
    Stage,
    VerifySpec,
)

__all__ = [
    "PROFILES_DIR",
    "CudaVariant",
    "IndexSpec",
    "Profile",
    "Stage",
    "VerifySpec",
    "list_profiles",
    "load_profile",
    "profile_path",
]
