"""Text embeddings from a transformers model, for the novelty reward's similarity (EVOL-RL compares samples by
the cosine of their embeddings): the mean of the model's last hidden states over a text's tokens, L2-normalised,
so a dot product is the cosine. Any local folder, or an embedded alias (`smollm2-135m`), offline."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from testtime.core.errors import UserError
from testtime.core.extras import require

MAX_TOKENS = 1024  # a sample's last tokens, as EVOL-RL keeps the end of a long text (where its answer is)


class MeanPooledEmbedder:
    """`embedder(texts)`: one unit vector per text. Loaded on the first call."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self._model: Any = None
        self._tokenizer: Any = None

    def _load(self) -> None:
        require("a novelty embedder", "local", "torch", "transformers")
        from transformers import AutoModel, AutoTokenizer

        from testtime.models.hf import EMBEDDED, embedded_model_dir

        path = str(embedded_model_dir(self.spec)) if self.spec in EMBEDDED else self.spec
        try:
            self._tokenizer = AutoTokenizer.from_pretrained(path)
            self._model = AutoModel.from_pretrained(path).eval()
        except OSError as exc:
            raise UserError(f"novelty embedder '{self.spec}': cannot load it ({exc})") from None
        if self._tokenizer.pad_token_id is None:
            self._tokenizer.pad_token = self._tokenizer.eos_token
        self._tokenizer.truncation_side = "left"  # a long text keeps its tail

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        import torch

        if self._model is None:
            self._load()
        encoded = self._tokenizer(
            [t or " " for t in texts], return_tensors="pt", padding=True, truncation=True, max_length=MAX_TOKENS
        )
        with torch.inference_mode():
            hidden = self._model(**encoded).last_hidden_state.float()
        mask = encoded["attention_mask"].unsqueeze(-1).float()
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return torch.nn.functional.normalize(pooled, dim=-1).tolist()
