"""Activation of capture inside OpenHands' BrowserEnv (``WEBARENA_CDP_LOGGING=true``): issue 4, not built yet.

Kept empty on purpose: importing this package must never change OpenHands' behaviour.
"""
