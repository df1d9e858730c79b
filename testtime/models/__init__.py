"""Model backends, chosen by the prefix of `--model`: `hf:`, `litellm:`, `openai:`, `vllm:`, `fake:`.

Each backend module registers itself in `MODELS`; heavy libraries (torch, transformers, litellm, vllm)
are imported only when a model of that kind is built.
"""

from __future__ import annotations

from typing import Any

from testtime.core.errors import UserError
from testtime.core.model import LanguageModel
from testtime.core.registry import Registry

MODELS: Registry[LanguageModel] = Registry(
    "model provider", tuple(f"testtime.models.{m}" for m in ("fake", "hf", "api", "openai_api", "vllm_engine"))
)
DEFAULT_MODEL = "hf:smollm2-135m"


def load_backends() -> None:
    """The built-ins (any read of MODELS loads them too) and the plugins."""
    from testtime.core.plugins import load_plugins

    MODELS.load_builtins()

    load_plugins()  # after the built-ins: a plugin reusing a name fails alone


def resolve_model(spec: str, **options: Any) -> LanguageModel:
    """Build the backend a spec names. Options a backend does not take are ignored by it."""
    load_backends()
    provider, sep, rest = spec.partition(":")
    if not sep:
        raise UserError(
            f"model '{spec}' has no provider prefix; {_guess(spec)}use one of "
            f"{', '.join(p + ':' for p in MODELS.names())} (e.g. {DEFAULT_MODEL})"
        )
    return MODELS.get(provider)(rest, **options)


def _guess(spec: str) -> str:
    """What a spec without a provider most likely meant: a local folder is a Hugging Face model, a
    `provider/model` name is litellm's, a bare name an OpenAI model (or one of an OpenAI-compatible server)."""
    from pathlib import Path

    if Path(spec).expanduser().is_dir():
        return f"did you mean hf:{spec}? "
    if "/" in spec:
        return f"did you mean litellm:{spec}? "
    return f"did you mean litellm:openai/{spec} or openai:{spec}? "
