"""The subscription's configuration values (`[subscription.config]` in `shardhost.toml`),
through the host's `wasi:config/store`::

    from shardhost import config

    carrier_url = config.get("carrier_url")      # None when the config has no such value

Values are read while the host calls the handler (at module top level the component is being
built, and there is no host yet: reading one raises RuntimeError). Outside a component (unit
tests) they come from the environment, `SHARDHOST_CONFIG_<NAME>` (the name upper-cased, every
character but letters and digits as `_`), or from `shardhost.testing.FakeHost(config={...})`.
"""

from __future__ import annotations

from typing import Dict, Optional, TypeVar, Union, overload

from . import _host

_D = TypeVar("_D")

__all__ = ["get", "all"]


@overload
def get(name: str) -> Optional[str]: ...


@overload
def get(name: str, default: _D) -> Union[str, _D]: ...


def get(name: str, default: object = None) -> object:
    """The value of `name` (a str), or `default` when the subscription's config has none."""
    if not isinstance(name, str):
        raise TypeError("a config name is a str, not %s" % type(name).__name__)
    value = _host.backend().config_get(name)
    return default if value is None else value


def all() -> Dict[str, str]:  # noqa: A001 (the Rust SDK's name)
    """Every value, as a dict by name (empty outside a component, but for a FakeHost's)."""
    return dict(_host.backend().config_all())
