"""Several models in one session: which model serves each role, and how a role mixes them.

A session's settings name models per role (ideate, implement, repair, refine, judge, combine)
as `--model-for ROLE=PROVIDER:MODEL[*WEIGHT][@BASE_URL]`, repeated for a weighted mix (e.g. o3
ideates, Gemini implements, as the CRFM team combined them). Roles not named use the session's
own model. Keys still come from the environment only.
"""
from __future__ import annotations

import re

from workbench.llm.errors import ProviderError
from workbench.llm.factory import PROVIDERS, make_provider
from workbench.llm.prices import PriceTable
from workbench.search.calls import ModelMix

ROLES = ("ideate", "implement", "repair", "refine", "judge", "combine")
_SPEC = re.compile(r"^(?P<role>[a-z]+)=(?P<provider>[a-z-]+):(?P<model>[^*@]+)"
                   r"(?:\*(?P<weight>[0-9.]+))?(?:@(?P<base_url>\S+))?$")


def parse_spec(text: str) -> tuple[str, dict]:
    """`implement=gemini:gemini-2.5-pro*2@http://host/v1` -> (role, {provider, model, ...});
    ValueError (one line) when it does not read."""
    match = _SPEC.match(text.strip())
    if not match:
        raise ValueError(f"--model-for {text!r}: write ROLE=PROVIDER:MODEL[*WEIGHT][@BASE_URL], "
                         "e.g. implement=gemini:gemini-2.5-pro")
    role, provider = match["role"], match["provider"]
    if role not in ROLES:
        raise ValueError(f"--model-for {text!r}: unknown role {role!r} (roles: "
                         f"{', '.join(ROLES)})")
    if provider not in PROVIDERS:
        raise ValueError(f"--model-for {text!r}: unknown provider {provider!r} (use one of "
                         f"{', '.join(PROVIDERS)})")
    weight = float(match["weight"]) if match["weight"] else 1.0
    if weight <= 0:
        raise ValueError(f"--model-for {text!r}: a weight must be positive")
    return role, {"provider": provider, "model": match["model"], "weight": weight,
                  "base_url": match["base_url"]}


def parse_specs(texts: list[str] | tuple[str, ...]) -> dict[str, list[dict]]:
    models: dict[str, list[dict]] = {}
    for text in texts:
        role, spec = parse_spec(text)
        models.setdefault(role, []).append(spec)
    return models


def build_roles(models: dict[str, list[dict]], prices: PriceTable | None = None,
                **options) -> dict[str, ModelMix]:
    """A ModelMix per role; the same provider+model+URL is one Provider shared by its roles.
    Raises ProviderError (one line: a missing key, an unknown provider)."""
    made: dict[tuple, object] = {}
    roles = {}
    for role, specs in models.items():
        members = []
        for spec in specs:
            key = (spec["provider"], spec["model"], spec.get("base_url"))
            if key not in made:
                made[key] = make_provider(spec["provider"], spec["model"], spec.get("base_url"),
                                          prices=prices, **options)
            members.append((made[key], spec.get("weight", 1.0)))
        try:
            roles[role] = ModelMix(members)
        except ValueError as e:
            raise ProviderError(f"models for {role}: {e}") from None
    return roles
