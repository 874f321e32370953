"""The fields both framework adapters take, as one pydantic model they inherit.

LangChain's and LlamaIndex's base classes are pydantic models, so an adapter is
``class Adapter(SelectorModel, FrameworkBase)``: the fields below, a
:class:`~meteora_edge.integrations.embedded.DocumentSelector` built from them once the
model is validated (a bad setting raises ``ConfigError`` itself, not a pydantic
``ValidationError``), and :attr:`SelectorModel.last_report`.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from ..errors import MissingExtraError
from .embedded import DocumentSelector

try:
    from pydantic import BaseModel, ConfigDict, Field, PrivateAttr
except ImportError as exc:  # pragma: no cover - both frameworks depend on pydantic
    raise MissingExtraError("pydantic", "langchain") from exc

__all__ = ["SelectorModel"]


class SelectorModel(BaseModel):
    """The adapters' settings.

    Args:
        bundle: a model bundle folder (its ONNX encoder, and its cross-encoder if any).
        encoder: an encoder object instead of a bundle's; neither: the hashing encoder.
        settings: pipeline settings by their ``PipelineConfig`` names (as ``select --chunks``).
        rationales, rationale_generator, verifier, tokenizer, detail, threads, precision, runtime, llm_rerank:
            see :class:`~meteora_edge.integrations.embedded.DocumentSelector`.

    Raises:
        ConfigError, BundleError, MissingExtraError: bad settings or a bundle that cannot load.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    bundle: Optional[str] = None
    encoder: Optional[Any] = None
    settings: Dict[str, Any] = Field(default_factory=dict)
    rationales: Optional[Any] = None
    rationale_generator: Optional[Any] = None
    verifier: Optional[Any] = None
    tokenizer: Optional[str] = None
    detail: str = "summary"
    threads: int = 1
    precision: str = "auto"
    runtime: Optional[Any] = None
    llm_rerank: bool = False
    _selector: DocumentSelector = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        self._selector = DocumentSelector(
            bundle=self.bundle, encoder=self.encoder, settings=self.settings, rationales=self.rationales,
            rationale_generator=self.rationale_generator, verifier=self.verifier, tokenizer=self.tokenizer,
            detail=self.detail, threads=self.threads, precision=self.precision, runtime=self.runtime,
            llm_rerank=self.llm_rerank,
        )

    @property
    def last_report(self) -> Optional[Dict[str, Any]]:
        """``select``'s JSON object for this thread's last call (None before the first)."""
        return self._selector.last_report
