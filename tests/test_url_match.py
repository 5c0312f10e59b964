"""URLs compared as URLs (safety/urlmatch.py): the scheme, host and port, then whole path
segments, each plain; every place the tool holds a URL to a prefix goes through it."""

from __future__ import annotations

import pytest

from verl_bootstrap.options import SiteOptions
from verl_bootstrap.safety.urlmatch import path_problem, url_remainder, url_within
from verl_bootstrap.siteconfig.apply import pytorch_mirrors

RELEASES = "https://github.com/Dao-AILab/flash-attention/releases/download/"


@pytest.mark.parametrize(
    "url",
    [
        f"{RELEASES}v2.8.3/flash_attn-2.8.3+cu12torch2.8cxx11abiTRUE-cp312-cp312-linux_x86_64.whl",
        f"{RELEASES}v2.8.3/flash_attn-2.8.3%2Bcu12-cp312-cp312-linux_x86_64.whl",
        "HTTPS://GitHub.com:443/Dao-AILab/flash-attention/releases/download/v1/x.whl",
        f"{RELEASES}v1/x.whl?download=1",
    ],
)
def test_a_url_under_the_prefix_is_within_it(url: str) -> None:
    assert url_within(url, RELEASES)


@pytest.mark.parametrize(
    "url",
    [
        f"{RELEASES}../../../../attacker/repo/releases/download/v1/x.whl",
        f"{RELEASES}%2e%2e/%2E%2E/%2e%2e/%2E%2e/attacker/x.whl",
        f"{RELEASES}v1%2f..%2f..%2fx.whl",
        f"{RELEASES}v1%5c..%5cx.whl",
        f"{RELEASES}%252e%252e/x.whl",
        f"{RELEASES}v1//x.whl",
        f"{RELEASES}./x.whl",
        f"{RELEASES}v1\\..\\x.whl",
        "https://github.com/Dao-AILab/flash-attention/releases/downloadx/v1/x.whl",
        "https://github.com/Dao-AILab/flash-attention-evil/releases/download/v1/x.whl",
        "https://github.com.evil.example/Dao-AILab/flash-attention/releases/download/v1/x.whl",
        "https://github.com@evil.example/Dao-AILab/flash-attention/releases/download/v1/x.whl",
        "https://github.com:8443/Dao-AILab/flash-attention/releases/download/v1/x.whl",
        "http://github.com/Dao-AILab/flash-attention/releases/download/v1/x.whl",
        "https://[::1/Dao-AILab/flash-attention/releases/download/v1/x.whl",
        f"{RELEASES}v1/x.whl\n",
        RELEASES,
    ],
)
def test_a_url_that_climbs_out_or_is_elsewhere_is_not(url: str) -> None:
    assert not url_within(url, RELEASES)


def test_a_prefix_cut_inside_a_segment_starts_that_segment() -> None:
    """A release pattern cut at its first placeholder (`.../download/v{version}/...`)."""
    prefix = f"{RELEASES}v"
    assert url_remainder(f"{RELEASES}v2.8.3/x.whl", prefix) == ("v2.8.3", "x.whl")
    assert not url_within(f"{RELEASES}w2.8.3/x.whl", prefix)
    assert not url_within(f"{RELEASES}v/../../x.whl", prefix)


def test_a_folder_url_ends_in_an_empty_segment_and_is_plain() -> None:
    assert path_problem("https://download.pytorch.org/whl/cu128/") is None
    assert path_problem("https://download.pytorch.org/whl//cu128") == (
        "its path holds an empty segment (//)"
    )
    assert path_problem("http://[::1") == "it is not a URL with a host"


def test_pytorch_mirrors_map_only_a_plain_pytorch_index() -> None:
    site = SiteOptions(pytorch=(("cu128", "https://mirror.lab.example/cu128"),))
    indexes = {
        "plain": "https://download.pytorch.org/whl/cu128",
        "folder": "https://download.pytorch.org/whl/cu128/",
        "climbs": "https://download.pytorch.org/whl/../whl/cu128",
        "elsewhere": "https://download.pytorch.org.evil.example/whl/cu128",
    }
    assert pytorch_mirrors(indexes, site) == {
        "plain": "https://mirror.lab.example/cu128",
        "folder": "https://mirror.lab.example/cu128",
    }
