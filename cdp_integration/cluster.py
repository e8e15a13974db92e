"""Connecting to a Ray cluster, shared by ``run_infer.py --backend ray`` and ``eval --backend ray``.

``ray_session(address)`` connects to ``address`` (``HOST:PORT``, ``ray://HOST:PORT``, ``auto``; None:
``$RAY_ADDRESS``, else a new local cluster without a dashboard) and disconnects afterwards. An
address nothing listens at is one ``EnvironmentSetupError`` line at once (``ray.init`` itself would
retry for a minute). A Ray worker's environment is its node's, not ours: the variables this toolkit
and its dependencies read (``FORWARDED_PREFIXES``) are passed on in the job's ``runtime_env``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

from cdp_integration.errors import EnvironmentSetupError

__all__ = ["FORWARDED_NAMES", "FORWARDED_PREFIXES", "check_address", "ray_session", "worker_environment"]

FORWARDED_PREFIXES = ("WEBARENA_", "WA_", "OPENAI_", "AWS_", "FSSPEC_", "CDP_", "LLM_", "LITELLM_")
FORWARDED_NAMES = ("NLTK_DATA", "PLAYWRIGHT_BROWSERS_PATH", "NO_PROXY", "no_proxy", "PYTHONPATH")
CONNECT_TIMEOUT_S = 5.0


def check_address(address: str) -> None:
    """Raise ``EnvironmentSetupError`` unless something listens at ``address`` (``auto`` is Ray's to find)."""
    if address == "auto":
        return
    target = address.removeprefix("ray://")
    host, _, port = target.rpartition(":")
    if not host or not (port.isascii() and port.isdigit()) or int(port) > 65535:
        raise EnvironmentSetupError(f"Ray address {address!r}: expected HOST:PORT, ray://HOST:PORT or auto")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise EnvironmentSetupError(
            f"Ray cluster at {address} is unreachable ({exc.strerror or exc}); start it with "
            "`ray start --head` or give its address"
        ) from None


def worker_environment(python_paths: Sequence[str] = ()) -> dict[str, str]:
    """This process's variables a Ray worker needs, ``python_paths`` first on its ``PYTHONPATH``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key.startswith(FORWARDED_PREFIXES) or key in FORWARDED_NAMES
    }
    paths = [*python_paths, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


@contextlib.contextmanager
def ray_session(
    address: str | None, *, num_cpus: int | None = None, python_paths: Sequence[str] = ()
) -> Iterator[Any]:
    """The ``ray`` module, connected; see the module docstring. ``num_cpus``: a new local cluster's."""
    try:
        import ray
    except ImportError:
        raise EnvironmentSetupError(
            "--backend ray needs Ray: install the 'ray' extra (pip install 'cdp-integration[ray]')"
        ) from None
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address is not None:
        check_address(address)
    options: dict[str, Any] = {
        "runtime_env": {"env_vars": worker_environment(python_paths)},
        "log_to_driver": False,
        "configure_logging": False,
    }
    temp_dir = None
    if address is None:  # Ray's files in a temp dir of ours (short: Ray's socket paths), not /tmp/ray
        temp_dir = tempfile.mkdtemp(prefix="ray-", dir="/tmp" if os.path.isdir("/tmp") else None)
        options |= {"include_dashboard": False, "num_cpus": num_cpus, "_temp_dir": temp_dir}
    try:
        try:
            ray.init(address=address, **options)
        except Exception as exc:  # Ray raises bare Exception when a local node fails to start
            ray.shutdown()
            where = f"at {address}" if address else "(a local one)"
            raise EnvironmentSetupError(
                f"cannot connect to the Ray cluster {where}: {' '.join(str(exc).split())[:200]}"
            ) from None
        try:
            yield ray
        finally:
            ray.shutdown()
    finally:
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)
