"""Every name a dpnet module advertises (its ``__all__``) resolves: ``dpnet.privacy`` listed
``keep_prob_from_epsilon``, which raised AttributeError (it lives in binary_rr, not in
mechanisms, where the lazy table looked)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import dpnet

MODULES = [m.name for m in pkgutil.walk_packages(dpnet.__path__, "dpnet.")]


def test_the_walk_finds_the_packages_that_advertise() -> None:
    assert {"dpnet.privacy", "dpnet.baselines.median", "dpnet.baselines.rdp_admm"} <= set(MODULES)


@pytest.mark.parametrize("module", ["dpnet", *MODULES])
def test_every_advertised_name_resolves(module: str) -> None:
    if module.endswith("__main__"):
        pytest.skip("a program, not a module to import")
    imported = importlib.import_module(module)
    advertised = getattr(imported, "__all__", [])
    missing = [name for name in advertised if not hasattr(imported, name)]
    assert missing == [], f"{module} advertises {missing}"
