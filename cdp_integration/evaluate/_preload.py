"""Imported once by the batch scorer's fork server, so each worker starts with the evaluators loaded.

Importing BrowserGym and libwebarena takes ~3 s; workers forked from a server that already holds
them start in milliseconds. A failure here only costs that head start: workers import on their own.
"""

import contextlib

with contextlib.suppress(Exception):
    from cdp_integration import environment

    environment.prepare()
    import browsergym.webarena.task  # noqa: F401
    import webarena.evaluation_harness.evaluators  # noqa: F401

    import cdp_integration.evaluate.scoring  # noqa: F401
