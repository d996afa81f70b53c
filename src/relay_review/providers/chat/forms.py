"""Structured output: the ``response_format`` form each kind documents, and telling a refusal
of the form sent from any other failed call (the review steps down to the next form on one).
"""

from __future__ import annotations

import re

#: The structured-output form each kind's API reference documents for its chat endpoint
#: (``response_format = "auto"``). OpenRouter: per model, from the listing's
#: ``supported_parameters`` (``listing``). Kinds not named: ``json_schema`` is tried first and a
#: refusal that names ``response_format`` steps down (llama-server and vLLM take
#: ``json_schema``; llama-cpp-python answers it with a 500 and takes ``json_object`` + ``schema``).
DOCUMENTED_RESPONSE_FORMS: dict[str, str] = {
    "openrouter": "listing",
    "groq": "json_object",
    "gemini": "json_schema",
    "mistral": "json_object",
    "cerebras": "json_schema",
    "nvidia_nim": "json_object",
}
_FORM_REFUSAL = re.compile(r"response_format|json_schema|json_object|\bschema\b|grammar", re.I)


#: OpenRouter's 404 when endpoints exist but none takes the request as sent ("No endpoints found
#: that can handle the requested parameters"): about this request, not the model.
_PARAMETERS_404 = re.compile(
    r"handle the requested parameters|support the requested parameters", re.I
)


def refuses_parameters(status: int | None, detail: str) -> bool:
    """Whether a 404 says no endpoint of the model takes this request's parameters (OpenRouter):
    a fact about the request (its ``response_format``, its size), not that the model is gone."""
    return status == 404 and bool(_PARAMETERS_404.search(detail or ""))


def refuses_response_format(status: int | None, detail: str) -> bool:
    """Whether a failed call's answer is a refusal of the ``response_format`` sent: HTTP 400,
    422 or 500 whose text names it (``response_format``, ``json_schema``, a schema, a grammar),
    or OpenRouter's 404 that no endpoint takes the requested parameters (stepping the form down
    is the one change the request can make)."""
    if refuses_parameters(status, detail):
        return True
    return status in (400, 422, 500) and bool(_FORM_REFUSAL.search(detail or ""))
