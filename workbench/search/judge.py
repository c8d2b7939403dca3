"""Restated ideas an exact-text match misses ("vectorise the loads" vs "use float4 accesses"),
judged by a model before implementation when the session's `judge_ideas` is on. The judge call
is stored and costed like any other (purpose and role `judge`); an answer that cannot be read
merges nothing. A mixin of Engine, like pipelines.py."""
from __future__ import annotations

import json
import re

from workbench.search import queries

_OBJECT = re.compile(r"\{.*\}", re.S)


def read_verdict(text: str, count: int, known: set[int]) -> dict[int, int] | None:
    """{new idea index: id of the tried idea it restates} from `{"A": 12, "B": null}`; None
    when the answer holds no such object."""
    match = _OBJECT.search(text or "")
    try:
        data = json.loads(match.group(0)) if match else None
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    verdict = {}
    for label, same in data.items():
        index = ord(label.strip().upper()[:1] or "?") - ord("A")
        if 0 <= index < count and isinstance(same, int) and same in known:
            verdict[index] = same
    return verdict


class Judging:
    def _judge_restatements(self, round_id: int, seed_id: int | None,
                            texts: list[str]) -> dict[int, int]:
        """Which new ideas restate an idea the session already has: {index: idea id}."""
        tried = queries.session_idea_texts(self.store, self.session_id)
        if not self.settings.judge_ideas or not tried or not texts:
            return {}
        prompt = self.prompts.render(
            "judge", tried="\n".join(f"{r['id']}. {r['text']}" for r in tried),
            new="\n".join(f"{chr(ord('A') + i)}. {t}" for i, t in enumerate(texts)))
        completion = self.calls.ask("judge", prompt, round_id, kernel_id=seed_id)
        verdict = read_verdict(completion.text, len(texts), {r["id"] for r in tried})
        error = None if verdict is not None else "no verdict object in the judge's answer"
        call_id = self.calls.record("judge", prompt, round_id, None, seed_id, completion, error,
                                    None if verdict is not None else "no_verdict")
        self.calls.done(call_id, "judge", completion, error)
        return verdict or {}
