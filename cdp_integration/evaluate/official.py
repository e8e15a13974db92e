"""The official evaluator's settings, at the import path offline scoring has always used.

They live in ``cdp_integration.webarena`` so that capture (the live end probe) can use them too.
"""

from cdp_integration.webarena import offline_api_key, skip_evaluator_sleep, use_site_urls

__all__ = ["offline_api_key", "skip_evaluator_sleep", "use_site_urls"]
