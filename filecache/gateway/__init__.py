"""The gateway's request transform: a model-API request in, the request to send upstream out.

The HTTP server that speaks the providers' protocols lives in ``filecache.adapters.gateway``; the
LiteLLM callback in ``filecache.adapters.litellm_gateway``. Both call only ``rewrite_request``
(or ``rewrite_payload`` for a parsed request), ``open_memory`` and, after the request went out,
``record_rewrite`` (its figures: ``filecache.gateway.tally``) from here (docs/design.md, "The
gateway").
"""

from filecache.gateway.tally import CountedForms, host_label, record_rewrite
from filecache.gateway.transform import (
    API_PATHS,
    Api,
    GatewayMemory,
    GatewayPolicy,
    Rewrite,
    RewriteCounts,
    api_for_path,
    open_memory,
    rewrite_payload,
    rewrite_request,
)

__all__ = [
    "API_PATHS",
    "Api",
    "CountedForms",
    "GatewayMemory",
    "GatewayPolicy",
    "Rewrite",
    "RewriteCounts",
    "api_for_path",
    "host_label",
    "open_memory",
    "record_rewrite",
    "rewrite_payload",
    "rewrite_request",
]
