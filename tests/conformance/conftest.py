"""The conformance suite's environment: the set-up toolkit and a private HOME for Chromium."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

from cdp_integration import environment

environment.prepare()

_home = tempfile.mkdtemp(prefix="cdp-conformance-home-")
for _name in ("HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
    os.environ[_name] = _home if _name == "HOME" else os.path.join(_home, _name.lower())
atexit.register(shutil.rmtree, _home, True)
