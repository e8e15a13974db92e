"""The public names: a short root ``__all__``, and each layer's package exporting its own.

``__all__`` is kept in ruff's order (constants, classes, functions; each alphabetical), every name
in it resolves to an object of this package, and the root exports nothing it does not list.
"""

from __future__ import annotations

import importlib
import inspect
from types import ModuleType

import pytest

import cdp_integration

PACKAGES = (
    "cdp_integration",
    "cdp_integration.capture",
    "cdp_integration.debug",
    "cdp_integration.evaluate",
    "cdp_integration.har",
    "cdp_integration.replay",
    "cdp_integration.session",
)


def _ruff_order(names: list[str]) -> list[str]:
    return sorted(names, key=lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n))


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_unique_and_every_name_resolves(name: str) -> None:
    package = importlib.import_module(name)
    names = list(package.__all__)
    assert names == _ruff_order(names) and len(set(names)) == len(names)
    for public in names:
        value = getattr(package, public)
        assert not isinstance(value, ModuleType), f"{name}.{public} is a module"
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__module__.startswith("cdp_integration."), f"{name}.{public} is {value.__module__}'s"
    namespace: dict[str, object] = {}
    exec(f"from {name} import *", namespace)  # what a star import gives a user
    assert {key for key in namespace if key != "__builtins__"} == set(names)


def test_the_root_exports_exactly_its_short_all() -> None:
    public = {
        name
        for name in dir(cdp_integration)
        if not name.startswith("_") and not inspect.ismodule(getattr(cdp_integration, name))
    }
    assert public == set(cdp_integration.__all__)
    assert len(cdp_integration.__all__) <= 25
    assert isinstance(cdp_integration.__version__, str) and cdp_integration.__version__


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        _ = cdp_integration.nope  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("package", "names"),
    [
        ("cdp_integration.capture", {"CDPSessionLogger"}),
        ("cdp_integration.evaluate", {"evaluate_session", "score_session_file", "score_directory"}),
        ("cdp_integration.session", {"RedactionPolicy", "Session", "load_session"}),
        ("cdp_integration.har", {"session_to_har", "load_har"}),
        ("cdp_integration.replay", {"MockPage", "replay_step", "WebArenaCDPIntegration"}),
    ],
)
def test_each_layer_exports_what_users_import_from_it(package: str, names: set[str]) -> None:
    assert names <= set(importlib.import_module(package).__all__)
