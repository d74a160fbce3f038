"""The result of `fleetmedic explain`: the design.md output contract."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class ExplainInputError(ValueError):
    """The input cannot be read as text (binary data, unreadable file)."""


@dataclass
class Explanation:
    """One verdict for one text; fields the evidence does not show stay None."""

    category: str | None
    blame: str
    node: str | None
    gpu: str | None
    xid: int | None
    confidence: float
    action: str | None
    explanation: str
    evidence: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of the output contract, keys in contract order."""
        return {
            "category": self.category,
            "blame": self.blame,
            "node": self.node,
            "gpu": self.gpu,
            "xid": self.xid,
            "confidence": self.confidence,
            "action": self.action,
            "explanation": self.explanation,
            "evidence": list(self.evidence),
        }
